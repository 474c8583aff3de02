package tracing

import (
	"context"
	"time"

	"github.com/rlock-go/rlock/observe"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// acquireKey finds the acquire state in the context AcquireStart returns.
type acquireKey struct{}

// acquireCtx is the context AcquireStart returns when its span records:
// the context carrying the rlock.acquire span, plus what AcquireEnd needs
// to start the hold span. One allocation for both.
type acquireCtx struct {
	context.Context // carries span
	span            trace.Span
	parent          trace.SpanContext // the caller's span: the hold span's parent
	owner           uint64
	wait            trace.Span // the rlock.wait span of the sleep in progress, if any
}

func (c *acquireCtx) Value(k any) any {
	if k == (acquireKey{}) {
		return c
	}
	return c.Context.Value(k)
}

// acquireState returns the state AcquireStart left in ctx, or nil when
// the acquire span does not record.
func acquireState(ctx context.Context) *acquireCtx {
	a, _ := ctx.Value(acquireKey{}).(*acquireCtx)
	return a
}

// kindInternal is made once: options converted to interfaces allocate.
var (
	kindInternal = trace.WithSpanKind(trace.SpanKindInternal)
	internal     = []trace.SpanStartOption{kindInternal}
)

// acquireStart starts the rlock.acquire span, a child of the caller's.
// When the span does not record (no SDK, or not sampled), it returns ctx
// unchanged and the later events of the call record metrics only.
func (o *observer) acquireStart(ctx context.Context, e observe.AcquireStart) context.Context {
	sctx, span := o.tracer.Start(ctx, SpanAcquire, internal...)
	if !span.IsRecording() {
		return ctx
	}
	attrs := make([]attribute.KeyValue, 0, 6)
	attrs = append(attrs,
		keyName.String(e.Name),
		o.master(e.Addr).attr,
		keyOwner.Int64(int64(e.Owner)),
		keyBlocking.Bool(e.Blocking),
	)
	if !e.Blocking {
		attrs = append(attrs, keyMaxWait.Float64(e.Wait.Seconds()))
	}
	if e.Lease > 0 {
		attrs = append(attrs, keyLease.Float64(e.Lease.Seconds()))
	}
	span.SetAttributes(attrs...)
	return &acquireCtx{
		Context: sctx,
		span:    span,
		parent:  trace.SpanContextFromContext(ctx),
		owner:   e.Owner,
	}
}

// acquireEnd records the acquisition metrics, ends the acquire span and,
// for a first hold (not a re-entry), starts the rlock.hold span at the
// same instant.
func (o *observer) acquireEnd(ctx context.Context, e observe.AcquireEnd) {
	m := o.master(e.Addr)
	o.recordAcquire(ctx, m, e)
	a := acquireState(ctx)
	if a == nil {
		return
	}
	now := time.Now()
	a.endWait()
	span := a.span
	acquired := 0
	if e.Acquired {
		acquired = 1
	}
	attrs := make([]attribute.KeyValue, 0, 7)
	attrs = append(attrs,
		keyAttempts.Int(e.Attempts),
		keyReentrant.Bool(e.Reentrant),
		keyWaited.Float64(e.Waited.Seconds()),
		keyTried.Int(1),
		keyAcquired.Int(acquired),
	)
	if e.Fence != 0 {
		attrs = append(attrs, keyFence.Int64(int64(e.Fence)))
	}
	if e.Err != nil {
		attrs = append(attrs, keyErrorType.String(errorType(e.Err)))
		if !contention(e.Err) {
			// Contention is an expected outcome; everything else is an
			// exception worth its stack of causes.
			span.RecordError(e.Err)
		}
		span.SetStatus(codes.Error, e.Err.Error())
	}
	span.SetAttributes(attrs...)
	span.End(trace.WithTimestamp(now))
	if e.Acquired && !e.Reentrant {
		o.startHold(a, m, e, now)
	}
}

// waiting adds a wait event to the acquire span and starts a rlock.wait
// span, its child, which the wake-up (or the acquire's end) ends: each
// sleep of a wait shows in a trace as a span of its own.
func (o *observer) waiting(ctx context.Context, e observe.Waiting) {
	a := acquireState(ctx)
	if a == nil {
		return
	}
	var attrs []attribute.KeyValue
	if e.TTL >= 0 {
		attrs = append(attrs, keyTTL.Float64(e.TTL.Seconds()))
	}
	if e.Err != nil {
		attrs = append(attrs, keyErrorType.String(errorType(e.Err)))
	}
	if e.Position > 0 {
		attrs = append(attrs, keyPosition.Int(e.Position))
	}
	a.span.AddEvent("rlock.wait", trace.WithAttributes(attrs...))
	if a.wait != nil {
		a.wait.End()
	}
	_, a.wait = o.tracer.Start(a.Context, SpanWait, kindInternal, trace.WithAttributes(attrs...))
	if e.Err != nil {
		a.wait.SetStatus(codes.Error, e.Err.Error())
	}
}

// endWait ends the wait span in progress, if any.
func (a *acquireCtx) endWait(attrs ...attribute.KeyValue) {
	if a.wait == nil {
		return
	}
	a.wait.SetAttributes(attrs...)
	a.wait.End()
	a.wait = nil
}

// wakeUp counts the wake-up and adds an event to the acquire span.
func (o *observer) wakeUp(ctx context.Context, e observe.WakeUp) {
	o.recordWake(ctx, o.master(e.Addr), e.Reason)
	a := acquireState(ctx)
	if a == nil {
		return
	}
	a.span.AddEvent("rlock.wake_up", trace.WithAttributes(
		keyReason.String(string(e.Reason)),
		keySlept.Float64(e.Slept.Seconds()),
	))
	a.endWait(keyReason.String(string(e.Reason)))
}
