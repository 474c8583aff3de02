package tracing

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/rlock-go/rlock/lock"
)

// A hold span covers one holding of a lock: from the acquisition that was
// not a re-entry to the release that freed the lock, or to its loss.
//
// lock.Observer hands no hold identity to its events: Release carries the
// lock's name and master, and the context of the Unlock call, which need
// not be the Held's. So the hold spans in flight are kept by (master,
// name), oldest first. Redis lets one holder at a time hold a name on a
// master, so when several Clients share this Observer, the hold to end is
// the oldest one of the name — the newer one was acquired after it was
// freed, even if its AcquireEnd was reported before the older one's
// Release. When the event's context carries an owner (Loss always does:
// it is the lost Held's context), the hold of that owner is preferred.
//
// Holds are only kept while their span records, so an Observer on no-op
// providers keeps nothing and takes no lock.

type holdKey struct{ addr, name string }

type hold struct {
	span  trace.Span
	owner uint64
	at    time.Time
}

type holds struct {
	n  atomic.Int64 // len of all the lists in m: 0 lets events skip mu
	mu sync.Mutex
	m  map[holdKey][]*hold
}

func (hs *holds) add(k holdKey, h *hold) {
	hs.mu.Lock()
	hs.m[k] = append(hs.m[k], h)
	hs.n.Add(1)
	hs.mu.Unlock()
}

// find returns the index in l of the hold an event is about: owner's if
// known, else the oldest (first) or the newest (last).
func find(l []*hold, owner uint64, hasOwner, newest bool) int {
	if hasOwner {
		for i, h := range l {
			if h.owner == owner {
				return i
			}
		}
	}
	if newest {
		return len(l) - 1
	}
	return 0
}

