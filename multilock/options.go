package multilock

import (
	"context"
	"fmt"
	"time"

	"github.com/rlock-go/rlock/lock"
)

// Defaults of the options.
const (
	// DefaultPerMasterTimeout bounds how long a round waits for the
	// masters' answers; the default is this or a quarter of the lease,
	// whichever is shorter.
	DefaultPerMasterTimeout = 200 * time.Millisecond
	// DefaultDriftFactor and DefaultDriftFixed make the clock drift
	// allowance lease × 0.01 + 2ms, the figures of the Redlock algorithm.
	DefaultDriftFactor = 0.01
	DefaultDriftFixed  = 2 * time.Millisecond
)

// Retry delays after a failed round that was not refused by a holder:
// exponential with ±50% jitter between these bounds.
const (
	minRetryDelay = 20 * time.Millisecond
	maxRetryDelay = time.Second
)

// Option modifies one Lock or TryLock call.
type Option func(*options) error

type options struct {
	wait        time.Duration
	hasWait     bool
	lease       time.Duration // explicit lease; 0: the masters' watchdog
	driftFactor float64
	driftFixed  time.Duration
	perMaster   time.Duration
	fenced      bool
	obs         *Observer

	validityLease time.Duration // lease used for validity: explicit, or the shortest watchdog lease
	drift         time.Duration
	mopts         []lock.Option // passed to every master's TryLock
}

// Wait makes TryLock retry for up to d (default 0: one round). Lock
// waits until its context ends and refuses this option.
func Wait(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 {
			return invalidf("negative wait %v", d)
		}
		o.wait, o.hasWait = d, true
		return nil
	}
}

// Lease holds the lock for d on every master, without the watchdog: it
// expires d after the round that acquired it began, unless released
// before. Without Lease, each master's Client renews its lease
// (Config.WatchdogTimeout) until Unlock.
func Lease(d time.Duration) Option {
	return func(o *options) error {
		if d < lock.MinLease {
			return invalidf("lease %v is shorter than %v", d, lock.MinLease)
		}
		o.lease = d
		return nil
	}
}

// Drift sets the clock drift allowance subtracted from the lease when
// computing a lock's validity: lease × factor + fixed. Default
// DefaultDriftFactor, DefaultDriftFixed. Raise it when the masters' clocks
// (their timers: Redis expires keys by its own clock) may run faster
// than yours by more than 1%.
func Drift(factor float64, fixed time.Duration) Option {
	return func(o *options) error {
		if !(factor >= 0 && factor < 1) || fixed < 0 {
			return invalidf("drift factor %v (want [0, 1)) and fixed %v (want >= 0)", factor, fixed)
		}
		o.driftFactor, o.driftFixed = factor, fixed
		return nil
	}
}

// PerMasterTimeout bounds how long one round waits for the masters'
// answers (default DefaultPerMasterTimeout, at most a quarter of the
// lease). It must be much shorter than the lease: a round that takes
// longer leaves less validity. A master that answers later counts as
// failed in that round; whatever its late answer took is given back.
func PerMasterTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return invalidf("per-master timeout %v", d)
		}
		o.perMaster = d
		return nil
	}
}

// Fenced takes a fencing token with the acquisition, returned by
// Held.Fence: every master's counter "redisson_lock_token:{name}" is
// incremented, the highest value among the masters that granted is the
// token, and it is written back (raised, never lowered) to the masters
// before Lock returns, so that tokens of a name strictly increase across
// acquisitions. See Held.Fence for what it does and does not protect.
func Fenced() Option {
	return func(o *options) error { o.fenced = true; return nil }
}

// Observe sends the call's events to obs (nil: none).
func Observe(obs *Observer) Option {
	return func(o *options) error { o.obs = obs; return nil }
}

// options applies opts to the defaults and checks them against the Lock.
func (l *Lock) options(blocking bool, opts []Option) (*options, error) {
	o := &options{driftFactor: DefaultDriftFactor, driftFixed: DefaultDriftFixed}
	for _, opt := range opts {
		if opt == nil {
			return nil, invalidf("nil Option")
		}
		if err := opt(o); err != nil {
			return nil, err
		}
	}
	if blocking && o.hasWait {
		return nil, invalidf("Wait is TryLock's option; Lock waits until ctx ends")
	}
	o.validityLease = o.lease
	if o.validityLease == 0 {
		o.validityLease = l.watchdogLease
	}
	if o.perMaster == 0 {
		o.perMaster = min(DefaultPerMasterTimeout, o.validityLease/4)
	}
	if o.perMaster >= o.validityLease {
		return nil, invalidf("per-master timeout %v is not shorter than the lease %v", o.perMaster, o.validityLease)
	}
	o.drift = time.Duration(float64(o.validityLease)*o.driftFactor) + o.driftFixed
	if o.drift >= o.validityLease {
		return nil, invalidf("drift %v leaves no validity of the lease %v", o.drift, o.validityLease)
	}
	if o.lease != 0 {
		o.mopts = append(o.mopts, lock.Lease(o.lease))
	}
	if o.fenced {
		o.mopts = append(o.mopts, lock.Fenced())
	}
	return o, nil
}

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{lock.ErrInvalid}, args...)...)
}

// Observer receives a call's events, for tracing and metrics or for
// tests. Every field is optional. The functions run on the caller's
// goroutine and must not block.
type Observer struct {
	// Round is called after each round of attempts on the masters.
	Round func(ctx context.Context, e Round)
	// WakeUp is called when a call sleeping between rounds wakes.
	WakeUp func(ctx context.Context, e WakeUp)
}

// Round describes one round of attempts.
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

// WakeDelay is the WakeUp reason when the random retry delay ran out.
// The other reasons are lock's: WakeMessage and WakeReconnect (a master's
// unlock channel, Addr says which) and WakeTimeout (the holder's leases
// must have run out).
const WakeDelay lock.WakeReason = "delay"

// WakeUp describes a call waking between rounds.
type WakeUp struct {
	Reason lock.WakeReason
	Addr   string // the master whose unlock channel woke the call
	Slept  time.Duration
}
