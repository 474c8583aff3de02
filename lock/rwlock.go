package lock

// Read-write locks: Redisson's RReadWriteLock, as two Mutexes of kinds
// readProtocol and writeProtocol over one hash.
//
// Design. A ReadWriteMutex is a description, like a Mutex; its halves are
// Mutexes, so Lock, TryLock, Held, Unlock, the watchdog, options and
// package multilock work unchanged. What differs is decided by the kind:
//   - the field: a reader is "<client id>:<owner>", a writer the same with
//     ":write" (two holds per owner, so a writer's reads and its write
//     hold are counted, ordered and settled apart; each hold's turn
//     serialises its own field's count-changing commands, as for any
//     Mutex, and no command changes the other field's count);
//   - the scripts (package reentrant's ModeRead and ModeWrite): a read
//     acquire takes a hold when the hash is free, in mode "read", or in
//     mode "write" held by the same owner's writer; a write acquire only
//     when the hash is free (or to re-enter); a reader cannot upgrade;
//   - the channel "redisson_rwlock:{name}": read releases publish "0"
//     (wake one) when the hash goes, write releases "1" (wake all);
//   - the renewal: a read hold's extends the hash and the field's timeout
//     keys (reentrant.RenewReadScript), batched with every other renewal
//     of the tick in the master's one round trip.
//
// Waiting. Writers queue as every Mutex's waiters do: one contender per
// process and name, the head on the queue's subscription (queue.go).
// Readers do not queue: readers that can share must not wait behind each
// other. Each waiting reader (share) owns its own pubsub.Waiter on the
// channel, touched only by its goroutine, and makes its own attempts; a
// "1" wakes every waiter of the channel in the process, readers and the
// writers' head alike, and each tries again. A reader waiting while a
// local writer holds or waits is such a reader: there is no writer
// preference, in a process as across Redisson's clients (a stream of
// readers can keep a writer waiting), and a reader never waits for a
// local writer to acquire first.
//
// Owner state: the holds as for any Mutex (hold.go); a share call's
// Waiter and backoff are its goroutine's own; nothing else is added to
// the Client.

import (
	"context"
	"errors"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/rlock-go/rlock/observe"
	"github.com/rlock-go/rlock/pubsub"
	"github.com/rlock-go/rlock/reentrant"
)

// ReadWriteMutex is the read-write lock called name: Redisson's
// redisson.getReadWriteLock(name). Any number of owners may hold its read
// lock at once, or one owner its write lock; an owner holding the write
// lock may also take the read lock (and keeps the reads when it releases
// the write lock), but an owner holding only the read lock cannot take
// the write lock. Both halves are reentrant. It is a cheap description,
// safe to copy and share; a Java service's getReadWriteLock(name) is the
// same lock.
type ReadWriteMutex struct {
	read, write *Mutex
}

// ReadWriteMutex returns the read-write lock called name (mapped by
// Config.NameMapper as Mutex maps it). A bad name is reported by every
// method of its halves as ErrInvalid.
func (c *Client) ReadWriteMutex(name string) *ReadWriteMutex {
	r, w := c.Mutex(name), c.Mutex(name)
	r.p, w.p = readProtocol, writeProtocol
	return &ReadWriteMutex{read: r, write: w}
}

// ReadLock returns the read lock (Redisson's readLock()): shared with
// other readers, excluded by a writer of another owner. Its waiters do
// not queue behind each other nor behind this Client's waiting writers.
// The Fenced option is refused (ErrInvalid).
func (rw *ReadWriteMutex) ReadLock() *Mutex {
	if rw == nil {
		return &Mutex{err: invalidf("nil ReadWriteMutex: make it with Client.ReadWriteMutex")}
	}
	return rw.read
}

// WriteLock returns the write lock (Redisson's writeLock()): excludes
// every other owner's reads and writes. Lock and TryLock by an owner that
// holds the read lock return ErrInvalid joined with ErrNotAcquired at
// once: the write lock would never be granted (Redisson's Java thread
// would wait forever). The Fenced option is refused (ErrInvalid).
func (rw *ReadWriteMutex) WriteLock() *Mutex {
	if rw == nil {
		return &Mutex{err: invalidf("nil ReadWriteMutex: make it with Client.ReadWriteMutex")}
	}
	return rw.write
}

// Name returns the lock name as Redis holds it ("" for a nil
// ReadWriteMutex).
func (rw *ReadWriteMutex) Name() string {
	if rw == nil {
		return ""
	}
	return rw.read.name
}

// ForceUnlock deletes the read-write lock whoever holds it, readers or
// writer, and wakes every waiter ("1" on its channel); it reports whether
// there was a lock. Holds of this Client on it are lost. (Redisson's
// halves each force-unlock only their own mode: ReadLock().ForceUnlock
// and WriteLock().ForceUnlock do as they do.) Without PUBLISH permission
// it deletes the lock and returns true and ErrAuth, as Mutex.ForceUnlock.
//
// May return ErrClosed, ErrUnavailable, ErrAuth, ErrInvalid.
func (rw *ReadWriteMutex) ForceUnlock(ctx context.Context) (bool, error) {
	if rw == nil {
		return false, invalidf("nil ReadWriteMutex: make it with Client.ReadWriteMutex")
	}
	return rw.write.forceUnlockRW(ctx, "", reentrant.ReadUnlockMessage)
}

