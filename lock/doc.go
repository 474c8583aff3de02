// Package lock is rlock's entry point: distributed reentrant locks on one
// Redis master, wire-compatible with Redisson's RLock.
//
// A Client talks to one master, or (Config.Cluster) to one Redis Cluster,
// where each lock lives on the master owning its slot. Client.Mutex names
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
// owner, and waits. WithOwner makes an owner explicitly.
//
// # Leases, the watchdog and loss
//
// A lock taken without the Lease option has a lease of
// Config.WatchdogTimeout (30s) that the Client's watchdog renews every
// Config.RenewInterval (10s), in one round trip for all the locks it
// holds, until the last Unlock. If the lease is lost — a renewal finds
// the key gone or held by another, or renewals fail until the lease must
// have run out — the Held's context is cancelled with a *LostError cause
// that matches ErrLockLost. Work guarded by the lock should watch it:
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
// # What it does not guarantee
//
// A lock on one master is as safe as that master: a failover to a replica
// that had not received the lock, or a restart without persistence, can
// grant it twice. A holder paused longer than its lease (GC, SIGSTOP) can
// act after losing it before it notices. Use Fenced tokens checked by the
// guarded resource, or package multilock, when that matters; see
// docs/safety.md.
package lock
