package faultsuite

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/rlock-go/rlock/lock"
)

// Worker behaviour. Durations here model the clients' work and arrivals;
// none of them waits for another goroutine (signals do that).
const (
	blockingShare = 7 // in 10 attempts block in Lock; the rest TryLock once, as arriving clients do
	minThink      = 5 * time.Millisecond
	maxThink      = 30 * time.Millisecond
	// Work is short (well inside a renew interval) or long (across
	// several leases, so that faults hit holders, who must be told).
	longShare     = 4 // in 10 holds are long
	minWork       = 20 * time.Millisecond
	maxWork       = 200 * time.Millisecond
	maxLongWork   = 3 * watchdogLease
	unlockTimeout = 3 * time.Second
	// retryUnlockAfter is how long an unlock-deadline holder whose Unlock
	// failed writes while its Held's context is live before it unlocks
	// again.
	retryUnlockAfter = 200 * time.Millisecond
	// sharedWork is the longest hold of a goroutine sharing an owner:
	// short, so that their Redis operations interleave often.
	sharedWork = 60 * time.Millisecond
)

// pauseRequest asks the next holder to pause past its lease: it takes the
// lock with explicitLease, writes, pauses for d without looking at its
// context, and writes again. done is closed when it has.
type pauseRequest struct {
	d    time.Duration
	done chan struct{}
}

// run is one worker's loop for a round: acquire, write, work, write,
// release, until ctx ends. While the scheduler has a worker mode on (a
// fault kind that changes how clients use the lock: shared owners,
// re-entries, owner-carrying contexts, tight timeouts), the worker
// follows it.
func (w *worker) run(ctx context.Context, r *round) {
	rng := rand.New(rand.NewPCG(r.seed, uint64(w.id)+1))
	for ctx.Err() == nil {
		m := r.mode()
		switch m.kind {
		case "shared-owner", "lost-request", "lost-reply", "ctx-deadline", "unlock-deadline", "ctx-cancel":
			w.shared(ctx, r, rng, m)
		case "reenter-short-lease":
			w.hold(ctx, r, rng, holdOpts{lk: w.locker(r.name, false), client: w.id, blocking: true, inner: m.shortLease})
		case "owner-ctx":
			w.ownerCtx(ctx, r, rng, m)
		case "close-holding":
			w.closeHolding(ctx, r, rng)
		case "close-stopped":
			w.closeStopped(ctx, r, rng, m)
		case "tight-timeout":
			lease := randDuration(rng, m.tightLease[0], m.tightLease[1])
			w.hold(ctx, r, rng, holdOpts{lk: w.locker(r.name, true), client: w.id, blocking: rng.IntN(10) < blockingShare, lease: lease, maxWork: lease})
		default:
			w.plain(ctx, r, rng)
		}
	}
}

// plain is one hold of a fresh owner, as the suite always did; it takes
// the pause of a holder-pause fault when one is asked for.
func (w *worker) plain(ctx context.Context, r *round, rng *rand.Rand) {
	pr := r.takePause()
	o := holdOpts{lk: w.locker(r.name, false), client: w.id, blocking: rng.IntN(10) < blockingShare, pause: pr}
	if pr != nil {
		o.blocking, o.lease = true, explicitLease
	}
	if !w.hold(ctx, r, rng, o) {
		r.givePause(pr)
	}
}

// holdOpts is how one hold is taken and used.
type holdOpts struct {
	lk      locker
	client  int             // the goroutine, for porcupine's view
	lockCtx context.Context // the ctx given to Lock (may carry an owner); nil: the round's
	timeout time.Duration   // > 0: Lock's ctx ends after it (a deadline mid-acquire)
	// unlockTimeout > 0: Unlock's ctx ends after it (a deadline with the
	// release in flight); after an Unlock error the holder goes on
	// writing while its Held's context is live, as a holder that trusts
	// its context does.
	unlockTimeout time.Duration
	// cancelLock, cancelUnlock > 0: Lock's, Unlock's ctx is cancelled
	// after it (no deadline: the call must return at the cancellation);
	// after an Unlock error the holder goes on as with unlockTimeout.
	cancelLock, cancelUnlock time.Duration
	blocking                 bool
	lease                    time.Duration // explicit Lease; 0: the watchdog
	maxWork                  time.Duration // > 0: work at most this long
	pause                    *pauseRequest
	// nested: while holding, a goroutine given the Held's context
	// re-enters, works and unlocks; join: the holder waits for it before
	// its own Unlock (otherwise it may unlock while the re-entry is in
	// flight).
	nested, join bool
	// inner > 0: while holding, re-enter with Lease(inner), unlock the
	// re-entry, then keep the outer hold for longer than inner.
	inner time.Duration
	// busy: the holder writes every millisecond while it works, not
	// only before and after, as a holder that does not know its lock
	// may end does.
	busy bool
	// track, when set, is told of the hold and asked before Unlock
	// (close-stopped: a hold its Client's Close must end).
	track *heldSet
}