// take removes and returns the hold of k an end event is about, or nil.
func (hs *holds) take(k holdKey, owner uint64, hasOwner bool) *hold {
	if hs.n.Load() == 0 {
		return nil
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	l := hs.m[k]
	if len(l) == 0 {
		return nil
	}
	i := find(l, owner, hasOwner, false)
	h := l[i]
	if len(l) == 1 {
		delete(hs.m, k)
	} else {
		hs.m[k] = append(l[:i:i], l[i+1:]...)
	}
	hs.n.Add(-1)
	return h
}

// peek returns the hold of k a release that left it held is about, or nil.
func (hs *holds) peek(k holdKey, owner uint64, hasOwner bool) *hold {
	if hs.n.Load() == 0 {
		return nil
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	l := hs.m[k]
	if len(l) == 0 {
		return nil
	}
	return l[find(l, owner, hasOwner, true)]
}

// startHold starts the rlock.hold span of a first hold at the instant its
// acquire span ended. Its parent is the span of the context passed to
// Lock (the one the Held's context is derived from), so that the acquire
// and the hold are siblings under the caller's operation; when that
// context had no span, the acquire span is the parent instead, to keep
// both in one trace. Either way the hold links to the acquire span.
func (o *observer) startHold(a *acquireCtx, m *master, e lock.AcquireEnd, at time.Time) {
	acq := a.span.SpanContext()
	parent := a.parent
	if !parent.IsValid() {
		parent = acq
	}
	attrs := []attribute.KeyValue{keyName.String(e.Name), m.attr, keyOwner.Int64(int64(a.owner))}
	if e.Fence != 0 {
		attrs = append(attrs, keyFence.Int64(int64(e.Fence)))
	}
	_, span := o.tracer.Start(trace.ContextWithSpanContext(context.Background(), parent), SpanHold,
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithTimestamp(at),
		trace.WithLinks(trace.Link{SpanContext: acq}),
		trace.WithAttributes(attrs...),
	)
	if !span.IsRecording() {
		return
	}
	o.holds.add(holdKey{e.Addr, e.Name}, &hold{span: span, owner: a.owner, at: at})
}

// release records an Unlock: a rlock.release span, whose parent is the
// span of the Unlock's context, or the hold's span when that context has
// none (Unlock(context.Background()) is common). A release that freed the
// lock ends the hold span.
func (o *observer) release(ctx context.Context, e lock.Release) {
	m := o.master(e.Addr)
	i := releaseOutcome(e)
	o.releases.Add(ctx, 1, m.release[i]...)
	if i == 0 {
		o.held.Add(ctx, -1, m.plain...)
	}
	var h *hold
	if o.holds.n.Load() > 0 {
		owner, ok := lock.OwnerFrom(ctx)
		if i == 0 {
			h = o.holds.take(holdKey{e.Addr, e.Name}, owner, ok)
		} else {
			h = o.holds.peek(holdKey{e.Addr, e.Name}, owner, ok)
		}
	}
	now := time.Now()
	pctx := ctx
	var links []trace.Link
	if h != nil {
		if trace.SpanContextFromContext(ctx).IsValid() {
			links = []trace.Link{{SpanContext: h.span.SpanContext()}}
		} else {
			pctx = trace.ContextWithSpan(ctx, h.span)
		}
	}
	_, span := o.tracer.Start(pctx, SpanRelease,
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithTimestamp(now.Add(-e.Duration)),
		trace.WithLinks(links...),
	)
	if span.IsRecording() {
		span.SetAttributes(
			keyName.String(e.Name),
			m.attr,
			keyReleased.Bool(e.Released),
			keyHeldFor.Float64(e.HeldFor.Seconds()),
		)
		if e.Err != nil {
			span.SetAttributes(keyErrorType.String(errorType(e.Err)))
			span.RecordError(e.Err)
			span.SetStatus(codes.Error, e.Err.Error())
		}
	}
	span.End(trace.WithTimestamp(now))
	if h != nil && i == 0 {
		h.span.SetAttributes(keyReleased.Bool(true), keyHeldFor.Float64(now.Sub(h.at).Seconds()))
		h.span.End(trace.WithTimestamp(now))
	}
}

// loss records a lost lock: the rlock.lock_lost event and an error status
// on its hold span, which ends there.
func (o *observer) loss(ctx context.Context, e lock.Loss) {
	m := o.master(e.Addr)
	r := lossReason(e.Err)
	o.losses.Add(ctx, 1, m.loss[r]...)
	o.held.Add(ctx, -1, m.plain...)
	owner, ok := lock.OwnerFrom(ctx)
	h := o.holds.take(holdKey{e.Addr, e.Name}, owner, ok)
	if h == nil {
		return
	}
	msg := "lock lost"
	if e.Err != nil {
		msg = e.Err.Error()
	}
	now := time.Now()
	h.span.AddEvent("rlock.lock_lost", trace.WithTimestamp(now), trace.WithAttributes(
		keyReason.String(lossReasons[r]),
		attribute.String("exception.message", msg),
	))
	h.span.SetAttributes(
		keyReleased.Bool(false),
		keyHeldFor.Float64(e.HeldFor.Seconds()),
		keyErrorType.String("lock_lost"),
	)
	h.span.SetStatus(codes.Error, msg)
	h.span.End(trace.WithTimestamp(now))
}

// renew records one watchdog tick on one master: a root rlock.renew span
// (the tick belongs to no caller's trace) and the renewal counts.
func (o *observer) renew(e lock.Renew) {
	m := o.master(e.Addr)
	now := time.Now()
	ctx, span := o.tracer.Start(context.Background(), SpanRenew,
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithTimestamp(now.Add(-e.Duration)),
	)
	o.recordRenew(ctx, m, e)
	if span.IsRecording() {
		span.SetAttributes(
			m.attr,
			keyCommands.Int(e.Commands),
			keyTrips.Int(e.RoundTrips),
			keyRenewed.Int(e.Renewed),
			keyLost.Int(e.Lost),
			keyFailed.Int(e.Failed),
		)
		switch {
		case e.Err != nil:
			span.SetAttributes(keyErrorType.String(errorType(e.Err)))
			span.RecordError(e.Err)
			span.SetStatus(codes.Error, e.Err.Error())
		case e.Failed > 0:
			span.SetStatus(codes.Error, "renewals failed")
		}
	}
	span.End(trace.WithTimestamp(now))
}
