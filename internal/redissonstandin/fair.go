package redissonstandin

import (
	"context"
	"time"
)

// FairLock is RedissonFairLock (getFairLock(name)): the plain lock's hash,
// plus a FIFO of waiters (list FairQueueName) with a timeout per waiter
// (zset FairTimeoutName, score = the client's clock in ms when the waiter
// counts as gone). Each waiter listens on its own channel,
// FairWaiterChannel(name, field); an unlock wakes only the queue's head.
type FairLock struct {
	c     *Client
	name  string
	lease leaseState
}

// FairLock returns the fair lock name, as getFairLock(name).
func (c *Client) FairLock(name string) *FairLock {
	return &FairLock{c: c, name: name, lease: leaseState{wd: c.o.WatchdogTimeout}}
}

// Name is the lock's hash key.
func (l *FairLock) Name() string { return l.name }

// Queue is the waiter list, redisson_lock_queue:{name}.
func (l *FairLock) Queue() string { return FairQueueName(l.name) }

// Timeouts is the waiter timeout zset, redisson_lock_timeout:{name}.
func (l *FairLock) Timeouts() string { return FairTimeoutName(l.name) }

// Channel is the base channel (KEYS[4] of unlock): waiters' channels are
// it + ":" + field.
func (l *FairLock) Channel() string { return LockChannel(l.name) }

// WaiterChannel is the channel thread waits on and unlock publishes to
// when thread heads the queue.
func (l *FairLock) WaiterChannel(thread uint64) string {
	return FairWaiterChannel(l.name, l.c.Field(thread))
}

func (l *FairLock) keys() []string { return []string{l.name, l.Queue(), l.Timeouts()} }

// wait is threadWaitTime unless the caller gave a wait time > 0.
func (l *FairLock) wait(w time.Duration) string {
	if w > 0 {
		return ms(w)
	}
	return ms(l.c.o.FairLockWaitTimeout)
}

// TryAcquire is RedissonFairLock.tryLockInnerAsync with EVAL_LONG, as
// lock() (wait <= 0: threadWaitTime) and tryLock(wait, lease) send it:
// prune stale heads, acquire when free and first (or no queue), re-enter,
// or join the queue and get a TTL. ARGV: lease, field, wait, now.
func (l *FairLock) TryAcquire(ctx context.Context, thread uint64, lease, wait time.Duration) (Acquire, error) {
	a, err := acquireReply(l.c.eval(ctx, fairAcquire, l.keys(),
		ms(l.c.lease(lease)), l.c.Field(thread), l.wait(wait), l.c.now()))
	if err == nil && a.Acquired && lease > 0 {
		l.lease.set(lease)
	}
	return a, err
}

// TryAcquireOnce is RedissonFairLock.tryLockInnerAsync with
// EVAL_NULL_BOOLEAN, as tryLock() sends it (waitTime -1, so the wait is
// threadWaitTime): acquired or not, and it never joins the queue. Note the
// ARGV order differs from TryAcquire: lease, field, now, wait.
func (l *FairLock) TryAcquireOnce(ctx context.Context, thread uint64, lease time.Duration) (bool, error) {
	a, err := acquireReply(l.c.eval(ctx, fairAcquireOnce, l.keys(),
		ms(l.c.lease(lease)), l.c.Field(thread), l.c.now(), l.wait(0)))
	if err == nil && a.Acquired && lease > 0 {
		l.lease.set(lease)
	}
	return a.Acquired, err
}

// CancelWait is RedissonFairLock.acquireFailedAsync: thread leaves the
// queue, and the waiters behind it have their timeouts lowered by wait
// (<= 0: threadWaitTime). Java's blocking tryLock(wait, ...) passes its
// wait; the async tryLockAsync passes -1 (so threadWaitTime).
func (l *FairLock) CancelWait(ctx context.Context, thread uint64, wait time.Duration) error {
	err := l.c.eval(ctx, fairCancelWait, []string{l.Queue(), l.Timeouts()}, l.c.Field(thread), l.wait(wait)).Error()
	if isNil(err) {
		return nil
	}
	return err
}

// UnlockInner is RedissonFairLock.unlockInnerAsync with requestID, leaving
// the latch in place. It publishes "0" on the head waiter's channel.
func (l *FairLock) UnlockInner(ctx context.Context, thread uint64, requestID string) (Release, error) {
	return releaseReply(l.c.eval(ctx, fairRelease,
		[]string{l.name, l.Queue(), l.Timeouts(), l.Channel(), LatchName(l.name, requestID)},
		UnlockMessage, ms(l.lease.get()), l.c.Field(thread), l.c.now(), l.c.o.PublishCommand, ms(l.c.o.LatchTimeout)))
}

// Unlock is unlockAsync(threadId): UnlockInner with a fresh request id,
// then DEL of the latch.
func (l *FairLock) Unlock(ctx context.Context, thread uint64) (Release, error) {
	r, err := l.c.unlock(ctx, l.name, func(ctx context.Context, req string) (Release, error) {
		return l.UnlockInner(ctx, thread, req)
	})
	l.lease.afterUnlock(r, err)
	return r, err
}

// ForceUnlock is RedissonFairLock.forceUnlockAsync: prune, DEL, and
// publish "0" to the head waiter when the hash existed.
func (l *FairLock) ForceUnlock(ctx context.Context) (bool, error) {
	l.lease.set(l.c.o.WatchdogTimeout)
	return boolReply(l.c.eval(ctx, fairForceUnlock,
		[]string{l.name, l.Queue(), l.Timeouts(), l.Channel()},
		UnlockMessage, l.c.now(), l.c.o.PublishCommand))
}

// Renew is the watchdog's renewal of thread's hold (LockTask, as the plain lock).
func (l *FairLock) Renew(ctx context.Context, thread uint64) (bool, error) {
	return l.c.renewOne(ctx, l.name, l.c.Field(thread))
}
