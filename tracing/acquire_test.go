package tracing_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/tracing"
)

func TestAcquireImmediate(t *testing.T) {
	e := newEnv(t)
	c := e.client(lock.Config{})
	n := name(t)
	ctx, req := e.tp.Tracer("test").Start(context.Background(), "request")

	h, err := c.Mutex(n).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	req.End()

	acq := e.one(tracing.SpanAcquire)
	if acq.Parent().SpanID() != req.SpanContext().SpanID() {
		t.Error("rlock.acquire is not a child of the caller's span")
	}
	if acq.SpanKind() != trace.SpanKindInternal {
		t.Errorf("acquire span kind %v", acq.SpanKind())
	}
	wantAttrs(t, acq, map[string]any{
		"rlock.lock.name":         n,
		"rlock.master.address":    c.Addr(),
		"rlock.acquire.blocking":  true,
		"rlock.acquire.attempts":  1,
		"rlock.acquire.reentrant": false,
		"rlock.acquire.waited":    0.0,
		"rlock.masters.tried":     1,
		"rlock.masters.acquired":  1,
	})
	if acq.Status().Code != codes.Unset {
		t.Errorf("acquire status %v", acq.Status())
	}
	if sc := acq.InstrumentationScope(); sc.Name != tracing.ScopeName || sc.Version != tracing.Version {
		t.Errorf("scope %+v", sc)
	}

	hold := e.one(tracing.SpanHold)
	if hold.Parent().SpanID() != req.SpanContext().SpanID() {
		t.Error("rlock.hold is not a child of the caller's span")
	}
	if !linksTo(hold, acq.SpanContext()) {
		t.Error("rlock.hold does not link to rlock.acquire")
	}
	if !hold.StartTime().Equal(acq.EndTime()) {
		t.Errorf("hold starts at %v, acquire ends at %v", hold.StartTime(), acq.EndTime())
	}
	wantAttrs(t, hold, map[string]any{"rlock.lock.name": n, "rlock.released": true})

	rel := e.one(tracing.SpanRelease)
	if rel.Parent().SpanID() != req.SpanContext().SpanID() {
		t.Error("rlock.release is not a child of the Unlock context's span")
	}
	if !linksTo(rel, hold.SpanContext()) {
		t.Error("rlock.release does not link to rlock.hold")
	}
	if rel.StartTime().Before(hold.StartTime()) || rel.EndTime().After(hold.EndTime()) || !rel.EndTime().After(rel.StartTime()) {
		t.Errorf("release [%v, %v] outside hold [%v, %v]", rel.StartTime(), rel.EndTime(), hold.StartTime(), hold.EndTime())
	}
	wantAttrs(t, rel, map[string]any{"rlock.released": true, "rlock.held_for": 1.0})

	rm := e.metrics()
	if n, _ := hist(t, rm, "rlock.acquire.duration", outcome("acquired")); n != 1 {
		t.Errorf("acquire.duration count %d, want 1", n)
	}
	if n, s := hist(t, rm, "rlock.acquire.wait", outcome("acquired")); n != 1 || s != 0 {
		t.Errorf("acquire.wait count %d sum %v, want 1, 0", n, s)
	}
	if got := sum(t, rm, "rlock.releases", outcome("released")); got != 1 {
		t.Errorf("releases %d, want 1", got)
	}
	if got := sum(t, rm, "rlock.locks.held"); got != 0 {
		t.Errorf("locks.held %d, want 0", got)
	}
}

func TestAcquireReentrant(t *testing.T) {
	e := newEnv(t)
	c := e.client(lock.Config{})
	m := c.Mutex(name(t))
	ctx := context.Background() // no caller span: the acquire span is the hold's parent

	h1, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h2, err := m.Lock(h1.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got := sum(t, e.metrics(), "rlock.locks.held"); got != 1 {
		t.Errorf("locks.held %d while held twice by one owner, want 1", got)
	}
	if err := h2.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(e.ended(tracing.SpanHold)) != 0 {
		t.Error("hold span ended while a hold remains")
	}
	if err := h1.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}

	acqs := e.ended(tracing.SpanAcquire)
	if len(acqs) != 2 {
		t.Fatalf("%d acquire spans", len(acqs))
	}
	wantAttrs(t, acqs[0], map[string]any{"rlock.acquire.reentrant": false})
	wantAttrs(t, acqs[1], map[string]any{"rlock.acquire.reentrant": true})
	if acqs[0].Parent().IsValid() {
		t.Error("first acquire has a parent")
	}
	hold := e.one(tracing.SpanHold)
	if hold.Parent().SpanID() != acqs[0].SpanContext().SpanID() {
		t.Error("without a caller span, the hold is not a child of the first acquire")
	}
	rels := e.ended(tracing.SpanRelease)
	if len(rels) != 2 {
		t.Fatalf("%d release spans", len(rels))
	}
	wantAttrs(t, rels[0], map[string]any{"rlock.released": false})
	wantAttrs(t, rels[1], map[string]any{"rlock.released": true})
	for _, r := range rels {
		if r.Parent().SpanID() != hold.SpanContext().SpanID() {
			t.Error("Unlock(context.Background()): release is not a child of the hold")
		}
	}

	rm := e.metrics()
	if n, _ := hist(t, rm, "rlock.acquire.duration", outcome("acquired")); n != 2 {
		t.Errorf("acquire.duration count %d, want 2", n)
	}
	if got := sum(t, rm, "rlock.releases", outcome("still_held")); got != 1 {
		t.Errorf("releases still_held %d, want 1", got)
	}
	if got := sum(t, rm, "rlock.releases", outcome("released")); got != 1 {
		t.Errorf("releases released %d, want 1", got)
	}
	if got := sum(t, rm, "rlock.locks.held"); got != 0 {
		t.Errorf("locks.held %d, want 0", got)
	}
}

