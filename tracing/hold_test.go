package tracing_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/observe"
	"github.com/rlock-go/rlock/tracing"
)

// renewSpan returns the ended rlock.renew span whose attribute key is at
// least 1.
func (e *env) renewSpan(key string) sdktrace.ReadOnlySpan {
	e.t.Helper()
	for _, s := range e.ended(tracing.SpanRenew) {
		if v, _ := attr(s, key); v.AsInt64() >= 1 {
			return s
		}
	}
	e.t.Fatalf("no rlock.renew span with %s >= 1", key)
	return nil
}

// TestRenewAndForcedLoss: the watchdog's ticks are renew spans; a DEL of
// the key is found by the next tick, and the hold span ends in error.
func TestRenewAndForcedLoss(t *testing.T) {
	e := newEnv(t)
	c := e.client(lock.Config{WatchdogTimeout: 300 * time.Millisecond})
	n := name(t)
	ctx, req := e.tp.Tracer("test").Start(context.Background(), "request")
	defer req.End()

	h, err := c.Mutex(n).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for recv(t, e.events.renew, "Renew").Renewed == 0 {
	}
	renew := e.renewSpan("rlock.renew.renewed")
	if renew.Parent().IsValid() {
		t.Error("rlock.renew has a parent")
	}
	wantAttrs(t, renew, map[string]any{
		"rlock.master.address": c.Addr(),
		"rlock.renew.commands": 1,
		"rlock.renew.renewed":  1,
		"rlock.renew.lost":     0,
		"rlock.renew.failed":   0,
	})
	if v, _ := attr(renew, "rlock.renew.round_trips"); v.AsInt64() < 1 { // 2 after a NOSCRIPT
		t.Errorf("round trips %d", v.AsInt64())
	}
	if renew.Status().Code != codes.Unset || !renew.EndTime().After(renew.StartTime()) {
		t.Errorf("renew status %v, [%v, %v]", renew.Status(), renew.StartTime(), renew.EndTime())
	}

	rc := c.Redis()
	if err := rc.Do(ctx, rc.B().Del().Key(n).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	loss := recv(t, e.events.loss, "Loss")
	<-h.Done()
	if !errors.Is(context.Cause(h.Context()), lock.ErrLockLost) || loss.Name != n {
		t.Fatalf("cause %v, loss %+v", context.Cause(h.Context()), loss)
	}
	hold := e.one(tracing.SpanHold)
	if hold.Parent().SpanID() != req.SpanContext().SpanID() {
		t.Error("rlock.hold is not a child of the caller's span")
	}
	if hold.Status().Code != codes.Error || hold.Status().Description != loss.Err.Error() {
		t.Errorf("hold status %+v", hold.Status())
	}
	ev, ok := hasEvent(hold, "rlock.lock_lost")
	if !ok || eventAttr(ev, "rlock.reason") != "not_held" {
		t.Errorf("rlock.lock_lost event %v %+v", ok, ev)
	}
	wantAttrs(t, hold, map[string]any{"rlock.released": false, "error.type": "lock_lost"})
	for recv(t, e.events.renew, "Renew").Lost == 0 {
	}
	wantAttrs(t, e.renewSpan("rlock.renew.lost"), map[string]any{"rlock.renew.renewed": 0})

	// An Unlock after the loss returns at once, without a Release event.
	if err := h.Unlock(ctx); !errors.Is(err, lock.ErrLockLost) {
		t.Fatalf("Unlock after loss: %v", err)
	}
	if n := len(e.ended(tracing.SpanRelease)); n != 0 {
		t.Errorf("%d release spans for an Unlock after the loss", n)
	}

	rm := e.metrics()
	if got := sum(t, rm, "rlock.losses", reason("not_held")); got != 1 {
		t.Errorf("losses %d, want 1", got)
	}
	if got := sum(t, rm, "rlock.renewals", outcome("renewed")); got < 1 {
		t.Errorf("renewals renewed %d", got)
	}
	if got := sum(t, rm, "rlock.renewals", outcome("lost")); got != 1 {
		t.Errorf("renewals lost %d, want 1", got)
	}
	if got := sum(t, rm, "rlock.releases"); got != 0 {
		t.Errorf("releases %d, want 0", got)
	}
	if got := sum(t, rm, "rlock.locks.held"); got != 0 {
		t.Errorf("locks.held %d, want 0", got)
	}
}

// TestRenewFailsUntilLoss: a stopped server makes renewals fail (error
// spans) until the lease must have run out: a loss for renew_failed.
// (Whether a tick fails before the one that declares the loss depends on
// the scheduler: it is not asserted.)
func TestRenewFailsUntilLoss(t *testing.T) {
	e := newEnv(t)
	c := e.client(lock.Config{WatchdogTimeout: 300 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h, err := c.Mutex(name(t)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.srv.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	defer e.srv.Resume(ctx)
	recv(t, e.events.loss, "Loss")
	if err := e.srv.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	for recv(t, e.events.renew, "Renew").Lost == 0 {
	}

	// The tick that declared the loss failed too; so did those before it
	// that still had lease left, if any came in time.
	lost := e.renewSpan("rlock.renew.lost")
	if lost.Status().Code != codes.Error {
		t.Errorf("losing tick status %+v", lost.Status())
	}
	wantAttrs(t, lost, map[string]any{"error.type": "unavailable"})
	for _, s := range e.ended(tracing.SpanRenew) {
		if v, _ := attr(s, "rlock.renew.failed"); v.AsInt64() > 0 && s.Status().Code != codes.Error {
			t.Errorf("failed tick status %+v", s.Status())
		}
	}
	ev, ok := hasEvent(e.one(tracing.SpanHold), "rlock.lock_lost")
	if !ok || eventAttr(ev, "rlock.reason") != "renew_failed" {
		t.Errorf("rlock.lock_lost event %v %+v", ok, ev)
	}
	if err := h.Unlock(ctx); !errors.Is(err, lock.ErrLockLost) {
		t.Errorf("Unlock after loss: %v", err)
	}
	rm := e.metrics()
	if got := sum(t, rm, "rlock.renewals", outcome("lost")); got != 1 {
		t.Errorf("renewals lost %d, want 1", got)
	}
	if got := sum(t, rm, "rlock.losses", reason("renew_failed")); got != 1 {
		t.Errorf("losses renew_failed %d, want 1", got)
	}
	if got := sum(t, rm, "rlock.locks.held"); got != 0 {
		t.Errorf("locks.held %d, want 0", got)
	}
}

// TestNoopAllocations bounds what an Observer on no-op providers costs
// for one acquisition and release, without Redis.
func TestNoopAllocations(t *testing.T) {
	obs := tracing.New(
		tracing.WithTracerProvider(tracenoop.NewTracerProvider()),
		tracing.WithMeterProvider(metricnoop.NewMeterProvider()),
	)
	ctx := context.Background()
	const addr = "127.0.0.1:6379"
	allocs := testing.AllocsPerRun(1000, func() {
		octx := obs.AcquireStart(ctx, observe.AcquireStart{Name: "n", Addr: addr, Owner: 1, Blocking: true})
		obs.AcquireEnd(octx, observe.AcquireEnd{Name: "n", Addr: addr, Acquired: true, Attempts: 1})
		obs.Release(ctx, observe.Release{Name: "n", Addr: addr, Released: true})
	})
	t.Logf("%.0f allocations per acquire and release", allocs)
	if allocs > 1 {
		t.Errorf("%.0f allocations per acquire and release on no-op providers", allocs)
	}
}
