package tracing

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlock-go/rlock/observe"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// A hold span covers one holding of a lock: from the acquisition that was
// not a re-entry to the release that freed the lock, or to its loss.
//
// The events name the hold by master, lock name and owner. The spans in
// flight are kept under that key, oldest first: one owner holds a name on
// a master once at a time, but its Release may be reported after the
// same owner, in another goroutine, took the lock again — the one to end
// is then the oldest.
//
// Holds are only kept while their span records, so an Observer on no-op
// providers keeps nothing and takes no lock.

type holdKey struct {
	addr, name string
	owner      uint64
}

type holds struct {
	n  atomic.Int64 // len of all the lists in m: 0 lets events skip mu
	mu sync.Mutex
	m  map[holdKey][]trace.Span
}

func (hs *holds) add(k holdKey, span trace.Span) {
	hs.mu.Lock()
	hs.m[k] = append(hs.m[k], span)
	hs.n.Add(1)
	hs.mu.Unlock()
}

// take removes and returns the oldest hold span of k, or nil.
func (hs *holds) take(k holdKey) trace.Span {
	if hs.n.Load() == 0 {
		return nil
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	l := hs.m[k]
	if len(l) == 0 {
		return nil
	}
	if len(l) == 1 {
		delete(hs.m, k)
	} else {
		hs.m[k] = l[1:]
	}
	hs.n.Add(-1)
	return l[0]
}

// peek returns the newest hold span of k, or nil: the one a release that
// left the lock held is about.
func (hs *holds) peek(k holdKey) trace.Span {
	if hs.n.Load() == 0 {
		return nil
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	l := hs.m[k]
	if len(l) == 0 {
		return nil
	}
	return l[len(l)-1]
}

// startHold starts the rlock.hold span of a first hold at the instant its
// acquire span ended. Its parent is the span of the context passed to
// Lock (the one the Held's context is derived from), so that the acquire
// and the hold are siblings under the caller's operation; when that
// context had no span, the acquire span is the parent instead, to keep
// both in one trace. Either way the hold links to the acquire span.
func (o *observer) startHold(a *acquireCtx, m *master, e observe.AcquireEnd, at time.Time) {
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
		kindInternal,
		trace.WithTimestamp(at),
		trace.WithLinks(trace.Link{SpanContext: acq}),
		trace.WithAttributes(attrs...),
	)
	if !span.IsRecording() {
		return
	}
	o.holds.add(holdKey{e.Addr, e.Name, a.owner}, span)
}

// release records an Unlock: its metrics, and a rlock.release span when
// the Unlock's context has a span or the hold's span records (a release
// in neither trace would be a lone root span: metrics only). A release
// that freed the lock ends the hold span.
func (o *observer) release(ctx context.Context, e observe.Release) {
	m := o.master(e.Addr)
	i := releaseOutcome(e)
	o.releases.Add(ctx, 1, m.release[i]...)
	if i == 0 {
		o.held.Add(ctx, -1, m.plain...)
	}
	var h trace.Span
	if i == 0 {
		h = o.holds.take(holdKey{e.Addr, e.Name, e.Owner})
	} else {
		h = o.holds.peek(holdKey{e.Addr, e.Name, e.Owner})
	}
	now := time.Now()
	if h != nil || trace.SpanContextFromContext(ctx).IsValid() {
		o.releaseSpan(ctx, m, e, h, now)
	}
	if h != nil && i == 0 {
		h.SetAttributes(keyReleased.Bool(true))
		h.End(trace.WithTimestamp(now))
	}
}

// releaseSpan records the rlock.release span of e, ending at now. Its
// parent is the span of the Unlock's context (then it links to the hold)
// or else the hold span.
func (o *observer) releaseSpan(ctx context.Context, m *master, e observe.Release, h trace.Span, now time.Time) {
	opts := []trace.SpanStartOption{kindInternal, trace.WithTimestamp(now.Add(-e.Duration))}
	switch {
	case h == nil:
	case trace.SpanContextFromContext(ctx).IsValid():
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: h.SpanContext()}))
	default:
		ctx = trace.ContextWithSpan(ctx, h)
	}
	_, span := o.tracer.Start(ctx, SpanRelease, opts...)
	if !span.IsRecording() {
		span.End()
		return
	}
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
	span.End(trace.WithTimestamp(now))
}

// loss records a lost lock: the rlock.lock_lost event and an error status
// on its hold span, which ends there.
func (o *observer) loss(ctx context.Context, e observe.Loss) {
	m := o.master(e.Addr)
	r := lossReason(e.Kind)
	o.losses.Add(ctx, 1, m.loss[r]...)
	o.held.Add(ctx, -1, m.plain...)
	h := o.holds.take(holdKey{e.Addr, e.Name, e.Owner})
	if h == nil {
		return
	}
	msg := "lock lost"
	if e.Err != nil {
		msg = e.Err.Error()
	}
	now := time.Now()
	h.AddEvent("rlock.lock_lost", trace.WithTimestamp(now), trace.WithAttributes(
		keyReason.String(lossReasons[r]),
		attribute.String("error.message", msg),
	))
	h.SetAttributes(keyReleased.Bool(false), keyErrorType.String("lock_lost"))
	h.SetStatus(codes.Error, msg)
	h.End(trace.WithTimestamp(now))
}

// renew records one watchdog tick on one master: a root rlock.renew span
// (the tick belongs to no caller's trace) and the renewal counts.
func (o *observer) renew(e observe.Renew) {
	m := o.master(e.Addr)
	now := time.Now()
	ctx, span := o.tracer.Start(context.Background(), SpanRenew, kindInternal, trace.WithTimestamp(now.Add(-e.Duration)))
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
