// Package lock is rlock's entry point: distributed reentrant locks on one
// Redis master, wire-compatible with Redisson's RLock.
//
// A Client talks to one master, or (Config.Cluster) to one Redis Cluster,
// where each lock lives on the master owning its slot, or
// (Config.MasterSet) to the master that Redis Sentinel names, which it
// follows across failovers. Client.Mutex names
// a lock; Lock and
// TryLock acquire it and return a Held, whose Unlock releases it:
//
//	c, err := lock.New(ctx, lock.Config{Addrs: []string{"127.0.0.1:6379"}})
//	defer c.Close(context.Background())
//	h, err := c.Mutex("orders:42").Lock(ctx)
//	defer h.Unlock(context.Background())
//
// # Owners and reentrancy
//
// Go has no thread identity, so the owner of a hold travels in the
// context. Lock with Held.Context() (or any context derived from it)
// re-enters the lock: the hold count in Redis goes up by one, and each
// re-entry is a Held with its own Unlock. Any other context is another
// owner, and waits — the context given to Lock included, since Lock gives
// a context without an owner a new one that only the Held's context
// carries. WithOwner makes an owner explicitly.
//
// A hold is released by its Held: h.Unlock(ctx), from any goroutine
// (Redisson's unlock()). There is deliberately no Mutex.Unlock: with the
// ctx given to Lock it could not find the owner, and the literal Redisson
// translation "m.Lock(ctx) … m.Unlock(ctx)" would leave the lock held and
// renewed. A nil or zero Client, Mutex or Held (such as the nil Held of a
// failed TryLock) answers ErrInvalid and never panics.
//
// # Errors
//
// Every error matches a sentinel of this package with errors.Is, prints
// on one line prefixed "rlock: " once, and names the master that answered
// (in a cluster, the owner of the lock's slot) in a *MasterError. Redis's
// own refusals map to sentinels by what a caller can do: ErrNotLock (the
// key is not a lock: WRONGTYPE, a non-integer hold count), ErrUnavailable
// (LOADING, BUSY, READONLY, OOM: it passes), ErrAuth (WRONGPASS, NOAUTH,
// NOPERM), ErrInvalid (a DB out of range, MOVED without Config.Cluster).
// A refused request changes no key. A Lock, TryLock or Unlock whose ctx
// ends before its request's answer came says so ("the call's ctx ended
// before its answer came"): its error matches the ctx's error, its cause,
// and ErrUnavailable, since the request's outcome is unknown until the
// Client settles it.
//
// Goroutines that share an owner (a Held's context handed to workers, one
// WithOwner context) share the hold, as Redisson's same thread does: they
// do not exclude each other, and the hold count in Redis equals their live
// Helds exactly, whatever the interleaving. Give goroutines that must
// exclude each other owners of their own.
//
// # One order per hold
//
// A Client sends the requests that change one owner's count on one lock
// (acquire, re-entry, release, the give-back of a cancelled Lock) one at a
// time, each with a request id: a reply that is lost is asked again and
// answered, never applied twice, and a request whose answer cannot be had
// is settled before the next one, so it can never change a newer hold.
// Waiters of one Client for one lock wait in arrival order; only the first
// contends in Redis, and a release by the Client hands it the lock at once.
// A call that finds nobody of its Client waiting makes its first attempt
// before it queues (an uncontended Lock makes no queue), so calls that
// arrive together may each contend once before they queue.
//
// # Leases, the watchdog and loss
//
// A lock taken without the Lease option has a lease of
// Config.WatchdogTimeout (30s) that the Client's watchdog renews every
// Config.RenewInterval (10s), in one round trip for all the locks it
// holds, until the last Unlock. If the lease is lost — a renewal finds
// the key gone or held by another, or renewals fail until the lease must
// have run out (judged before it can run out on the server) — the Held's
// context is cancelled with a *LostError cause that matches ErrLockLost.
// Anything that ends a hold other than its own Unlock or Client.Close is
// such a loss. The Held's context does not end with the context given to
// Lock, which bounds only the wait. Work guarded by the lock should watch
// it:
//
//	select {
//	case <-h.Done():
//		if errors.Is(context.Cause(h.Context()), lock.ErrLockLost) { ... stop ... }
//	}
//
// # Waiting
//
// Waiters sleep on Redisson's unlock channel, over one subscription
// connection per Client (in a cluster with sharded pub/sub, one per
// master, each carrying the channels of its slots), until a release wakes one of them or the
// holder's lease runs out; they never poll. A release by a Redisson
// service wakes rlock waiters and the reverse.
//
// # Sentinel
//
// With Config.MasterSet, Addrs are the sentinels' addresses and the
// Client connects to the master they name; a master set they do not
// monitor is ErrInvalid, sentinels that do not answer ErrUnavailable. On a
// failover, rueidis switches to the new master when a sentinel announces
// it (+switch-master), and every command, the watchdog's renewals among
// them, goes there. The Client looks every 100ms at which master rueidis
// talks to; when it changed, it loads its scripts there and moves its
// subscription connection, which wakes every waiter to try again on the
// new master, and again once its channel is subscribed there. Client.Addr
// and errors name the master of the moment.
//
// What a failover does to a held lock depends on whether the lock had
// reached the replica that was promoted. If it had, the hold goes on:
// the watchdog renews it on the new master (provided the switch takes
// less than the lease). If it had not (Redis replicates asynchronously),
// the new master does not have the lock and another Client can take it:
// the holder's next renewal finds its key gone and its Held's context
// ends with ErrLockLost, but until then both believe they hold it. A
// release sent in the moments between the promotion and the switch goes
// to the old master and is lost with it: the lock stays on the new master
// until its lease runs out.
//
// # What it does not guarantee
//
// A lock on one master is as safe as that master: a failover to a replica
// that had not received the lock (Sentinel's included, see above), or a
// restart without persistence, can grant it twice. A holder paused longer than its lease (GC, SIGSTOP) can
// act after losing it before it notices. Use Fenced tokens checked by the
// guarded resource, or package multilock, when that matters; see
// docs/safety.md.
package lock
