package main

import (
	"context"
	"errors"
	"time"

	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/observe"
)

// locker is the lock that rlock run holds around a command: one name on
// one master (singleLocker, package lock) or a RedLock or MultiLock on
// several independent masters (multiLocker, package multilock, in
// redlock.go). run sees only this interface; newLocker chooses the
// implementation from the number of addresses.
//
// A locker is used once: Lock, then Done/Lost/Fence while the command
// runs, then Unlock, then Close.
type locker interface {
	// Lock acquires the lock, with a fencing token unless o.noFence: one
	// attempt when o.wait is 0, else waiting up to o.wait, or until it is
	// acquired or ctx ends with o.forever. It returns an error matching
	// lock.ErrNotAcquired when the lock stayed busy (for several masters:
	// the quorum was not had, multilock.ErrQuorum). Ending ctx ends the
	// wait; once acquired, ctx must stay live until Unlock (the hold is
	// derived from it).
	Lock(ctx context.Context, o lockOptions) error
	// Done is closed when the hold ends: after Unlock, or when the lock
	// is lost. It is nil before Lock succeeds.
	Done() <-chan struct{}
	// Lost returns why the hold ended without Unlock (a *lock.LostError
	// matching lock.ErrLockLost for a lost lease, or a lost quorum), nil
	// while it is held or after Unlock.
	Lost() error
	// Fence returns the fencing token of the acquisition: it strictly
	// increases across acquisitions of the name.
	Fence() uint64
	// Deadline returns when the lock expires by itself (taken with a
	// lease; for a RedLock, the end of its validity), or the zero time
	// when it is renewed until Unlock.
	Deadline() time.Time
	// Unlock releases the lock. It returns an error matching
	// lock.ErrLockLost when the lock had been lost before.
	Unlock(ctx context.Context) error
	// Close releases what is still held and closes the connections.
	Close(ctx context.Context) error
	// Clients returns the Client of each master reached, in --addr
	// order.
	Clients() []*lock.Client
	// looks reads the holders and TTL of the lock on every master
	// reached, in parallel, in the order of Clients.
	looks(ctx context.Context) []look
}

// lockOptions are what run asks of a locker.
type lockOptions struct {
	wait    time.Duration // 0: one attempt
	forever bool          // wait until acquired or ctx ends (wait unused)
	lease   time.Duration // 0: renewed by the watchdog until Unlock
	noFence bool          // take no fencing token
	// began is called when a round on several masters failed and the
	// call goes on waiting (one master reports that through the
	// Observer's Waiting). It must not block.
	began func()
}

// lockerConfig describes the lock to take.
type lockerConfig struct {
	// masters are the Config of each Client: one for a master, a cluster
	// or a sentinel set; one per master for a RedLock.
	masters         []lock.Config
	all             bool // several masters: every one must grant (MultiLock)
	name            string
	spin            bool              // Redisson's spin lock on every master
	fair            bool              // Redisson's fair lock on every master
	shared          bool              // the read lock of Redisson's read-write lock NAME
	exclusive       bool              // its write lock
	watchdogTimeout time.Duration     // 0: lock.DefaultWatchdogTimeout
	observer        *observe.Observer // every Client's; nil: none
}

// clientConfig is the lock.Config of master i: with rlock's client id,
// the --watchdog-timeout given (else --redisson-config's) and the
// observer.
func (cfg lockerConfig) clientConfig(i int) lock.Config {
	lc := cfg.masters[i]
	lc.ClientID = cliClientID()
	if cfg.watchdogTimeout != 0 {
		lc.WatchdogTimeout = cfg.watchdogTimeout
	}
	lc.Observer = cfg.observer
	return lc
}

// checkLocker rejects, before anything is dialled, what newLocker cannot
// build.
func checkLocker(cfg lockerConfig) error {
	seen := make(map[string]bool)
	for _, m := range cfg.masters {
		for _, a := range m.Addrs {
			if seen[a] {
				return usagef("--addr lists %s twice: give each master once", a)
			}
			seen[a] = true
		}
	}
	return nil
}

// newLocker connects to the masters of cfg: a singleLocker for one
// address, a multiLocker for several.
//
// May return errors matching lock.ErrInvalid, lock.ErrUnavailable,
// lock.ErrAuth, or a usage error.
func newLocker(ctx context.Context, cfg lockerConfig) (locker, error) {
	if err := checkLocker(cfg); err != nil {
		return nil, err
	}
	if len(cfg.masters) > 1 {
		return newMultiLocker(ctx, cfg)
	}
	c, err := lock.New(ctx, cfg.clientConfig(0))
	if err != nil {
		return nil, err
	}
	return &singleLocker{c: c, m: cfg.mutex(c), name: cfg.name}, nil
}

