package redissonstandin

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"
)

// leaseState is RedissonLock.internalLockLeaseTime: the lease an unlock
// that leaves holds sends. It starts as the watchdog timeout, becomes the
// lease of an acquire that gave one, and returns to the watchdog timeout
// when an unlock answers nil or 1 (cancelExpirationRenewal) or on a force
// unlock.
type leaseState struct {
	mu sync.Mutex
	d  time.Duration
	wd time.Duration
}

func (s *leaseState) get() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.d == 0 {
		return s.wd
	}
	return s.d
}

func (s *leaseState) set(d time.Duration) {
	s.mu.Lock()
	s.d = d
	s.mu.Unlock()
}

func (s *leaseState) afterUnlock(r Release, err error) {
	if err == nil && r != StillHeld {
		s.set(s.wd)
	}
}

// Lock is RedissonLock (getLock(name)): the plain reentrant lock.
type Lock struct {
	c     *Client
	name  string
	lease leaseState
}

// Lock returns the plain lock name, as getLock(name).
func (c *Client) Lock(name string) *Lock {
	return &Lock{c: c, name: name, lease: leaseState{wd: c.o.WatchdogTimeout}}
}

// Name is the lock's hash key.
func (l *Lock) Name() string { return l.name }

// Channel is the unlock channel, redisson_lock__channel:{name}.
func (l *Lock) Channel() string { return LockChannel(l.name) }

// TryAcquire is RedissonLock.tryAcquireAsync (tryLockInnerAsync, EVAL_LONG)
// with lease (<= 0: the watchdog timeout, which Java then renews).
func (l *Lock) TryAcquire(ctx context.Context, thread uint64, lease time.Duration) (Acquire, error) {
	a, err := acquireReply(l.c.eval(ctx, lockAcquire, []string{l.name}, ms(l.c.lease(lease)), l.c.Field(thread)))
	if err == nil && a.Acquired && lease > 0 {
		l.lease.set(lease)
	}
	return a, err
}

// UnlockInner is RedissonLock.unlockInnerAsync with requestID, leaving the
// latch in place (as a retried request would find it).
func (l *Lock) UnlockInner(ctx context.Context, thread uint64, requestID string) (Release, error) {
	return releaseReply(l.c.eval(ctx, lockRelease,
		[]string{l.name, l.Channel(), LatchName(l.name, requestID)},
		UnlockMessage, ms(l.lease.get()), l.c.Field(thread), l.c.o.PublishCommand, ms(l.c.o.LatchTimeout)))
}

// Unlock is unlockAsync(threadId): UnlockInner with a fresh request id,
// then DEL of the latch.
func (l *Lock) Unlock(ctx context.Context, thread uint64) (Release, error) {
	r, err := l.c.unlock(ctx, l.name, func(ctx context.Context, req string) (Release, error) {
		return l.UnlockInner(ctx, thread, req)
	})
	l.lease.afterUnlock(r, err)
	return r, err
}

// ForceUnlock is RedissonLock.forceUnlockAsync: DEL and publish "0".
func (l *Lock) ForceUnlock(ctx context.Context) (bool, error) {
	l.lease.set(l.c.o.WatchdogTimeout)
	return boolReply(l.c.eval(ctx, lockForceUnlock, []string{l.name, l.Channel()}, UnlockMessage, l.c.o.PublishCommand))
}

// Renew is the watchdog's renewal of thread's hold (LockTask).
func (l *Lock) Renew(ctx context.Context, thread uint64) (bool, error) {
	return l.c.renewOne(ctx, l.name, l.c.Field(thread))
}

// ErrNotInVersion is a lock kind the client's Redisson version lacks.
var ErrNotInVersion = errors.New("redissonstandin: not in this Redisson version")

// ErrReacquire is a non-reentrant lock's refusal of a re-acquire by its
// holder (Redis error reply ReentryError; Java: IllegalMonitorStateException).
var ErrReacquire = errors.New("redissonstandin: " + ReentryError)

// NonReentrantLock is RedissonNonReentrantLock (getNonReentrantLock(name),
// 4.4.0 and later): the plain lock's key, field, channel, release and
// renewal, but an acquire by the holder is an error, not a re-entry.
type NonReentrantLock struct {
	*Lock
}

// NonReentrantLock returns the non-reentrant lock name.
func (c *Client) NonReentrantLock(name string) *NonReentrantLock {
	return &NonReentrantLock{Lock: c.Lock(name)}
}

// TryAcquire is RedissonNonReentrantLock.tryLockInnerAsync (EVAL_LONG):
// acquired, the PTTL, or ErrReacquire when thread already holds it.
// ErrNotInVersion for a 3.52.0 client.
func (l *NonReentrantLock) TryAcquire(ctx context.Context, thread uint64, lease time.Duration) (Acquire, error) {
	if l.c.o.Version < V4_7_0 {
		return Acquire{}, ErrNotInVersion
	}
	a, err := acquireReply(l.c.eval(ctx, nonReentrantAcquire, []string{l.name},
		ms(l.c.lease(lease)), l.c.Field(thread), ReentryError))
	if err != nil && strings.Contains(err.Error(), ReentryError) {
		return Acquire{}, errors.Join(ErrReacquire, err)
	}
	if err == nil && a.Acquired && lease > 0 {
		l.lease.set(lease)
	}
	return a, err
}
