package multilock

import (
	"fmt"
	"time"

	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/observe"
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

// settings are the multilock options of one call, kept in the call's
// lock options (lockcore's Extend).
type settings struct {
	driftFactor float64
	driftFixed  time.Duration
	perMaster   time.Duration
	obs         *observe.Observer
}

// extend returns a lock.Option that sets part of the call's settings.
func extend(set func(s *settings) error) lock.Option {
	return core.Extend(func(ext *any) error {
		s, _ := (*ext).(*settings)
		if s == nil {
			s = &settings{driftFactor: DefaultDriftFactor, driftFixed: DefaultDriftFixed}
			*ext = s
		}
		return set(s)
	})
}

type options struct {
	wait   time.Duration
	lease  time.Duration // explicit lease; 0: the masters' watchdog
	fenced bool
	settings

	validityLease time.Duration // lease used for validity: explicit, or the shortest watchdog lease
	drift         time.Duration
	mopts         []lock.Option // passed to every master's TryLock
}

// Drift sets the clock drift allowance subtracted from the lease when
// computing a lock's validity: lease × factor + fixed. Default
// DefaultDriftFactor, DefaultDriftFixed. Raise it when the masters' clocks
// (their timers: Redis expires keys by its own clock) may run faster
// than yours by more than 1%. A Mutex refuses this option.
func Drift(factor float64, fixed time.Duration) lock.Option {
	return extend(func(s *settings) error {
		if !(factor >= 0 && factor < 1) || fixed < 0 {
			return invalidf("drift factor %v (want [0, 1)) and fixed %v (want >= 0)", factor, fixed)
		}
		s.driftFactor, s.driftFixed = factor, fixed
		return nil
	})
}

// PerMasterTimeout bounds how long one round waits for the masters'
// answers (default DefaultPerMasterTimeout, at most a quarter of the
// lease). It must be much shorter than the lease: a round that takes
// longer leaves less validity. A master that answers later counts as
// failed in that round; whatever its late answer took is given back. A
// Mutex refuses this option.
func PerMasterTimeout(d time.Duration) lock.Option {
	return extend(func(s *settings) error {
		if d <= 0 {
			return invalidf("per-master timeout %v", d)
		}
		s.perMaster = d
		return nil
	})
}

// Observe sends the call's events to obs (nil: none): WakeUp, and Round
// after each round. A Mutex refuses this option.
func Observe(obs *observe.Observer) lock.Option {
	return extend(func(s *settings) error { s.obs = obs; return nil })
}

// options applies opts to the defaults and checks them against the Lock.
// lock.Wait, lock.Lease and lock.Fenced mean for the whole lock what they
// mean for one Mutex (see Lock and Held.Fence).
func (l *Lock) options(blocking bool, opts []lock.Option) (*options, error) {
	p, err := core.ParseOptions(blocking, opts)
	if err != nil {
		return nil, err
	}
	o := &options{wait: p.Wait, lease: p.Lease, fenced: p.Fenced}
	o.settings = settings{driftFactor: DefaultDriftFactor, driftFixed: DefaultDriftFixed}
	if s, _ := p.Ext.(*settings); s != nil {
		o.settings = *s
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
