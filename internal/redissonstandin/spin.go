package redissonstandin

import (
	"context"
	"math/rand/v2"
	"time"
)

// SpinLock is RedissonSpinLock (getSpinLock(name)): the plain lock's hash,
// field and acquire semantics, but no pub/sub at all: waiters poll with a
// back-off, release and force unlock publish nothing.
type SpinLock struct {
	c     *Client
	name  string
	lease leaseState
}

// SpinLock returns the spin lock name, as getSpinLock(name).
func (c *Client) SpinLock(name string) *SpinLock {
	return &SpinLock{c: c, name: name, lease: leaseState{wd: c.o.WatchdogTimeout}}
}

// Name is the lock's hash key.
func (l *SpinLock) Name() string { return l.name }

// TryAcquire is RedissonSpinLock.tryLockInnerAsync. Unlike RedissonLock it
// sets internalLockLeaseTime to the lease it sends on every attempt,
// acquired or not.
func (l *SpinLock) TryAcquire(ctx context.Context, thread uint64, lease time.Duration) (Acquire, error) {
	d := l.c.lease(lease)
	l.lease.set(d)
	return acquireReply(l.c.eval(ctx, spinAcquire, []string{l.name}, ms(d), l.c.Field(thread)))
}

// Lock is lock(leaseTime): try, then sleep the back-off's next period and
// try again until acquired or ctx ends.
func (l *SpinLock) Lock(ctx context.Context, thread uint64, lease time.Duration, b *BackoffPolicy) error {
	for {
		a, err := l.TryAcquire(ctx, thread, lease)
		if err != nil || a.Acquired {
			return err
		}
		t := time.NewTimer(b.Next())
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// UnlockInner is RedissonSpinLock.unlockInnerAsync with requestID, leaving
// the latch in place. It publishes nothing.
func (l *SpinLock) UnlockInner(ctx context.Context, thread uint64, requestID string) (Release, error) {
	return releaseReply(l.c.eval(ctx, spinRelease, []string{l.name, LatchName(l.name, requestID)},
		ms(l.lease.get()), l.c.Field(thread), ms(l.c.o.LatchTimeout)))
}

// Unlock is unlockAsync(threadId): UnlockInner with a fresh request id,
// then DEL of the latch.
func (l *SpinLock) Unlock(ctx context.Context, thread uint64) (Release, error) {
	r, err := l.c.unlock(ctx, l.name, func(ctx context.Context, req string) (Release, error) {
		return l.UnlockInner(ctx, thread, req)
	})
	l.lease.afterUnlock(r, err)
	return r, err
}

// ForceUnlock is RedissonSpinLock.forceUnlockAsync: DEL, no publish.
func (l *SpinLock) ForceUnlock(ctx context.Context) (bool, error) {
	l.lease.set(l.c.o.WatchdogTimeout)
	return boolReply(l.c.eval(ctx, spinForceUnlock, []string{l.name}))
}

// Renew is the watchdog's renewal of thread's hold (LockTask, as the plain lock).
func (l *SpinLock) Renew(ctx context.Context, thread uint64) (bool, error) {
	return l.c.renewOne(ctx, l.name, l.c.Field(thread))
}

// ExponentialBackoff is LockOptions.ExponentialBackOff; the zero value is
// LockOptions.defaults(): initial 1 ms, max 128 ms, multiplier 2.
type ExponentialBackoff struct {
	// Initial is initialDelay (whole milliseconds), the first period.
	Initial time.Duration
	// Max is maxDelay (whole milliseconds), the cap.
	Max time.Duration
	// Multiplier is multiplier.
	Multiplier int
}

// BackoffPolicy is LockOptions.ExponentialBackOffPolicy: one per lock call.
type BackoffPolicy struct {
	max, next  int64
	multiplier int64
	fails      int
	rnd        func(n int) int
}

// Policy is ExponentialBackOff.create. rnd(n) must return [0, n) as
// ThreadLocalRandom.nextInt(n); nil uses math/rand/v2.
func (b ExponentialBackoff) Policy(rnd func(n int) int) *BackoffPolicy {
	p := &BackoffPolicy{max: SpinMaxDelay.Milliseconds(), next: SpinInitialDelay.Milliseconds(), multiplier: SpinMultiplier, rnd: rnd}
	if b.Max > 0 {
		p.max = b.Max.Milliseconds()
	}
	if b.Initial > 0 {
		p.next = b.Initial.Milliseconds()
	}
	if b.Multiplier > 0 {
		p.multiplier = int64(b.Multiplier)
	}
	if p.rnd == nil {
		p.rnd = rand.IntN
	}
	return p
}

// Next is getNextSleepPeriod: the current period; the next is
// min(max, period * multiplier + nextInt(++fails)); once at max it stays.
func (p *BackoffPolicy) Next() time.Duration {
	if p.next == p.max {
		return time.Duration(p.max) * time.Millisecond
	}
	r := p.next
	p.fails++
	p.next = min(p.max, p.next*p.multiplier+int64(p.rnd(p.fails)))
	return time.Duration(r) * time.Millisecond
}