// hold acquires once, writes, works, writes and releases; it reports
// whether it acquired. A failed acquisition waits a little, as a client
// would.
func (w *worker) hold(ctx context.Context, r *round, rng *rand.Rand, o holdOpts) bool {
	lctx := ctx
	if o.lockCtx != nil {
		lctx = o.lockCtx
	}
	cancel := context.CancelFunc(func() {})
	if o.timeout > 0 {
		lctx, cancel = context.WithTimeout(lctx, o.timeout)
	}
	if o.cancelLock > 0 {
		lctx, cancel = cancelAfter(lctx, o.cancelLock)
	}
	call := r.hist.now()
	var h held
	err := r.timed(lctx, lockCall(o.blocking), o.lk.multilock(), func() (err error) {
		h, err = o.lk.lock(lctx, o.blocking, o.lease)
		return err
	})
	cancel()
	if err != nil {
		if owner, ok := lock.OwnerFrom(lctx); ok && !errors.As(err, new(*lock.ConflictError)) {
			r.hist.failedAcquire(owner, call)
			// A client that owns its calls often asks again at once
			// after an error: half of them do.
			if rng.IntN(2) == 0 {
				return false
			}
		}
		// Busy, or a master down: come back later, as a client would.
		think(ctx, randDuration(rng, minThink, maxThink))
		return false
	}
	x := r.hist.acquired(w.id, o.client, call, h, o.lease, o.lk.spans(h))
	o.track.add(h)
	r.hist.read(x)
	if o.pause == nil && o.client == w.id && o.lockCtx == nil {
		w.sink.held(w.id, h.Owner())
	}
	r.res.write(r.hist, x, h.Context(), false)
	r.hist.read(x)
	var nested sync.WaitGroup
	if o.nested {
		nctx, stop := r.bound(ctx, h.Context())
		nrng := rand.New(rand.NewPCG(rng.Uint64(), 7))
		nested.Go(func() {
			defer stop()
			w.hold(ctx, r, nrng, holdOpts{lk: o.lk, client: r.newClient(), lockCtx: nctx, blocking: true, maxWork: sharedWork})
		})
	}
	switch {
	case o.pause != nil:
		w.pausePastLease(r, x, h, o.pause)
	case o.inner > 0:
		ictx, stop := r.bound(ctx, h.Context())
		w.hold(ctx, r, rng, holdOpts{lk: o.lk, client: o.client, lockCtx: ictx, blocking: true, lease: o.inner, maxWork: o.inner / 2})
		stop()
		// The outer hold goes on past the inner lease: a re-entry must
		// not have shortened it.
		work(h.Context(), randDuration(rng, o.inner+50*time.Millisecond, o.inner+3*watchdogLease/4))
		r.res.write(r.hist, x, h.Context(), false)
	default:
		d := randDuration(rng, minWork, maxWork)
		if rng.IntN(10) < longShare {
			d = randDuration(rng, maxWork, maxLongWork)
		}
		if o.maxWork > 0 {
			d = min(d, randDuration(rng, minWork/2, o.maxWork))
		}
		if o.busy {
			until := time.Now().Add(d)
			for time.Now().Before(until) && r.res.write(r.hist, x, h.Context(), false) {
				work(h.Context(), time.Millisecond)
			}
		} else {
			work(h.Context(), d)
		}
		r.res.write(r.hist, x, h.Context(), false)
	}
	if !o.track.mayUnlock(h) {
		// Its Client is being closed: the holder goes on writing until
		// Close ends its Held, as a holder that does not know of the
		// Close does; the Unlock below then finds the Client closed.
		until := time.Now().Add(unlockTimeout)
		for ctx.Err() == nil && time.Now().Before(until) && r.res.write(r.hist, x, h.Context(), false) {
			work(h.Context(), time.Millisecond)
		}
	}
	if o.join {
		nested.Wait()
	}
	r.hist.checkLoss(x, h.Context())
	if o.pause == nil && o.client == w.id && o.lockCtx == nil {
		w.sink.held(w.id, 0)
	}
	ut := unlockTimeout
	if o.unlockTimeout > 0 {
		ut = o.unlockTimeout
	}
	uctx, ucancel := context.WithTimeout(context.WithoutCancel(ctx), ut)
	if o.cancelUnlock > 0 {
		uctx, ucancel = cancelAfter(uctx, o.cancelUnlock)
	}
	ucall := r.hist.now()
	err = r.timed(uctx, "Unlock", o.lk.multilock(), func() error { return h.Unlock(uctx) })
	ucancel()
	if err != nil && (o.unlockTimeout > 0 || o.cancelUnlock > 0) {
		// A holder that trusts its context: while the context says the
		// lock is still held (an Unlock that found its turn busy did
		// not release it), it goes on writing for a while, then unlocks
		// again without the short deadline.
		until := time.Now().Add(retryUnlockAfter)
		for time.Now().Before(until) && r.res.write(r.hist, x, h.Context(), false) {
			work(h.Context(), time.Millisecond)
		}
		uctx, ucancel := context.WithTimeout(context.WithoutCancel(ctx), unlockTimeout)
		if again := r.timed(uctx, "Unlock", o.lk.multilock(), func() error { return h.Unlock(uctx) }); again == nil || !errors.Is(again, lock.ErrNotHeld) {
			err = again
		}
		ucancel()
	}
	r.hist.unlocked(x, ucall, r.hist.now(), err)
	r.hist.read(x)
	nested.Wait()
	return true
}