// TestAcquireAfterWaiting: a second Client's waiter is woken by the first's
// Unlock. Both Clients share the Observer.
func TestAcquireAfterWaiting(t *testing.T) {
	e := newEnv(t)
	a, b := e.client(lock.Config{}), e.client(lock.Config{})
	n := name(t)
	tr := e.tp.Tracer("test")
	actx, aspan := tr.Start(context.Background(), "a")
	bctx, bspan := tr.Start(context.Background(), "b")

	ha, err := a.Mutex(n).Lock(actx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		hb, err := b.Mutex(n).Lock(bctx)
		if err == nil {
			err = hb.Unlock(bctx)
		}
		got <- err
	}()
	recv(t, e.events.waiting, "Waiting")
	if err := ha.Unlock(actx); err != nil {
		t.Fatal(err)
	}
	if err := recv(t, got, "b's Lock"); err != nil {
		t.Fatal(err)
	}
	aspan.End()
	bspan.End()

	var bacq, bhold bool
	for _, s := range e.ended(tracing.SpanAcquire) {
		if s.Parent().SpanID() != bspan.SpanContext().SpanID() {
			continue
		}
		bacq = true
		wantAttrs(t, s, map[string]any{"rlock.acquire.waited": 1.0, "rlock.masters.acquired": 1})
		if v, _ := attr(s, "rlock.acquire.attempts"); v.AsInt64() < 2 {
			t.Errorf("b's attempts %d", v.AsInt64())
		}
		if _, ok := hasEvent(s, "rlock.wait"); !ok {
			t.Error("no rlock.wait event on b's acquire span")
		}
		if ev, ok := hasEvent(s, "rlock.wake_up"); !ok || eventAttr(ev, "rlock.reason") != "message" {
			t.Errorf("rlock.wake_up event %+v", ev)
		}
		// The sleep is a span of its own, the acquire's child.
		waits := 0
		for _, w := range e.ended(tracing.SpanWait) {
			if w.Parent().SpanID() == s.SpanContext().SpanID() {
				waits++
				wantAttrs(t, w, map[string]any{"rlock.reason": "message"})
			}
		}
		if waits != 1 {
			t.Errorf("%d rlock.wait spans under b's acquire, want 1", waits)
		}
	}
	holds := e.ended(tracing.SpanHold)
	if len(holds) != 2 {
		t.Fatalf("%d hold spans", len(holds))
	}
	// Each hold ended with its own release: the hold spans are told apart
	// by owner, though b may acquire and release before a's Unlock
	// returns.
	var ahold bool
	for _, s := range holds {
		switch s.Parent().SpanID() {
		case aspan.SpanContext().SpanID():
			ahold = true
		case bspan.SpanContext().SpanID():
			bhold = true
		}
		for _, r := range e.ended(tracing.SpanRelease) {
			if r.Parent().SpanID() == s.Parent().SpanID() && !linksTo(r, s.SpanContext()) {
				t.Error("a release links to another owner's hold")
			}
		}
		wantAttrs(t, s, map[string]any{"rlock.released": true})
	}
	if !bacq || !ahold || !bhold {
		t.Errorf("b's acquire %v, a's hold %v, b's hold %v", bacq, ahold, bhold)
	}

	rm := e.metrics()
	if got := sum(t, rm, "rlock.wakeups", reason("message")); got != 1 {
		t.Errorf("wakeups %d, want 1", got)
	}
	if n, s := hist(t, rm, "rlock.acquire.wait", outcome("acquired")); n != 2 || s <= 0 {
		t.Errorf("acquire.wait count %d sum %v", n, s)
	}
	if got := sum(t, rm, "rlock.releases", outcome("released")); got != 2 {
		t.Errorf("releases %d, want 2", got)
	}
	if got := sum(t, rm, "rlock.locks.held"); got != 0 {
		t.Errorf("locks.held %d, want 0", got)
	}
}

