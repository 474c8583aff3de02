package redissonstandin

import (
	"context"
	"errors"
	"strconv"
	"time"
)

// ReadLock is RedissonReadLock (getReadWriteLock(name).readLock()). The
// hash name holds "mode" = "read" (or "write" when the reader's thread
// holds the write lock), and per reader "<id>:<threadId>" = its hold count;
// each hold n has a key ReadTimeoutKey(name, field, n) with that hold's
// lease. Readers and writers share the channel RWChannel(name).
type ReadLock struct {
	c    *Client
	name string
}

// WriteLock is RedissonWriteLock (getReadWriteLock(name).writeLock()):
// "mode" = "write" and "<id>:<threadId>:write" = its hold count in the hash.
type WriteLock struct {
	c     *Client
	name  string
	lease leaseState
}

// ReadLock returns the read half of the read-write lock name.
func (c *Client) ReadLock(name string) *ReadLock { return &ReadLock{c: c, name: name} }

// WriteLock returns the write half of the read-write lock name.
func (c *Client) WriteLock(name string) *WriteLock {
	return &WriteLock{c: c, name: name, lease: leaseState{wd: c.o.WatchdogTimeout}}
}

// Name is the lock's hash key.
func (l *ReadLock) Name() string { return l.name }

// Channel is redisson_rwlock:{name}.
func (l *ReadLock) Channel() string { return RWChannel(l.name) }

// TimeoutPrefix is thread's timeout-key prefix, "{name}:<id>:<threadId>:rwlock_timeout".
func (l *ReadLock) TimeoutPrefix(thread uint64) string {
	return ReadTimeoutPrefix(l.name, l.c.Field(thread))
}

// TimeoutKey is the key of thread's n-th hold (n from 1).
func (l *ReadLock) TimeoutKey(thread uint64, n int) string {
	return ReadTimeoutKey(l.name, l.c.Field(thread), n)
}

// TryAcquire is RedissonReadLock.tryLockInnerAsync: acquired when there is
// no mode, the mode is read, or the mode is write and this thread is the
// writer; else the hash's PTTL.
func (l *ReadLock) TryAcquire(ctx context.Context, thread uint64, lease time.Duration) (Acquire, error) {
	return acquireReply(l.c.eval(ctx, readAcquire, []string{l.name, l.TimeoutPrefix(thread)},
		ms(l.c.lease(lease)), l.c.Field(thread), WriteField(l.c.o.ID, thread)))
}

// UnlockInner is RedissonReadLock.unlockInnerAsync with requestID, leaving
// the latch in place. It publishes "0" when the hash goes, and (surprise)
// also when there is no hash at all, answering nil.
func (l *ReadLock) UnlockInner(ctx context.Context, thread uint64, requestID string) (Release, error) {
	return releaseReply(l.c.eval(ctx, readRelease,
		[]string{l.name, l.Channel(), l.TimeoutPrefix(thread), ReadKeyPrefix(l.name), LatchName(l.name, requestID)},
		UnlockMessage, l.c.Field(thread), l.c.o.PublishCommand, ms(l.c.o.LatchTimeout)))
}

// Unlock is unlockAsync(threadId): UnlockInner with a fresh request id,
// then DEL of the latch.
func (l *ReadLock) Unlock(ctx context.Context, thread uint64) (Release, error) {
	return l.c.unlock(ctx, l.name, func(ctx context.Context, req string) (Release, error) {
		return l.UnlockInner(ctx, thread, req)
	})
}

// ForceUnlock is RedissonReadLock.forceUnlockAsync: only in mode read, DEL
// and publish "0". Timeout keys are left to expire.
func (l *ReadLock) ForceUnlock(ctx context.Context) (bool, error) {
	return boolReply(l.c.eval(ctx, readForceUnlock, []string{l.name, l.Channel()}, UnlockMessage, l.c.o.PublishCommand))
}

// IsLocked is RedissonReadLock.isLocked: mode read, or mode write with a
// field besides mode and the writer's.
func (l *ReadLock) IsLocked(ctx context.Context) (bool, error) {
	return boolReply(l.c.eval(ctx, readIsLocked, []string{l.name}))
}

