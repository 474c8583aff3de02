// Package tracing records rlock's locks with OpenTelemetry: spans for
// acquisitions, holds, releases and renewals, and metrics for latency,
// waits, locks held, renewals, losses and wake-ups.
//
//	c, err := lock.New(ctx, lock.Config{Observer: tracing.New()})
//
// New uses the global TracerProvider and MeterProvider unless
// WithTracerProvider and WithMeterProvider say otherwise, like otelhttp.
// Without an Observer, the lock package does nothing for observability at
// all; with New on no-op providers (the globals when no SDK is
// installed), it records nothing and allocates little.
//
// # Spans
//
//   - rlock.acquire: one Lock or TryLock call, a child of the span in the
//     call's context. Attributes: rlock.lock.name, rlock.master.address,
//     rlock.owner, rlock.acquire.blocking, rlock.acquire.max_wait and
//     rlock.lease (seconds, when given), rlock.acquire.attempts,
//     rlock.acquire.reentrant, rlock.acquire.waited (seconds asleep),
//     rlock.fence (Fenced), rlock.masters.tried and rlock.masters.acquired.
//     A failed call has status Error and an error.type: not_acquired for
//     ErrNotAcquired (contention, no exception event), unavailable,
//     closed, invalid, ... (with an exception event). Events rlock.wait
//     (going to sleep; rlock.holder.ttl) and rlock.wake_up (rlock.reason:
//     message, reconnect, timeout; rlock.slept).
//   - rlock.hold: a lock held, from the end of the acquisition that was
//     not a re-entry to the Unlock that freed it or to its loss. Its
//     parent is the span of the context given to Lock — the acquire span's
//     parent, as the Held's context derives from that context and not from
//     the acquire span — or, when that context had no span, the acquire
//     span; it links to the acquire span. On loss it gets an
//     rlock.lock_lost event (rlock.reason), error.type lock_lost and
//     status Error.
//   - rlock.release: one Unlock call, a child of the Unlock context's span
//     (linking to the hold span), or of the hold span when that context
//     has none; no span when neither exists. Attributes rlock.released
//     (false: a re-entry's release, the lock is still held) and
//     rlock.held_for (seconds).
//   - rlock.renew: one watchdog tick on one master, a root span:
//     rlock.renew.commands, .round_trips, .renewed, .lost, .failed.
//
// # Metrics
//
// rlock.acquire.duration and rlock.acquire.wait (histograms, seconds;
// rlock.outcome acquired, not_acquired or error), rlock.locks.held
// (up-down counter), rlock.renewals (rlock.outcome renewed, lost,
// failed), rlock.losses (rlock.reason not_held, lease_expired,
// renew_failed, other), rlock.wakeups (rlock.reason) and rlock.releases
// (rlock.outcome released, still_held, lost, not_held, error). All carry
// rlock.master.address; none carries a lock name.
//
// SetupFromEnv installs an SDK TracerProvider exporting to stdout or over
// OTLP/HTTP as the OTEL_* environment says, for command-line programs.
// OTLP comes with the option WithOTLP(otlphttp.New), from package
// tracing/otlphttp: the OTLP exporter links gRPC and grpc-gateway, which
// a program importing only this package does not. See
// docs/observability.md.
package tracing
