// Package multilock holds one lock over several independent Redis
// masters: NewRedLock (the Redlock algorithm: a majority of the masters)
// and NewMultiLock (every master, Redisson's RedissonMultiLock). It is
// composed of lock.Mutex values, one per master, each from its own
// lock.Client:
//
//	var ms []*lock.Mutex
//	for _, addr := range addrs { // five independent masters
//		c, err := lock.New(ctx, lock.Config{Addrs: []string{addr}})
//		...
//		ms = append(ms, c.Mutex("orders:42"))
//	}
//	l := multilock.NewRedLock(ms...)
//	h, err := l.Lock(ctx)
//	defer h.Unlock(context.Background())
//
// On each master the lock is Redisson's RLock, so a Java service using
// Redisson's RedissonRedLock or RedissonMultiLock on the same names and
// masters excludes and wakes Go services and the reverse.
//
// # The algorithm
//
// A round sends the acquire script to every master in parallel and waits
// for the answers up to the per-master timeout (PerMasterTimeout, much
// shorter than the lease). It succeeds when a quorum granted and the
// validity, lease − elapsed − drift (drift = lease × 0.01 + 2ms, see the
// Drift option), is still positive. Otherwise it releases on every master
// that granted — and an answer that comes after the round decided is
// given back by its own goroutine, and an acquire whose reply was lost is
// undone by package lock — then the call sleeps (see below) and tries
// again, until TryLock's Wait or the context runs out: ErrQuorum.
//
// # Holding
//
// Every master holds the lock for the same owner (lock.WithOwner), carried
// by Held.Context(): Lock with it re-enters the lock on every master. Each
// master's watchdog renews its lease as for any lock.Mutex. Each master's
// hold is watched with context.AfterFunc, without a goroutine per lock:
// once fewer than a quorum of masters still hold the lock (a renewal found
// it gone, renewals failed until the lease ran out, a Client closed), the
// Held's context is cancelled with a *lock.LostError cause naming the
// masters lost, matching lock.ErrLockLost.
//
// # Waiting
//
// Waiters do not poll a held lock: they sleep on every master's unlock
// channel at once (lock.Mutex.Watch), or until the holders' leases run
// out. Only rounds that failed for another reason (a split vote, a slow
// or failed master) retry after a random delay.
//
// # Fencing
//
// With the Fenced option Held.Fence returns a token that strictly
// increases across acquisitions of the name, written back to the masters
// before Lock returns. Held.Fence says what it protects and what not;
// docs/safety.md states the algorithm's assumptions (bounded clock drift;
// masters that do not lose acknowledged writes, or stay away longer than
// the longest lease after a restart) and what a single master guarantees.
//
// # Background work
//
// A call starts one short-lived goroutine per master and round, and
// waits for it up to the per-master timeout. One that takes longer — an
// attempt on a stopped master, a release slower than the round waits —
// finishes in the background and undoes what it did: an attempt is
// bounded by its Client's CommandTimeout (twice, with package lock's
// compensating release) and gives back a late grant; a release retries
// until it succeeds or that master's watchdog declares the hold lost (at
// most twice the lease). A Client's Close waits for those on its master.
package multilock
