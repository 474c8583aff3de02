package lock

import (
	"context"
	"fmt"
	"time"

	"github.com/rlock-go/rlock/reentrant"
)

// A protocol is one of Redisson's lock kinds as a value: which scripts
// acquire and release it (its layout, reentrant.Mode), the holder field,
// what a release announces, how waiters wait, and whether an owner may
// re-enter. Each Mutex has one, chosen by the Client method that made it
// (Mutex, FairMutex, SpinMutex, NonReentrantMutex, ReadWriteMutex), and
// never changed. What differs between kinds is decided here and only
// here: no other file asks which kind a Mutex or a hold is.
type protocol struct {
	name   string         // in messages: "plain", "spin", ...
	mode   reentrant.Mode // the hash's layout and its scripts
	writer bool           // the holder field ends in ":write" (a writer's)
	quiet  bool           // releases publish nothing (Redisson's spin lock)
	once   bool           // an owner that holds may not acquire again
	wait   waitStyle      // how a waiter of this Client waits
}

// waitStyle is how a Lock (or a TryLock with Wait) waits for a held lock.
type waitStyle uint8

const (
	waitOne   waitStyle = iota // the Client's local queue; a release wakes its head
	waitAll                    // readers: no queue, every release wakes every reader
	waitQueue                  // the fair lock's queue in Redis; a release wakes its head
	waitPoll                   // the spin lock: attempts at the Mutex's SpinBackoff
)

// The protocols, one per Redisson lock kind.
var (
	// getLock, getFencedLock
	plainProtocol = &protocol{name: "plain", mode: reentrant.ModeLock, wait: waitOne}
	// getNonReentrantLock: the plain lock's scripts, no re-entry
	nonReentrantProtocol = &protocol{name: "non-reentrant", mode: reentrant.ModeLock, once: true, wait: waitOne}
	// getSpinLock: the plain scripts; releases publish nothing
	spinProtocol = &protocol{name: "spin", mode: reentrant.ModeLock, quiet: true, wait: waitPoll}
	// getReadWriteLock(name).readLock(): rwlock.go
	readProtocol = &protocol{name: "read", mode: reentrant.ModeRead, wait: waitAll}
	// getReadWriteLock(name).writeLock(): rwlock.go
	writeProtocol = &protocol{name: "write", mode: reentrant.ModeWrite, writer: true, wait: waitOne}
	// getFairLock: a queue in Redis; releases wake its head (fair.go)
	fairProtocol = &protocol{name: "fair", mode: reentrant.ModeFair, wait: waitQueue}
)

// channel is the channel on which releases of the lock name are announced
// and its waiters listen.
func (p *protocol) channel(name string) string { return p.mode.Channel(name) }

// queueKey names a Client's queue of waiters for a lock (queue.go): the
// lock's name, and whether it is a read-write lock's (rw: its writers
// queue, and wait on the read-write channel; the plain, non-reentrant and
// spin kinds queue apart from them, one queue per name, and wait on the
// plain lock's channel; a fair waiter does not queue here). Names whose
// channels coincide ("x" and "{x}": a channel is "prefix:{name}", or
// "prefix:name" when name holds a '{') queue apart, and each queue
// observes the channel (pubsub.Hub.Observe), so that a release of either
// wakes both queues' heads: one queue of the channel made the waiter of a
// freed "x" wait behind a waiter of a held "{x}" until that one was
// granted.
type queueKey struct {
	name string
	rw   bool
}

// queueKey is the key of the queue of waiters for the lock name of kind p.
func (p *protocol) queueKey(name string) queueKey {
	return queueKey{name: name, rw: p.mode == reentrant.ModeRead || p.mode == reentrant.ModeWrite}
}

// field is owner's holder field on Client c.
func (p *protocol) field(c *Client, owner uint64) string {
	f := reentrant.Field(c.id, owner)
	if p.writer {
		return reentrant.WriterField(f)
	}
	return f
}

// layout reports whether holds of p and of q are the same holds in Redis
// (the same hash layout and scripts): a field's holds of one layout are
// never counted, taken or released by the other's scripts.
func (p *protocol) layout(q *protocol) bool { return p.mode == q.mode }

