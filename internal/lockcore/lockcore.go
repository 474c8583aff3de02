// Package lockcore is what package multilock uses of package lock beyond
// lock's API, typed with lock's own types: lock registers its Hooks when
// it is initialised, and multilock gets them with lock's types as the
// type arguments. lockcore cannot import lock (lock imports it), so it is
// generic in them: the one dynamic step is Get's check that the Hooks
// registered are of the types asked for, made once, when multilock is
// initialised. Every call through the Hooks is checked by the compiler.
package lockcore

import (
	"context"
	"fmt"
	"time"

	"github.com/rlock-go/rlock/pubsub"
)

// Hooks are lock's functions multilock calls, M being *lock.Mutex, C
// *lock.Client and O lock.Option.
type Hooks[M, C, O any] struct {
	// Describe says what a multi-master lock must know of m: see Mutex.
	Describe func(m M) Mutex
	// HeldBy reports whether m's Client holds m's lock for owner now (a
	// live hold, as far as that Client knows; no network).
	HeldBy func(m M, owner uint64) bool
	// Watch subscribes to m's unlock channel on its Client's
	// subscription and returns once the subscription is confirmed: every
	// release after that wakes the Waiter, which takes no wake-up from the
	// Client's other waiters of the channel (pubsub.Hub.Observe).
	// Errors are lock's (ErrClosed, ErrUnavailable, ErrInvalid).
	Watch func(ctx context.Context, m M) (*pubsub.Waiter, error)
	// Go runs f on one of c's workers, long-lived goroutines that Client
	// owns and joins on Close, and reports whether it could: false for a
	// nil or zero Client and once Close stopped lending (f is not run).
	Go func(c C, f func()) bool
	// ParseOptions applies opts to a Lock (blocking) or TryLock call,
	// checking them as lock does, and returns the settings.
	ParseOptions func(blocking bool, opts []O) (Options, error)
	// Extend returns an option that calls f with the call's extension
	// slot, where multilock keeps its own settings. A Mutex refuses such
	// an option with ErrInvalid.
	Extend func(f func(ext *any) error) O
}

// Mutex is what a multi-master lock knows of one of its Mutexes.
type Mutex struct {
	Err             error         // how the Mutex was made wrong (a bad name): every call reports it
	Kind            string        // its kind, as multilock's local queue keys it ("plain", "read", ...)
	Shared          bool          // its holds are shared with other holders (a read half)
	WatchdogTimeout time.Duration // its Client's lease for holds taken without the Lease option (0: no Client)
	// Sleeper returns a new sequence of the sleeps between attempts of a
	// waiter that no release wakes (a spin lock's backoff; a fair lock's
	// queue wakes only its own head): nil for every other kind.
	Sleeper func() func() time.Duration
}

// Options are the settings of one call's options.
type Options struct {
	Wait    time.Duration
	HasWait bool
	Lease   time.Duration // 0: the watchdog's
	Fenced  bool
	Ext     any // what Extend's options stored
}

var hooks any

// Register records lock's Hooks; lock calls it once, from an init.
func Register[M, C, O any](h Hooks[M, C, O]) { hooks = h }

// Get returns the Hooks registered, which must be of the types asked for.
func Get[M, C, O any]() Hooks[M, C, O] {
	h, ok := hooks.(Hooks[M, C, O])
	if !ok {
		panic(fmt.Sprintf("lockcore: the hooks registered are %T, not %T", hooks, h))
	}
	return h
}
