// Package observe defines the events of rlock's locks, for tracing and
// metrics (package tracing turns them into OpenTelemetry spans and
// metrics) or for tests: an Observer set in lock.Config receives a
// Client's events, and multilock.Observe gives one to a MultiLock or
// RedLock call. It has no dependencies beyond the standard library.
package observe

import (
	"context"
	"time"
)

// Observer receives a lock's events. Every field is optional; a nil
// Observer, or a nil field, costs one comparison.
//
// The functions run on the caller's goroutine (acquire, wait, release,
// round) or on the watchdog's (renew, loss) and must not block.
type Observer struct {
	// AcquireStart is called when Lock or TryLock starts. The context it
	// returns (for instance carrying a span) is the one passed to the
	// later events of that call.
	AcquireStart func(ctx context.Context, e AcquireStart) context.Context
	// AcquireEnd is called when Lock or TryLock returns.
	AcquireEnd func(ctx context.Context, e AcquireEnd)
	// Waiting is called when a waiter goes to sleep after a failed attempt.
	Waiting func(ctx context.Context, e Waiting)
	// WakeUp is called when a sleeping waiter wakes.
	WakeUp func(ctx context.Context, e WakeUp)
	// Renew is called after each watchdog tick that had work.
	Renew func(e Renew)
	// Release is called when an Unlock of a live hold returns, and for
	// each hold that Close releases (Closed set; ctx is Close's). An
	// Unlock of a hold that had already ended (unlocked, lost, closed)
	// sends nothing and reports nothing. ctx is the Unlock's.
	Release func(ctx context.Context, e Release)
	// Loss is called when a held lock is lost. ctx is the lost Held's
	// context (already cancelled), whose values (a span) remain readable.
	Loss func(ctx context.Context, e Loss)
	// Round is called after each round of a MultiLock or RedLock call's
	// attempts on its masters (package multilock).
	Round func(ctx context.Context, e Round)
}

// AcquireStart describes a Lock or TryLock call.
type AcquireStart struct {
	Name     string
	Addr     string
	Owner    uint64
	Blocking bool          // Lock: waits until acquired or ctx ends
	Wait     time.Duration // TryLock's wait
	Lease    time.Duration // explicit lease; 0 means the watchdog's
}

// AcquireEnd describes how a Lock or TryLock call ended.
type AcquireEnd struct {
	Name      string
	Addr      string
	Acquired  bool
	Reentrant bool          // the owner already held the lock
	Attempts  int           // acquire scripts sent
	Waited    time.Duration // time spent asleep between attempts
	Duration  time.Duration // the whole call
	Fence     uint64        // fencing token, with Fenced
	// AcquiredAt is when the acquire that succeeded was sent: the Held's
	// AcquiredAt. Zero when not acquired.
	AcquiredAt time.Time
	Err        error
}

// Waiting describes a waiter going to sleep.
type Waiting struct {
	Name string
	Addr string
	TTL  time.Duration // the holder's remaining lease (negative if none); with Err, the delay
	// Err is set when the waiter waits out an outage (a blocking Lock
	// whose attempt could not reach Redis) rather than a holder.
	Err error
	// Position is a fair lock's waiter's place in the queue in Redis (1:
	// the head, woken by the next release); 0 for other locks, or when
	// the waiter is not queued.
	Position int
}

// WakeReason says what woke a waiter.
type WakeReason string

// Wake reasons.
const (
	WakeMessage   WakeReason = "message"   // an unlock message
	WakeReconnect WakeReason = "reconnect" // the subscription reconnected
	WakeTimeout   WakeReason = "timeout"   // the holder's lease ran out
	WakeRelease   WakeReason = "release"   // a release by this Client
	WakeRetry     WakeReason = "retry"     // the delay after an outage ended
	WakeDelay     WakeReason = "delay"     // a MultiLock's random delay between rounds ran out
	WakePoll      WakeReason = "poll"      // a spin lock's sleep between attempts ran out
)

// WakeUp describes a waiter waking.
type WakeUp struct {
	Name   string
	Addr   string // for a MultiLock, the master whose unlock channel woke it
	Reason WakeReason
	Slept  time.Duration
}

// Renew describes one watchdog tick on one master.
type Renew struct {
	Addr       string
	Commands   int // renew commands, all in one round trip
	RoundTrips int
	Renewed    int
	Lost       int
	Failed     int
	Duration   time.Duration
	Err        error
}

// Release describes an Unlock.
type Release struct {
	Name     string
	Addr     string
	Owner    uint64        // the hold's owner (AcquireStart.Owner)
	Released bool          // the last hold went: the lock is free
	HeldFor  time.Duration // since this hold was acquired
	Duration time.Duration // the Unlock call, retries included
	Closed   bool          // released by Client.Close
	Err      error
}

// Loss describes a lost lock.
type Loss struct {
	Name    string
	Addr    string
	Owner   uint64        // the lost holds' owner (AcquireStart.Owner)
	HeldFor time.Duration // since the lock's first hold was acquired
	Kind    LossKind
	Reason  string // what showed the loss, in words
	Err     error  // the Held's cause: a *lock.LostError, matching lock.ErrLockLost
}

// LossKind classifies a loss (Loss.Kind, lock.LostError.Kind).
type LossKind string

// Kinds of loss.
const (
	// LossNotHeld: Redis said the lock was no longer ours (the key
	// expired, was deleted or flushed, or another holder had it).
	LossNotHeld LossKind = "not_held"
	// LossLeaseExpired: an explicit lease ran out.
	LossLeaseExpired LossKind = "lease_expired"
	// LossRenewFailed: renewals failed (or a release stayed unanswered)
	// until the lease must have run out.
	LossRenewFailed LossKind = "renew_failed"
	// LossForceUnlocked: ForceUnlock by the holder's own Client.
	LossForceUnlocked LossKind = "force_unlocked"
	// LossQuorum: a multi-master lock kept fewer masters than its quorum.
	LossQuorum LossKind = "quorum_lost"
)

// Round describes one round of a MultiLock or RedLock call's attempts.
type Round struct {
	Attempt  int           // 1 for the first round of the call
	Masters  int           // masters tried
	Needed   int           // the quorum
	Granted  int           // masters that granted in time
	Refused  int           // masters held by another owner
	Elapsed  time.Duration // from the round's start to its decision
	Validity time.Duration // lease − elapsed − drift at the decision
	Acquired bool
	Err      error // why the round failed
}