func TestTryLockFails(t *testing.T) {
	e := newEnv(t)
	a, b := e.client(lock.Config{}), e.client(lock.Config{})
	n := name(t)
	h, err := a.Mutex(n).Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer h.Unlock(context.Background())

	for _, tc := range []struct {
		name  string
		wait  time.Duration
		woken bool
	}{{"NoWait", 0, false}, {"Wait", 300 * time.Millisecond, true}} {
		t.Run(tc.name, func(t *testing.T) {
			e.spans.Reset()
			ctx, span := e.tp.Tracer("test").Start(context.Background(), tc.name)
			_, err := b.Mutex(n).TryLock(ctx, lock.Wait(tc.wait))
			span.End()
			if !errors.Is(err, lock.ErrNotAcquired) {
				t.Fatalf("TryLock: %v", err)
			}
			acq := e.one(tracing.SpanAcquire)
			if acq.Status().Code != codes.Error || acq.Status().Description != err.Error() {
				t.Errorf("status %+v", acq.Status())
			}
			wantAttrs(t, acq, map[string]any{
				"error.type":             "not_acquired",
				"rlock.acquire.blocking": false,
				"rlock.masters.acquired": 0,
			})
			if _, ok := hasEvent(acq, "exception"); ok {
				t.Error("contention recorded as an exception")
			}
			ev, ok := hasEvent(acq, "rlock.wake_up")
			if ok != tc.woken || (ok && eventAttr(ev, "rlock.reason") != "timeout") {
				t.Errorf("wake_up event %v %+v", ok, ev)
			}
			if len(e.ended(tracing.SpanHold)) != 0 {
				t.Error("a failed acquire started a hold")
			}
		})
	}
	rm := e.metrics()
	if n, _ := hist(t, rm, "rlock.acquire.duration", outcome("not_acquired")); n != 2 {
		t.Errorf("acquire.duration not_acquired count %d, want 2", n)
	}
	if got := sum(t, rm, "rlock.wakeups", reason("timeout")); got != 1 {
		t.Errorf("wakeups timeout %d, want 1", got)
	}
	if got := sum(t, rm, "rlock.locks.held"); got != 1 {
		t.Errorf("locks.held %d, want 1", got)
	}
}

// TestAcquireUnavailable: an error other than contention is an exception.
func TestAcquireUnavailable(t *testing.T) {
	e := newEnv(t)
	c := e.client(lock.Config{CommandTimeout: 200 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.srv.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := c.Mutex(name(t)).Lock(ctx)
	if err := e.srv.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(err, lock.ErrUnavailable) {
		t.Fatalf("Lock on a stopped server: %v", err)
	}
	acq := e.one(tracing.SpanAcquire)
	if acq.Status().Code != codes.Error {
		t.Errorf("status %+v", acq.Status())
	}
	wantAttrs(t, acq, map[string]any{"error.type": "unavailable", "rlock.masters.acquired": 0})
	if _, ok := hasEvent(acq, "exception"); !ok {
		t.Error("no exception event")
	}
	if n, _ := hist(t, e.metrics(), "rlock.acquire.duration", outcome("error")); n != 1 {
		t.Errorf("acquire.duration error count %d, want 1", n)
	}
}

// A fair lock's waiter records its place in the queue on the wait event
// and the wait span.
func TestFairWaitCarriesThePosition(t *testing.T) {
	e := newEnv(t)
	a, b, c := e.client(lock.Config{}), e.client(lock.Config{}), e.client(lock.Config{})
	n := name(t)
	tr := e.tp.Tracer("test")
	ha, err := a.FairMutex(n).Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cctx, cspan := tr.Start(context.Background(), "c")
	got := make(chan error, 2)
	lockThenUnlock := func(cl *lock.Client, ctx context.Context) {
		h, err := cl.FairMutex(n).Lock(ctx)
		if err == nil {
			err = h.Unlock(ctx)
		}
		got <- err
	}
	go lockThenUnlock(b, context.Background())
	recv(t, e.events.waiting, "b's Waiting")
	go lockThenUnlock(c, cctx)
	recv(t, e.events.waiting, "c's Waiting")
	if err := ha.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := recv(t, got, "a waiter's Lock"); err != nil {
			t.Fatal(err)
		}
	}
	cspan.End()
	var found bool
	for _, s := range e.ended(tracing.SpanAcquire) {
		if s.Parent().SpanID() != cspan.SpanContext().SpanID() {
			continue
		}
		ev, ok := hasEvent(s, "rlock.wait")
		if !ok || eventAttr(ev, "rlock.queue.position") != "2" {
			t.Fatalf("c's rlock.wait event %+v: want rlock.queue.position 2", ev)
		}
		found = true
	}
	if !found {
		t.Fatal("no acquire span of c")
	}
}