// closeHolding is one hold on Clients of the worker's own, which are
// closed while it holds ("close-holding"): the holder goes on writing
// until its Held's context ends, as a holder that does not know of the
// Close does. Close must end the Held before its release lets another
// Client be granted (docs/model/hold.pml, CLOSE_LATE); a write after
// that grant is an overlap the checker reports. With several masters the
// worker holds as usual.
func (w *worker) closeHolding(ctx context.Context, r *round, rng *rand.Rand) {
	if len(w.clients) > 1 {
		w.plain(ctx, r, rng)
		return
	}
	nctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	cs, err := w.fresh(nctx, 0)
	cancel()
	if err != nil {
		think(ctx, randDuration(rng, minThink, maxThink))
		return
	}
	closeAll := func() error {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unlockTimeout)
		defer cancel()
		var errs []error
		for _, c := range cs {
			errs = append(errs, r.timed(cctx, "Close", false, func() error { return c.Close(cctx) }))
		}
		return errors.Join(errs...)
	}
	call := r.hist.now()
	lk := w.lockerOn(cs, r.name)
	blocking := rng.IntN(10) < blockingShare
	var h held
	err = r.timed(ctx, lockCall(blocking), lk.multilock(), func() (err error) {
		h, err = lk.lock(ctx, blocking, 0)
		return err
	})
	if err != nil {
		_ = closeAll()
		think(ctx, randDuration(rng, minThink, maxThink))
		return
	}
	x := r.hist.acquired(w.id, w.id, call, h, 0, lk.spans(h))
	r.hist.read(x)
	r.res.write(r.hist, x, h.Context(), false)
	work(h.Context(), randDuration(rng, minWork, maxWork))
	ucall := r.hist.now()
	closed := make(chan error, 1)
	go func() { closed <- closeAll() }()
	for r.res.write(r.hist, x, h.Context(), false) {
		work(h.Context(), time.Millisecond) // busy writing, until the Held ends
	}
	err = <-closed
	r.hist.unlocked(x, ucall, r.hist.now(), err)
	r.hist.read(x)
}

// shared is a group of two or three goroutines of one worker sharing one
// owner (lock.WithOwner): each locks, re-enters and unlocks concurrently
// with the others, some pass their Held's context to a nested goroutine
// that re-enters. In ctx-deadline mode their Locks have short deadlines.
func (w *worker) shared(ctx context.Context, r *round, rng *rand.Rand, m workerMode) {
	octx := lock.WithOwner(ctx)
	var wg sync.WaitGroup
	for range 2 + rng.IntN(2) {
		grng := rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
		client := r.newClient()
		wg.Go(func() {
			for k := 3 + grng.IntN(4); k > 0 && ctx.Err() == nil && r.mode().kind == m.kind; k-- {
				o := holdOpts{lk: w.locker(r.name, false), client: client, lockCtx: octx,
					blocking: grng.IntN(10) < blockingShare, nested: grng.IntN(3) == 0, join: grng.IntN(2) == 0, maxWork: sharedWork}
				if m.kind == "ctx-deadline" {
					o.blocking, o.timeout = true, randDuration(grng, m.lockTimeout[0], m.lockTimeout[1])
				}
				if m.kind == "unlock-deadline" {
					o.unlockTimeout = randDuration(grng, m.unlockTimeout[0], m.unlockTimeout[1])
				}
				if m.kind == "ctx-cancel" {
					d := randDuration(grng, m.cancelAfter[0], m.cancelAfter[1])
					if grng.IntN(2) == 0 {
						o.blocking, o.cancelLock = true, d
					} else {
						o.cancelUnlock = d
					}
				}
				w.hold(ctx, r, grng, o)
			}
		})
	}
	wg.Wait()
}

