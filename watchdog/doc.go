// Package watchdog keeps the leases of held locks alive: one Registry per
// Redis master holds every lock a Client holds there, and one loop renews
// all of them each tick in ONE round trip (hand-built EVALSHA commands of
// the batched renew script, sent together with DoMulti). There is no
// goroutine and no timer per lock.
//
// A lock leaves the watchdog only through Remove (its last release) or a
// loss. A loss is never silent: the entry's OnLost function is called
// with a *LossError, exactly once, when
//
//   - a renewal answers 0: the key is gone or another holder owns it, so
//     the lock is lost at once; or
//   - renewals keep failing (errors, timeouts, a stopped server) until the
//     lease must have run out: the last successful renewal's send time
//     plus the lease, on the monotonic clock; or
//   - an entry tracked without renewal (an explicit lease) reaches the end
//     of its lease: Run wakes for the earliest such end, so this is
//     reported when it happens, not at the next tick.
//
// A tick that comes late (CPU starvation, a stopped process) still renews
// what the server says is held: an answer of 1 proves the hold never
// lapsed, because nobody else could have taken the key while our field
// was in it.
package watchdog
