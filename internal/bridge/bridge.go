// Package bridge carries what package multilock needs from package lock
// without making it part of lock's public surface: lock fills these in
// when it is initialised. Values of lock's types travel as any.
package bridge

import (
	"context"
	"time"

	"github.com/rlock-go/rlock/pubsub"
)

// HeldBy reports whether the Client of the *lock.Mutex m holds m's lock
// for owner now (a live hold, as far as that Client knows; no network).
var HeldBy func(m any, owner uint64) bool

// Watch subscribes to the unlock channel of the *lock.Mutex m on its
// Client's subscription and returns once the subscription is confirmed:
// every release after that wakes the Waiter (one waiter per release).
// Errors are lock's (ErrClosed, ErrUnavailable, ErrInvalid).
var Watch func(ctx context.Context, m any) (*pubsub.Waiter, error)

// WatchdogTimeout returns the lease of locks taken without the Lease
// option on the *lock.Client c (its Config.WatchdogTimeout after
// defaults; 0 for a nil or zero Client).
var WatchdogTimeout func(c any) time.Duration

// Options are the settings of one call's []lock.Option.
type Options struct {
	Wait    time.Duration
	HasWait bool
	Lease   time.Duration // 0: the watchdog's
	Fenced  bool
	Ext     any // what Extend's options stored
}

// ParseOptions applies opts (a []lock.Option) to a Lock (blocking) or
// TryLock call, checking them as lock does, and returns the settings.
var ParseOptions func(blocking bool, opts any) (Options, error)

// Extend returns a lock.Option (as any) that calls f with the call's
// extension slot, where package multilock keeps its own settings. A
// Mutex refuses such an option with ErrInvalid.
var Extend func(f func(ext *any) error) any

// Kind returns the kind of the *lock.Mutex m as multilock's local queue
// keys it ("plain", "read", ...), and whether its holds are shared with
// other holders (a read lock's).
var Kind func(m any) (kind string, shared bool)

// MutexErr returns the error every call of the *lock.Mutex m reports
// because of how it was made (a bad name), or nil.
var MutexErr func(m any) error

// Go runs f on one of the *lock.Client c's workers, long-lived goroutines
// that Client owns and joins on Close, and reports whether it could:
// false for a nil or zero Client and once Close stopped lending (f is not
// run then).
var Go func(c any, f func()) bool

// SpinSleeper returns, for a *lock.Mutex m that is a spin lock (or a fair
// lock, whose releases wake only its queue's head), a new sequence of the
// sleeps its waiter takes between attempts (Redisson's backoff, one
// sequence per call), and nil for any other Mutex: a multi-master lock of
// such locks polls their masters at that pace, since no release wakes it.
var SpinSleeper func(m any) func() time.Duration
