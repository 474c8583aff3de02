package tracing

import (
	"errors"
	"sync"

	"github.com/rlock-go/rlock/observe"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the tracer and the meter.
const ScopeName = "github.com/rlock-go/rlock/tracing"

// Version is the instrumentation scope version.
const Version = "0.1.0"

// Span names.
const (
	SpanAcquire = "rlock.acquire"
	SpanHold    = "rlock.hold"
	SpanRelease = "rlock.release"
	SpanRenew   = "rlock.renew"
	// SpanWait is one sleep of a waiting acquire, a child of its
	// rlock.acquire span: from going to sleep to the wake-up.
	SpanWait = "rlock.wait"
)

// Attribute keys, on spans and (the three marked) on metrics.
const (
	keyName      = attribute.Key("rlock.lock.name")
	keyMaster    = attribute.Key("rlock.master.address") // also on metrics
	keyOutcome   = attribute.Key("rlock.outcome")        // metrics only
	keyReason    = attribute.Key("rlock.reason")         // also on metrics
	keyOwner     = attribute.Key("rlock.owner")
	keyBlocking  = attribute.Key("rlock.acquire.blocking")
	keyMaxWait   = attribute.Key("rlock.acquire.max_wait")
	keyLease     = attribute.Key("rlock.lease")
	keyAttempts  = attribute.Key("rlock.acquire.attempts")
	keyReentrant = attribute.Key("rlock.acquire.reentrant")
	keyWaited    = attribute.Key("rlock.acquire.waited")
	keyFence     = attribute.Key("rlock.fence")
	keyTried     = attribute.Key("rlock.masters.tried")
	keyAcquired  = attribute.Key("rlock.masters.acquired")
	keyTTL       = attribute.Key("rlock.holder.ttl")
	keyPosition  = attribute.Key("rlock.queue.position")
	keySlept     = attribute.Key("rlock.slept")
	keyReleased  = attribute.Key("rlock.released")
	keyHeldFor   = attribute.Key("rlock.held_for")
	keyCommands  = attribute.Key("rlock.renew.commands")
	keyTrips     = attribute.Key("rlock.renew.round_trips")
	keyRenewed   = attribute.Key("rlock.renew.renewed")
	keyLost      = attribute.Key("rlock.renew.lost")
	keyFailed    = attribute.Key("rlock.renew.failed")
	keyErrorType = attribute.Key("error.type")
)

// Option configures New.
type Option func(*config)

type config struct {
	tp trace.TracerProvider
	mp metric.MeterProvider
}

// WithTracerProvider makes New take its tracer from tp. Default (or nil):
// the global provider, otel.GetTracerProvider().
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tp = tp }
}

// WithMeterProvider makes New take its meter from mp. Default (or nil):
// the global provider, otel.GetMeterProvider().
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.mp = mp }
}

// observer holds the tracer, the instruments (made once, by New) and the
// spans of the locks held.
type observer struct {
	tracer trace.Tracer

	acquireDuration metric.Float64Histogram
	acquireWait     metric.Float64Histogram
	held            metric.Int64UpDownCounter
	renewals        metric.Int64Counter
	losses          metric.Int64Counter
	wakeups         metric.Int64Counter
	releases        metric.Int64Counter

	masters sync.Map // address -> *master
	holds   holds
}

// New returns a observe.Observer that records spans and metrics with
// OpenTelemetry: set it as lock.Config.Observer. One Observer may serve
// several Clients. Instruments are created here, once; an error creating
// one is passed to otel.Handle and that instrument does nothing.
func New(opts ...Option) *observe.Observer {
	var c config
	for _, opt := range opts {
		if opt != nil {
			opt(&c)
		}
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	o := &observer{
		tracer: c.tp.Tracer(ScopeName, trace.WithInstrumentationVersion(Version)),
	}
	o.holds.m = map[holdKey][]trace.Span{}
	o.instruments(c.mp.Meter(ScopeName, metric.WithInstrumentationVersion(Version)))
	return &observe.Observer{
		AcquireStart: o.acquireStart,
		AcquireEnd:   o.acquireEnd,
		Waiting:      o.waiting,
		WakeUp:       o.wakeUp,
		Renew:        o.renew,
		Release:      o.release,
		Loss:         o.loss,
	}
}

// secondsBuckets spans a fast acquire on a LAN (100µs) to a long wait.
var secondsBuckets = []float64{
	0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
	0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300,
}

func (o *observer) instruments(m metric.Meter) {
	var errs []error
	check := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	nm := metricnoop.Meter{}
	var err error
	if o.acquireDuration, err = m.Float64Histogram("rlock.acquire.duration",
		metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(secondsBuckets...),
		metric.WithDescription("Duration of Lock and TryLock calls, waits included.")); err != nil {
		o.acquireDuration, _ = nm.Float64Histogram("")
	}
	check(err)
	if o.acquireWait, err = m.Float64Histogram("rlock.acquire.wait",
		metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(secondsBuckets...),
		metric.WithDescription("Time Lock and TryLock calls spent asleep waiting for the lock (0 if they did not wait).")); err != nil {
		o.acquireWait, _ = nm.Float64Histogram("")
	}
	check(err)
	if o.held, err = m.Int64UpDownCounter("rlock.locks.held",
		metric.WithUnit("{lock}"),
		metric.WithDescription("Locks held, re-entries not counted.")); err != nil {
		o.held, _ = nm.Int64UpDownCounter("")
	}
	check(err)
	if o.renewals, err = m.Int64Counter("rlock.renewals",
		metric.WithUnit("{renewal}"),
		metric.WithDescription("Lease renewals by the watchdog, by outcome: renewed, lost or failed.")); err != nil {
		o.renewals, _ = nm.Int64Counter("")
	}
	check(err)
	if o.losses, err = m.Int64Counter("rlock.losses",
		metric.WithUnit("{lock}"),
		metric.WithDescription("Held locks lost, by reason.")); err != nil {
		o.losses, _ = nm.Int64Counter("")
	}
	check(err)
	if o.wakeups, err = m.Int64Counter("rlock.wakeups",
		metric.WithUnit("{wakeup}"),
		metric.WithDescription("Waiters woken, by reason: message, reconnect or timeout.")); err != nil {
		o.wakeups, _ = nm.Int64Counter("")
	}
	check(err)
	if o.releases, err = m.Int64Counter("rlock.releases",
		metric.WithUnit("{release}"),
		metric.WithDescription("Unlock calls, by outcome: released, still_held, lost, not_held or error.")); err != nil {
		o.releases, _ = nm.Int64Counter("")
	}
	check(err)
	if len(errs) > 0 {
		otel.Handle(errors.Join(errs...))
	}
}