// fenceable reports whether Fenced may be asked: Redisson has a fenced
// plain lock only.
func (p *protocol) fenceable() error {
	if p.mode != reentrant.ModeLock {
		return invalidf("Fenced with a %s lock (Redisson has no fenced %s lock)", p.mode, p.mode)
	}
	return nil
}

// reenter refuses an acquisition of name by an owner that holds it
// (held) when p is not reentrant: ErrReentered.
func (p *protocol) reenter(name string, held bool) error {
	if p.once && held {
		return fmt.Errorf("%w: %s", ErrReentered, name)
	}
	return nil
}

// shared reports whether holds of p are shared with other holders
// (readers): the watchdog renews them with the read lock's script.
func (p *protocol) shared() bool { return p.mode == reentrant.ModeRead }

// publish is the publish command of a release of a hold taken by p, cmd
// being its Client's: none for a spin lock.
func (p *protocol) publish(cmd string) string {
	if p.quiet {
		return ""
	}
	return cmd
}

// acquire runs acquisition a as p's waiters wait: at once for a re-entry
// or a TryLock that does not wait, else in p's way.
func (p *protocol) acquire(a *acquisition) (*Held, error) {
	if p.wait == waitQueue {
		return a.runFair()
	}
	if held, done, err := a.direct(); done {
		return held, err
	}
	switch p.wait {
	case waitAll:
		return a.share()
	case waitPoll:
		return a.queued(newSpinPolicy(*a.m.spin), a.alone())
	}
	return a.queued(nil, a.alone())
}

// polls reports whether a multi-master lock's member of kind p must poll:
// no release wakes it (spinSleep).
func (p *protocol) polls() bool { return p.wait == waitPoll || p.wait == waitQueue }

// spinSleep is how long a multi-master lock's member of kind p sleeps
// between attempts when no release wakes it, or nil when releases do.
func (p *protocol) spinSleep(m *Mutex) func() time.Duration {
	switch p.wait {
	case waitPoll:
		return newSpinPolicy(*m.spin).sleep
	case waitQueue:
		// A multi-master lock's member never joins a fair lock's queue
		// (its attempts are one-shot), so no release wakes it: it
		// polls, at Redisson's spin backoff.
		b, _ := SpinBackoff{}.withDefaults()
		return newSpinPolicy(b).sleep
	}
	return nil
}

// forceUnlock deletes the lock m as Redisson's forceUnlock of p does.
func (p *protocol) forceUnlock(ctx context.Context, m *Mutex) (bool, error) {
	switch p.mode {
	case reentrant.ModeRead:
		return m.forceUnlockRW(ctx, "read", reentrant.UnlockMessage)
	case reentrant.ModeWrite:
		return m.forceUnlockRW(ctx, "write", reentrant.ReadUnlockMessage)
	case reentrant.ModeFair:
		return m.forceUnlock(ctx, true, func(qctx context.Context, c *Client) (bool, error) {
			return reentrant.ForceUnlockFair(qctx, c.crc, m.name, c.publish)
		})
	}
	return m.forceUnlock(ctx, true, func(qctx context.Context, c *Client) (bool, error) {
		// a spin lock's publishes nothing: Redisson's spin forceUnlock only deletes
		return reentrant.ForceUnlock(qctx, c.crc, m.name, p.publish(c.publish))
	})
}

// isLocked answers m.IsLocked: a read-write lock's half as Redisson's
// isLocked() of that half, any other kind whether the key exists.
func (p *protocol) isLocked(ctx context.Context, m *Mutex) (bool, error) {
	if p.mode == reentrant.ModeRead || p.mode == reentrant.ModeWrite {
		return m.isLockedHalf(ctx)
	}
	return m.exists(ctx)
}

// upgrade refuses a write acquisition by an owner that holds the read
// lock of the same name and not its write lock: Redis would never grant
// it. (A writer's own reads do not keep it from re-entering.)
func (p *protocol) upgrade(m *Mutex, owner uint64) error {
	if !p.writer {
		return nil
	}
	return m.c.upgrade(m, owner)
}