// ownerCtx locks with a context that carries an owner while the mode is
// on: one from lock.WithOwner, kept across the worker's holds, or the
// Held context of another lock the worker holds meanwhile (nested locking).
func (w *worker) ownerCtx(ctx context.Context, r *round, rng *rand.Rand, m workerMode) {
	octx := lock.WithOwner(ctx)
	var aux *lock.Held
	if rng.IntN(2) == 0 {
		var h *lock.Held
		err := r.timed(ctx, "Lock", false, func() (err error) {
			h, err = w.clients[0].Mutex(fmt.Sprintf("%s:aux:%d", r.name, w.id)).Lock(ctx)
			return err
		})
		if err != nil {
			think(ctx, randDuration(rng, minThink, maxThink))
			return
		}
		aux = h
		var stop context.CancelFunc
		octx, stop = r.bound(ctx, h.Context())
		defer stop()
	}
	for ctx.Err() == nil && octx.Err() == nil && r.mode().kind == m.kind {
		w.hold(ctx, r, rng, holdOpts{lk: w.locker(r.name, false), client: w.id, lockCtx: octx,
			blocking: rng.IntN(10) < blockingShare, maxWork: maxWork})
	}
	if aux != nil {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unlockTimeout)
		_ = r.timed(uctx, "Unlock", false, func() error { return aux.Unlock(uctx) })
		cancel()
	}
}

// pausePastLease is a holder stopped (GC, SIGSTOP, swap) for longer than
// its lease between its look at the lock and its write: Kleppmann's
// scenario. The pause is time itself, so it is a sleep; the holder does
// not look at its context before writing, since a paused process cannot.
//
// The pause lasts pr.d and then until another owner, granted the lock
// since, has written, for at most pauseGrace more: a fair waiter sleeps
// until the end of the lease it last saw, which may end after pr.d (the
// 504-round run of a211f15, seed 20261440: the lease ended 163 ms before
// the pause did and the head waiter was granted 238 ms after it), and a
// fault that did not bite fails its round's check, which wants a double
// grant and the paused holder's write rejected as stale.
func (w *worker) pausePastLease(r *round, x *holding, h held, pr *pauseRequest) {
	defer close(pr.done)
	believed := h.Context().Err() == nil
	r.hist.pause(x)
	from := r.hist.now()
	time.Sleep(pr.d)
	ctx, cancel := context.WithTimeout(context.Background(), pauseGrace)
	_ = r.hist.waitWrite(ctx, from, x.field) // none within pauseGrace: the round's check says so
	cancel()
	r.res.write(r.hist, x, nil, believed)
}

// pauseGrace is how much longer than asked a paused holder waits for
// another owner's write.
const pauseGrace = 3 * time.Second

// work holds the lock for d, or until the hold ends (lost, or the round
// is over): a holder that watches its context stops at a loss.
func work(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// lockCall names an acquisition for the deadline measurements.
func lockCall(blocking bool) string {
	if blocking {
		return "Lock"
	}
	return "TryLock"
}

// think waits d between attempts, or until ctx ends.
func think(ctx context.Context, d time.Duration) { work(ctx, d) }

func randDuration(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rng.Int64N(int64(hi-lo)+1))
}

// pauses hands one pauseRequest to the first worker that asks.
type pauses struct {
	mu sync.Mutex
	pr *pauseRequest
}

func (r *round) requestPause(d time.Duration) *pauseRequest {
	pr := &pauseRequest{d: d, done: make(chan struct{})}
	r.pauses.mu.Lock()
	r.pauses.pr = pr
	r.pauses.mu.Unlock()
	return pr
}

func (r *round) takePause() *pauseRequest {
	r.pauses.mu.Lock()
	defer r.pauses.mu.Unlock()
	pr := r.pauses.pr
	r.pauses.pr = nil
	return pr
}

// givePause puts back a request whose acquisition failed.
func (r *round) givePause(pr *pauseRequest) {
	if pr == nil {
		return
	}
	r.pauses.mu.Lock()
	defer r.pauses.mu.Unlock()
	if r.pauses.pr == nil {
		r.pauses.pr = pr
	}
}