// loseName ends every hold of this Client on the lock name: it was
// force-unlocked.
func (c *Client) loseName(name string) {
	c.mu.Lock()
	var lost []*hold
	for _, l := range c.index {
		if l.name == name {
			lost = append(lost, l)
		}
	}
	c.mu.Unlock()
	for _, l := range lost {
		l.loseAll(observe.LossForceUnlocked, "force-unlocked by this client")
	}
}

// upgrade refuses a write acquisition of m by an owner that holds the
// read lock of the same name and not its write lock (protocol.upgrade).
func (c *Client) upgrade(m *Mutex, owner uint64) error {
	c.mu.Lock()
	r, w := c.index[key(m.name, readProtocol.field(c, owner))], c.index[key(m.name, writeProtocol.field(c, owner))]
	reads := r != nil && r.g.Load().live() && (w == nil || !w.g.Load().live())
	c.mu.Unlock()
	if reads {
		return join(ErrNotAcquired, invalidf("the write lock of %q asked by an owner that holds its read lock: a read lock cannot be upgraded", m.name))
	}
	return nil
}

// share acquires a read lock that was not free at once, without queueing:
// attempts, and between them a sleep on the call's own subscription to
// the channel, until acquired or the wait ends. As waitBusy, it
// subscribes after the first attempt that found the lock held and tries
// again before sleeping, so no release in between is missed.
func (a *acquisition) share() (held *Held, err error) {
	var (
		w      *pubsub.Waiter
		woken  bool // a message wake-up not yet used by an answered attempt
		outage *backoff.ExponentialBackOff
	)
	defer func() {
		if w == nil {
			return
		}
		if err != nil && woken {
			w.Pass()
		}
		a.c.queues.closeSub(w)
	}()
	for {
		att, err := a.try()
		if err != nil {
			if err := a.retryAfter(err, &outage); err != nil {
				return nil, err
			}
			continue
		}
		outage, woken = nil, false
		if att.held != nil {
			return att.held, nil
		}
		left, err := a.left(att.TTL)
		if err != nil {
			return nil, err
		}
		if w == nil {
			if w, err = a.subscribeRead(left); err != nil {
				return nil, err
			}
			if w != nil {
				continue // try again: a release may have come before the subscription
			}
		}
		if woken, err = a.sleepRead(w, att.TTL, left); err != nil {
			return nil, err
		}
	}
}

// subscribeRead subscribes a reader to the read-write lock's channel,
// bounded by left and CommandTimeout; nil when it could not (the reader
// then sleeps on the holder's lease alone).
func (a *acquisition) subscribeRead(left time.Duration) (*pubsub.Waiter, error) {
	sctx, cancel := context.WithTimeout(a.ctx, min(left, a.c.cfg.CommandTimeout))
	w, err := a.c.hub.Subscribe(sctx, readProtocol.channel(a.m.name))
	cancel()
	if a.ctx.Err() != nil {
		if w != nil {
			a.c.queues.closeSub(w)
		}
		return nil, join(ErrNotAcquired, context.Cause(a.ctx))
	}
	if err != nil && errors.Is(err, pubsub.ErrClosed) {
		return nil, ErrClosed
	}
	return w, nil
}

// sleepRead waits for a wake-up on w (nil: none), at most the holder's
// TTL and the time left; it reports whether a message woke it.
func (a *acquisition) sleepRead(w *pubsub.Waiter, ttl, left time.Duration) (bool, error) {
	sleep := ttl
	if sleep < 0 { // the key has no expiry: only a message ends the wait
		sleep = left
		if w == nil {
			sleep = time.Second
		}
	}
	sleep = min(sleep, left)
	a.waiting(ttl, nil, 0)
	slept, reason, err := a.m.sleep(a.octx, a.ctx, w, nil, sleep, observe.WakeTimeout)
	a.end.Waited += slept
	return err == nil && (reason == observe.WakeMessage || reason == observe.WakeReconnect), err
}

// isLockedHalf is IsLocked of a read-write lock's half.
func (m *Mutex) isLockedHalf(ctx context.Context) (bool, error) {
	if err := m.check(ctx); err != nil {
		return false, err
	}
	c := m.c
	if err := c.enter(); err != nil {
		return false, err
	}
	defer c.exit()
	locked, err := runQuery(ctx, c, func(qctx context.Context) (bool, error) {
		return reentrant.IsLockedRW(qctx, c.crc, m.name, m.p.mode)
	})
	if err != nil {
		return false, join(masterErr(c.route.errAt(m.name), "is locked", err), ctx.Err())
	}
	return locked, nil
}
