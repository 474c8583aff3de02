// Package multilock holds one lock over several Redis locks: NewRedLock
// (the Redlock algorithm: a majority of independent masters) and
// NewMultiLock (every one of them, Redisson's RedissonMultiLock). It is
// composed of lock.Mutex values. A RedLock takes one per master, each
// from its own lock.Client:
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
// A MultiLock also takes several names of one Client, as Redisson's
// getMultiLock(a, b, c) on one RedissonClient: an order and its account
// locked together, all or nothing, on one master or, on a Cluster Client,
// on the masters that own the names:
//
//	l := multilock.NewMultiLock(c.Mutex("order:42"), c.Mutex("account:7"))
//
// (Mutexes of other Clients may be mixed in; a name may not be given twice
// on one master.)
//
// Lock and TryLock take lock's options (lock.Lease, lock.Wait,
// lock.Fenced), which mean for the whole lock what they mean for one
// Mutex, and this package's own: Drift, PerMasterTimeout and Observe. A
// Mutex refuses the latter with lock.ErrInvalid. Events go to an
// observe.Observer, as a Client's do.
//
// On each master the lock is Redisson's RLock, so a Java service using
// Redisson's RedissonRedLock or RedissonMultiLock on the same names and
// masters excludes and wakes Go services and the reverse. Each of the
// names of a MultiLock is also the plain lock of that name: a lock.Mutex,
// or Redisson's getLock, of one of them excludes the MultiLock.
//
// In this package's words a "master" is one Mutex of the lock (for a
// RedLock, one master each); a MultiLock over names of one Client has
// several on one master, and its errors call them "locks".
//
// # The algorithm
//
// A round sends the acquire script to every master in parallel and
// decides as soon as a quorum granted, or so many masters refused or
// failed that a quorum can no longer grant, or at the per-master timeout
// (PerMasterTimeout, much shorter than the lease). It succeeds when a
// quorum granted and the validity, lease − elapsed − drift (drift =
// lease × 0.01 + 2ms, see the Drift option), is still positive.
// Otherwise it releases on every master that granted, waiting for those
// releases up to the per-master timeout (not past the call's context,
// which ends the call at once; the releases go on in the background),
// then the call sleeps (see below) and tries again, until TryLock's
// lock.Wait or the context runs out: ErrQuorum. The attempts still out when the round
// decided are not waited for: a grant that comes later joins the Held
// while it is live (no Unlock begun, no loss), so that the lock is held on
// every master that granted it, and is released otherwise (Held.Settled
// is closed once every master answered); an acquire whose reply was lost
// is undone by package lock.
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
// Waiters of one process for one lock (the same names of the same kind on
// the same Clients, in whatever order, whatever *Lock they call) wait in a
// local FIFO queue:
// only its head runs rounds, so the process sends one contender per name,
// and a release by the process lets the next waiter try at once.
// Re-entries and TryLock without lock.Wait do not queue. Readers (every
// member a ReadWriteMutex's ReadLock) share: the head of their queue runs
// its rounds while other readers of the process hold the lock, as another
// process's reader would; a writer's queue is another queue.
//
// Waiters do not poll a held lock: while holders of other owners keep the
// quorum out of reach, the head sleeps until enough of the masters that
// refused it sent an unlock message (lock.Mutex.Watch), or until the
// leases it saw there run out; the other masters' messages do not wake
// it. The exceptions are a lock with a spin lock member
// (lock.Client.SpinMutex), whose releases publish nothing, and one with a
// fair lock member (lock.Client.FairMutex), whose releases wake only the
// fair queue's head: its head polls at the member's (or Redisson's
// default) spin backoff. A multi-master lock's attempts never join a fair
// lock's queue (they are one-shot, as TryLock without lock.Wait), so a
// lock of fair locks excludes but is not granted in FIFO order, and while
// fair waiters keep a member's queue non-empty it cannot get that member
// at all: it can starve. (Redisson's MultiLock joins the members' queues
// for the wait it was given.) Locks that share only some names (a
// MultiLock over a, b, c and one over d, c, b) have queues of their own,
// and never deadlock, whatever order their names were given in: a round
// takes every name at once or gives back what it got before the next one,
// so no waiter keeps a name while it waits for another; the two queues'
// heads contend as two processes would. Rounds that failed for another reason (a
// slow or failed master) retry after a random delay, and so do rounds
// that collided with other contenders woken by the same release.
//
// # Fencing
//
// With the lock.Fenced option Held.Fence returns a token that strictly
// increases across acquisitions of the name, written back to the masters
// before Lock returns. A MultiLock over several names has a token per
// name, Held.FenceOf(name), each name's own counter's. Held.Fence says what it protects and what not;
// docs/safety.md states the algorithm's assumptions (bounded clock drift;
// masters that do not lose acknowledged writes, or stay away longer than
// the longest lease after a restart) and what a single master guarantees.
//
// # Background work
//
// A round's attempts, the releases of a failed round and Unlock's
// releases run on workers of the masters' Clients (goroutines each
// lock.Client keeps and joins on Close), not on goroutines started per
// master and call. An attempt that outlives its round — on a stopped
// master, say — finishes there and deals with what it got: a late grant
// joins the Held or is given back; it is bounded by its Client's
// CommandTimeout (twice, with package lock's compensating release). A
// release retries until it succeeds or that master's watchdog declares
// the hold lost (at most twice the lease). A Client's Close waits for
// those on its master.
package multilock