// Renew is ReadLockTask's renewal of this client's read holds on the lock,
// as the client's version sends it. 4.7.0 (4.4.0 on): ARGV lease, count,
// then every thread's field; it renews those threads' own timeout keys and,
// if any is still a holder, the hash. 3.52.0: only the first thread's field
// is sent; if it holds, the hash is renewed and then the timeout keys of
// every numeric field, with a loop that reuses the variable i for KEYS: a
// field with count >= 2 indexes KEYS[3], which is nil with one lock, and
// the script fails (after the hash PEXPIRE).
func (l *ReadLock) Renew(ctx context.Context, threads ...uint64) (bool, error) {
	if len(threads) == 0 {
		return false, errors.New("redissonstandin: ReadLock.Renew needs a thread")
	}
	keys := []string{l.name, ReadKeyPrefix(l.name)}
	args := []string{ms(l.c.o.WatchdogTimeout)}
	script := readRenew4
	if l.c.o.Version == V3_52_0 {
		script = readRenew3
		args = append(args, l.c.Field(threads[0]))
	} else {
		args = append(args, strconv.Itoa(len(threads)))
		for _, t := range threads {
			args = append(args, l.c.Field(t))
		}
	}
	vs, err := l.c.eval(ctx, script, keys, args...).AsIntSlice()
	if err != nil {
		return false, err
	}
	return len(vs) == 1 && vs[0] == 1, nil
}

// Name is the lock's hash key.
func (l *WriteLock) Name() string { return l.name }

// Channel is redisson_rwlock:{name}.
func (l *WriteLock) Channel() string { return RWChannel(l.name) }

// Field is thread's writer field, "<id>:<threadId>:write".
func (l *WriteLock) Field(thread uint64) string { return WriteField(l.c.o.ID, thread) }

// TryAcquire is RedissonWriteLock.tryLockInnerAsync: acquired when there is
// no mode, or re-entered (PTTL + lease) by the writer; else the PTTL. A
// reader (even this thread) keeps the writer out.
func (l *WriteLock) TryAcquire(ctx context.Context, thread uint64, lease time.Duration) (Acquire, error) {
	a, err := acquireReply(l.c.eval(ctx, writeAcquire, []string{l.name}, ms(l.c.lease(lease)), l.Field(thread)))
	if err == nil && a.Acquired && lease > 0 {
		l.lease.set(lease)
	}
	return a, err
}

// UnlockInner is RedissonWriteLock.unlockInnerAsync with requestID,
// leaving the latch in place. It publishes "1" when the hash goes (and
// when there is no hash, answering nil); with readers left it sets mode
// read and publishes nothing.
func (l *WriteLock) UnlockInner(ctx context.Context, thread uint64, requestID string) (Release, error) {
	return releaseReply(l.c.eval(ctx, writeRelease,
		[]string{l.name, l.Channel(), LatchName(l.name, requestID)},
		ReadUnlockMessage, ms(l.lease.get()), l.Field(thread), l.c.o.PublishCommand, ms(l.c.o.LatchTimeout)))
}

// Unlock is unlockAsync(threadId): UnlockInner with a fresh request id,
// then DEL of the latch.
func (l *WriteLock) Unlock(ctx context.Context, thread uint64) (Release, error) {
	r, err := l.c.unlock(ctx, l.name, func(ctx context.Context, req string) (Release, error) {
		return l.UnlockInner(ctx, thread, req)
	})
	l.lease.afterUnlock(r, err)
	return r, err
}

// ForceUnlock is RedissonWriteLock.forceUnlockAsync: only in mode write,
// DEL (readers of the writer's thread too) and publish "1".
func (l *WriteLock) ForceUnlock(ctx context.Context) (bool, error) {
	l.lease.set(l.c.o.WatchdogTimeout)
	return boolReply(l.c.eval(ctx, writeForceUnlock, []string{l.name, l.Channel()}, ReadUnlockMessage, l.c.o.PublishCommand))
}

// Renew is the watchdog's renewal of thread's write hold (LockTask with
// the ":write" field).
func (l *WriteLock) Renew(ctx context.Context, thread uint64) (bool, error) {
	return l.c.renewOne(ctx, l.name, l.Field(thread))
}