// mutex is the lock cfg asks for on the master of c: the plain lock, the
// spin lock, the fair lock, or a half of the read-write lock.
func (cfg lockerConfig) mutex(c *lock.Client) *lock.Mutex {
	switch {
	case cfg.spin:
		return c.SpinMutex(cfg.name, lock.SpinBackoff{})
	case cfg.fair:
		return c.FairMutex(cfg.name)
	case cfg.shared:
		return c.ReadWriteMutex(cfg.name).ReadLock()
	case cfg.exclusive:
		return c.ReadWriteMutex(cfg.name).WriteLock()
	}
	return c.Mutex(cfg.name)
}

// lostCause returns why the hold of ctx ended, once it has: the cause
// of its cancellation (a *lock.LostError), or lock.ErrLockLost when it
// has none. It returns nil while ctx is live.
func lostCause(ctx context.Context) error {
	select {
	case <-ctx.Done():
	default:
		return nil
	}
	if cause := context.Cause(ctx); cause != nil {
		return cause
	}
	return lock.ErrLockLost
}

// singleLocker is a locker on one master.
type singleLocker struct {
	c        *lock.Client
	name     string
	m        *lock.Mutex
	held     *lock.Held
	lease    time.Duration
	unlocked bool
}

func (s *singleLocker) Lock(ctx context.Context, o lockOptions) error {
	var opts []lock.Option
	if !o.noFence {
		opts = append(opts, lock.Fenced())
	}
	if o.lease > 0 {
		opts = append(opts, lock.Lease(o.lease))
	}
	var h *lock.Held
	var err error
	if o.forever {
		h, err = s.m.Lock(ctx, opts...)
	} else {
		h, err = tryRidingOut(ctx, s.m, o.wait, opts)
	}
	if err != nil {
		return err
	}
	s.held, s.lease = h, o.lease
	return nil
}

// tryRidingOut is TryLock waiting up to wait, which rides out an outage
// (Redis unreachable, a replica's READONLY while a failover is under way)
// for as long as wait lasts, as a blocking Lock does without bound: an
// attempt answered by an outage rather than by the lock is tried again
// after a backoff (50ms doubling to 1s) until wait ends. The last
// attempt's error is returned: an outage still, or the lock's state.
func tryRidingOut(ctx context.Context, m *lock.Mutex, wait time.Duration, opts []lock.Option) (*lock.Held, error) {
	end := time.Now().Add(wait)
	pause := 50 * time.Millisecond
	for {
		left := time.Until(end)
		h, err := m.TryLock(ctx, append(opts, lock.Wait(max(left, 0)))...)
		var ce *lock.ConflictError
		if err == nil || !errors.Is(err, lock.ErrUnavailable) || errors.As(err, &ce) || wait <= 0 {
			return h, err
		}
		left = time.Until(end)
		if left <= 0 {
			return h, err
		}
		t := time.NewTimer(min(pause, left))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return h, err
		}
		pause = min(2*pause, time.Second)
	}
}

func (s *singleLocker) Deadline() time.Time {
	if s.held == nil || s.lease == 0 {
		return time.Time{}
	}
	// AcquiredAt is when the acquire was sent: the lease runs from no
	// later than that in Redis, so this deadline is never late.
	return s.held.AcquiredAt().Add(s.lease)
}

func (s *singleLocker) Done() <-chan struct{} {
	if s.held == nil {
		return nil
	}
	return s.held.Done()
}

func (s *singleLocker) Lost() error {
	if s.held == nil || s.unlocked {
		return nil
	}
	return lostCause(s.held.Context())
}

func (s *singleLocker) Fence() uint64 {
	if s.held == nil {
		return 0
	}
	return s.held.Fence()
}

func (s *singleLocker) Unlock(ctx context.Context) error {
	if s.held == nil {
		return lock.ErrNotHeld
	}
	err := s.held.Unlock(ctx)
	if err == nil {
		s.unlocked = true
	}
	return err
}

func (s *singleLocker) Close(ctx context.Context) error {
	if err := s.c.Close(ctx); err != nil && !errors.Is(err, lock.ErrClosed) {
		return err
	}
	return nil
}

func (s *singleLocker) Clients() []*lock.Client { return []*lock.Client{s.c} }

func (s *singleLocker) looks(ctx context.Context) []look {
	return []look{lookAt(ctx, s.c.Redis(), s.c.Addr(), s.name)}
}
