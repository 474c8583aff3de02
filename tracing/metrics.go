package tracing

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/multilock"
	"github.com/rlock-go/rlock/observe"
)

// Metric attribute values. Lock names are never metric attributes: there
// may be millions of them.
const (
	outcomeAcquired    = "acquired"
	outcomeNotAcquired = "not_acquired"
	outcomeError       = "error"

	outcomeRenewed = "renewed"
	outcomeLost    = "lost"
	outcomeFailed  = "failed"

	outcomeReleased  = "released"
	outcomeStillHeld = "still_held"
	outcomeNotHeld   = "not_held"

	reasonNotHeld      = "not_held"
	reasonLeaseExpired = "lease_expired"
	reasonRenewFailed  = "renew_failed"
	reasonOther        = "other"
)

var (
	acquireOutcomes = [...]string{outcomeAcquired, outcomeNotAcquired, outcomeError}
	renewOutcomes   = [...]string{outcomeRenewed, outcomeLost, outcomeFailed}
	releaseOutcomes = [...]string{outcomeReleased, outcomeStillHeld, outcomeLost, outcomeNotHeld, outcomeError}
	lossReasons     = [...]string{reasonNotHeld, reasonLeaseExpired, reasonRenewFailed, reasonOther}
	wakeReasons     = [...]observe.WakeReason{observe.WakeMessage, observe.WakeReconnect, observe.WakeTimeout}
)

// master holds the measurement options of one master address, built once
// so that recording a measurement allocates nothing.
type master struct {
	attr    attribute.KeyValue // rlock.master.address, for spans
	plain   []metric.AddOption
	acquire [len(acquireOutcomes)][]metric.RecordOption
	renew   [len(renewOutcomes)][]metric.AddOption
	release [len(releaseOutcomes)][]metric.AddOption
	loss    [len(lossReasons)][]metric.AddOption
	wake    [len(wakeReasons)][]metric.AddOption
}

func newMaster(addr string) *master {
	m := &master{attr: keyMaster.String(addr)}
	set := func(kvs ...attribute.KeyValue) metric.MeasurementOption {
		return metric.WithAttributeSet(attribute.NewSet(kvs...))
	}
	m.plain = []metric.AddOption{set(m.attr)}
	for i, s := range acquireOutcomes {
		m.acquire[i] = []metric.RecordOption{set(m.attr, keyOutcome.String(s))}
	}
	for i, s := range renewOutcomes {
		m.renew[i] = []metric.AddOption{set(m.attr, keyOutcome.String(s))}
	}
	for i, s := range releaseOutcomes {
		m.release[i] = []metric.AddOption{set(m.attr, keyOutcome.String(s))}
	}
	for i, s := range lossReasons {
		m.loss[i] = []metric.AddOption{set(m.attr, keyReason.String(s))}
	}
	for i, r := range wakeReasons {
		m.wake[i] = []metric.AddOption{set(m.attr, keyReason.String(string(r)))}
	}
	return m
}

// master returns the options of addr. Masters are few (one per Client).
func (o *observer) master(addr string) *master {
	if m, ok := o.masters.Load(addr); ok {
		return m.(*master)
	}
	m, _ := o.masters.LoadOrStore(addr, newMaster(addr))
	return m.(*master)
}

func (o *observer) recordAcquire(ctx context.Context, m *master, e observe.AcquireEnd) {
	i := 0 // acquired
	if e.Err != nil {
		i = 2
		if contention(e.Err) {
			i = 1
		}
	}
	o.acquireDuration.Record(ctx, e.Duration.Seconds(), m.acquire[i]...)
	o.acquireWait.Record(ctx, e.Waited.Seconds(), m.acquire[i]...)
	if e.Acquired && !e.Reentrant {
		o.held.Add(ctx, 1, m.plain...)
	}
}

func (o *observer) recordRenew(ctx context.Context, m *master, e observe.Renew) {
	for i, n := range [...]int{e.Renewed, e.Lost, e.Failed} {
		if n > 0 {
			o.renewals.Add(ctx, int64(n), m.renew[i]...)
		}
	}
}

// releaseOutcome returns the index in releaseOutcomes of e's outcome.
func releaseOutcome(e observe.Release) int {
	switch {
	case e.Err == nil && e.Released:
		return 0
	case e.Err == nil:
		return 1
	case errors.Is(e.Err, lock.ErrLockLost):
		return 2
	case errors.Is(e.Err, lock.ErrNotHeld):
		return 3
	}
	return 4
}

// lossReason returns the index in lossReasons of why a lock was lost.
// lock.LostError.Reason is free text; the classes here are the watchdog's
// and Unlock's reasons.
func lossReason(kind observe.LossKind) int {
	switch kind {
	case observe.LossNotHeld:
		return 0 // the key was gone or another holder had it
	case observe.LossLeaseExpired:
		return 1 // an explicit Lease ran out
	case observe.LossRenewFailed:
		return 2 // renewals failed until the lease must have run out
	}
	return 3
}

func (o *observer) recordWake(ctx context.Context, m *master, r observe.WakeReason) {
	for i, w := range wakeReasons {
		if w == r {
			o.wakeups.Add(ctx, 1, m.wake[i]...)
			return
		}
	}
	o.wakeups.Add(ctx, 1, metric.WithAttributes(m.attr, keyReason.String(string(r))))
}

// contention reports whether err is an acquisition that ended for want of
// the lock, not for want of Redis.
func contention(err error) bool {
	return errors.Is(err, lock.ErrNotAcquired) && !errors.Is(err, lock.ErrUnavailable)
}

// errorType classifies err for the error.type attribute of spans.
func errorType(err error) string {
	var me *lock.MasterError
	switch {
	case contention(err):
		return "not_acquired"
	case errors.Is(err, lock.ErrLockLost):
		return "lock_lost"
	case errors.Is(err, lock.ErrNotHeld):
		return "not_held"
	case errors.Is(err, lock.ErrClosed):
		return "closed"
	case errors.Is(err, lock.ErrInvalid):
		return "invalid"
	case errors.Is(err, lock.ErrAuth):
		return "auth"
	case errors.Is(err, lock.ErrUnavailable):
		return "unavailable"
	case errors.Is(err, multilock.ErrQuorum):
		return "quorum"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline_exceeded"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.As(err, &me):
		return "redis"
	}
	return "_OTHER"
}
