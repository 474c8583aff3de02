package faultsuite

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"
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
)

// pauseRequest asks the next holder to pause past its lease: it takes the
// lock with explicitLease, writes, pauses for d without looking at its
// context, and writes again. done is closed when it has.
type pauseRequest struct {
	d    time.Duration
	done chan struct{}
}

// run is one worker's loop for a round: acquire, write, work, write,
// release, until ctx ends.
func (w *worker) run(ctx context.Context, r *round) {
	rng := rand.New(rand.NewPCG(r.seed, uint64(w.id)+1))
	lk := w.locker(r.name)
	for ctx.Err() == nil {
		pr := r.takePause()
		blocking := rng.IntN(10) < blockingShare
		var lease time.Duration
		if pr != nil {
			blocking, lease = true, explicitLease
		}
		call := r.hist.now()
		h, err := lk.lock(ctx, blocking, lease)
		if err != nil {
			r.givePause(pr)
			// Busy, or a master down: come back later, as a client would.
			think(ctx, randDuration(rng, minThink, maxThink))
			continue
		}
		x := r.hist.acquired(w.id, call, h)
		w.sink.held(w.id, h.Owner())
		r.res.write(r.hist, x, h.Context(), false)
		if pr != nil {
			w.pausePastLease(r, x, h, pr)
		} else {
			d := randDuration(rng, minWork, maxWork)
			if rng.IntN(10) < longShare {
				d = randDuration(rng, maxWork, maxLongWork)
			}
			work(h.Context(), d)
			r.res.write(r.hist, x, h.Context(), false)
		}
		r.hist.checkLoss(x, h.Context())
		w.sink.held(w.id, 0)
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unlockTimeout)
		ucall := r.hist.now()
		err = h.Unlock(uctx)
		r.hist.unlocked(x, ucall, r.hist.now(), err)
		cancel()
	}
}

// pausePastLease is a holder stopped (GC, SIGSTOP, swap) for longer than
// its lease between its look at the lock and its write: Kleppmann's
// scenario. The pause is time itself, so it is a sleep; the holder does
// not look at its context before writing, since a paused process cannot.
func (w *worker) pausePastLease(r *round, x *holding, h held, pr *pauseRequest) {
	defer close(pr.done)
	believed := h.Context().Err() == nil
	r.hist.mu.Lock()
	x.paused = true
	r.hist.mu.Unlock()
	time.Sleep(pr.d)
	r.res.write(r.hist, x, nil, believed)
}

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
