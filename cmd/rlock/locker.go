package main

import (
	"context"
	"errors"
	"time"

	"github.com/rlock-go/rlock/lock"
)

// locker is the lock that rlock run holds around a command: one name on
// one master (singleLocker, package lock) or, later, a RedLock on several
// independent masters (package multilock). run sees only this interface;
// newLocker chooses the implementation from the number of addresses.
//
// A locker is used once: Lock, then Done/Lost/Fence while the command
// runs, then Unlock, then Close.
type locker interface {
	// Lock acquires the lock with a fencing token: one attempt when
	// o.wait is 0, else waiting up to o.wait. It returns an error matching
	// lock.ErrNotAcquired when the lock stayed busy. Ending ctx ends the
	// wait; once acquired, ctx must stay live until Unlock (the hold is
	// derived from it).
	Lock(ctx context.Context, o lockOptions) error
	// Done is closed when the hold ends: after Unlock, or when the lock
	// is lost. It is nil before Lock succeeds.
	Done() <-chan struct{}
	// Lost returns why the hold ended without Unlock (a *lock.LostError
	// matching lock.ErrLockLost for a lost lease), nil while it is held
	// or after Unlock.
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
}

// lockOptions are what run asks of a locker.
type lockOptions struct {
	wait  time.Duration // 0: one attempt
	lease time.Duration // 0: renewed by the watchdog until Unlock
}

// lockerConfig describes the lock to take.
type lockerConfig struct {
	conn            connFlags
	addrs           []string // one master; several for RedLock
	name            string
	watchdogTimeout time.Duration // 0: lock.DefaultWatchdogTimeout
}

// checkLocker rejects, before anything is dialled, what newLocker cannot
// build.
func checkLocker(cfg lockerConfig) error {
	if len(cfg.addrs) > 1 {
		// The plug point for package multilock: build a RedLock over one
		// lock.Client per address here and in newLocker.
		return usagef("--addr has %d addresses: RedLock over several masters comes with package multilock; give one address for now", len(cfg.addrs))
	}
	return nil
}

// newLocker connects to the masters of cfg.
//
// May return errors matching lock.ErrInvalid, lock.ErrUnavailable,
// lock.ErrAuth, or a usage error.
func newLocker(ctx context.Context, cfg lockerConfig) (locker, error) {
	if err := checkLocker(cfg); err != nil {
		return nil, err
	}
	lc := cfg.conn.lockConfig(cfg.addrs[0])
	lc.WatchdogTimeout = cfg.watchdogTimeout
	c, err := lock.New(ctx, lc)
	if err != nil {
		return nil, err
	}
	return &singleLocker{c: c, m: c.Mutex(cfg.name)}, nil
}

// singleLocker is a locker on one master.
type singleLocker struct {
	c        *lock.Client
	m        *lock.Mutex
	held     *lock.Held
	lease    time.Duration
	unlocked bool
}

func (s *singleLocker) Lock(ctx context.Context, o lockOptions) error {
	opts := []lock.Option{lock.Wait(o.wait), lock.Fenced()}
	if o.lease > 0 {
		opts = append(opts, lock.Lease(o.lease))
	}
	h, err := s.m.TryLock(ctx, opts...)
	if err != nil {
		return err
	}
	s.held, s.lease = h, o.lease
	return nil
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
	select {
	case <-s.held.Done():
	default:
		return nil
	}
	if cause := context.Cause(s.held.Context()); cause != nil {
		return cause
	}
	return lock.ErrLockLost
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
