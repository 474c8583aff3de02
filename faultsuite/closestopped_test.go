package faultsuite

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/lock"
)

// The close-stopped fault kind (issue 29, stage 3): Clients closed, and
// calls cut by their ctx deadlines, while the masters are stopped. Inside
// the assumptions (a pause of a master, shorter or longer than the lease).
//
//   - The mode begins with the masters running. Each worker connects
//     Clients of its own (one per master) and starts callers on them: two
//     goroutines taking holds of the round's lock (a fresh owner each,
//     Lock or TryLock with a 20–150 ms deadline, only TryLock on a fair
//     lock, writing every millisecond
//     while they hold, Unlock with a 20–150 ms deadline) and, on one
//     master, one calling ForceUnlock with a 20–150 ms deadline on a name
//     of the worker's own that nobody locks (ForceUnlock breaks exclusion
//     by design).
//   - The scheduler waits for the workers' Clients (at most readyWithin),
//     lets them contend for 50–200 ms, stops the fault's masters (SIGSTOP,
//     or the container frozen) and signals it; they stay stopped 250–800
//     ms.
//   - Each worker, 0–60 ms after the signal, closes its Clients at once,
//     with one 20–150 ms deadline, while its callers have requests in
//     flight to the stopped masters. A holder whose Client is closing goes
//     on writing until its Held ends, as a holder that does not know of the
//     Close does.
//   - The masters are resumed and the mode ends.
//
// What must hold, besides the round's checks (no double grant: a closing
// holder's write after another Client's grant is one; hold counts; the
// fair queue empty at the end):
//   - every call returns within its deadline plus hardSlack
//     (slack_test.go; a failure with RLOCK_FAULT_HARD_SLACK set, reported
//     otherwise);
//   - when a Close returns, every lock.Held of its Client whose Unlock had
//     not begun has ended, with cause ErrClosed or ErrLockLost;
//   - a lease after the masters were resumed (plus 150 ms), no hold of a
//     closed Client is left in the round's lock hashes on any master: what
//     a cut Lock's request granted, or Close could not release, is given
//     back or expires within one lease.
const (
	readyWithin  = 2 * time.Second
	closeLatest  = 60 * time.Millisecond // a worker closes 0 to this after the stop
	leftoverWait = lossSlack             // after the resume: a lease and 150 ms
)

// stopSignal is one close-stopped fault's shared state.
type stopSignal struct {
	ready   chan struct{} // a send per worker whose Clients are up
	stopped chan struct{} // closed once the masters are stopped

	mu       sync.Mutex
	ids      []string // the closed Clients' ids, the first part of their holder fields
	closes   int      // Close calls made
	ended    int      // Helds a Close had to end
	problems []string
}

func newStopSignal() *stopSignal {
	return &stopSignal{ready: make(chan struct{}, nWorkers), stopped: make(chan struct{})}
}

func (s *stopSignal) problem(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.problems = append(s.problems, fmt.Sprintf(format, args...))
}

// heldSet is the Helds taken on Clients that a worker closes: those whose
// Unlock has not begun when the Close begins must have ended when it
// returns.
type heldSet struct {
	mu        sync.Mutex
	helds     []held
	unlocking map[held]bool
	closing   bool
}

func (s *heldSet) add(h held) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.helds = append(s.helds, h)
}

// mayUnlock reports whether h's holder may call Unlock: not once the
// Close has begun (the holder then writes until its Held ends).
func (s *heldSet) mayUnlock(h held) bool {
	if s == nil {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	if s.unlocking == nil {
		s.unlocking = map[held]bool{}
	}
	s.unlocking[h] = true
	return true
}

func (s *heldSet) startClose() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closing = true
}

// mustEnd are the Helds whose Unlock had not begun when the Close began.
func (s *heldSet) mustEnd() []held {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []held
	for _, h := range s.helds {
		if !s.unlocking[h] {
			out = append(out, h)
		}
	}
	return out
}

// closeStopped is one worker's part of a close-stopped fault: Clients of
// its own, callers on them, and their Close while the masters are
// stopped. A worker takes part once per fault; otherwise (or once the
// masters are stopped) it holds as usual.
func (w *worker) closeStopped(ctx context.Context, r *round, rng *rand.Rand, m workerMode) {
	s := m.stop
	if w.closedFor == s || isDone(s.stopped) {
		w.closedFor = s
		w.plain(ctx, r, rng)
		return
	}
	w.closedFor = s
	nctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	cs, err := w.fresh(nctx, 0)
	cancel()
	if err != nil {
		think(ctx, randDuration(rng, minThink, maxThink))
		return
	}
	s.mu.Lock()
	for _, c := range cs {
		s.ids = append(s.ids, c.ID())
	}
	s.mu.Unlock()

	set := &heldSet{}
	closing := make(chan struct{})
	deadline := func(rng *rand.Rand) time.Duration { return randDuration(rng, m.callTimeout[0], m.callTimeout[1]) }
	var wg sync.WaitGroup
	for range 2 {
		grng := rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
		client := r.newClient()
		wg.Go(func() {
			for ctx.Err() == nil && !isDone(closing) {
				// On a fair lock only TryLock: a blocking waiter's place
				// that a closed Client could not leave made a round's
				// lock unusable past recoveryTimeout (docs/safety.md §5).
				blocking := grng.IntN(10) < blockingShare && !w.fair
				o := holdOpts{lk: w.lockerOn(cs, r.name), client: client, blocking: blocking,
					timeout: deadline(grng), unlockTimeout: deadline(grng), maxWork: sharedWork, busy: true, track: set}
				if grng.IntN(2) == 0 {
					// Cancelled instead (since 2026-11-30): the Client's
					// other calls are in flight on its other connections,
					// which rueidis has not switched to pipelining.
					o.cancelLock, o.timeout = o.timeout, 0
					o.cancelUnlock, o.unlockTimeout = o.unlockTimeout, 0
				}
				w.hold(ctx, r, grng, o)
			}
		})
	}
	if len(cs) == 1 {
		frng := rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
		wg.Go(func() {
			fm := cs[0].Mutex(fmt.Sprintf("%s:force:%d", r.name, w.id))
			for ctx.Err() == nil && !isDone(closing) {
				fctx, cancel := context.WithTimeout(ctx, deadline(frng))
				if frng.IntN(2) == 0 {
					cancel()
					fctx, cancel = cancelAfter(ctx, deadline(frng))
				}
				_ = r.timed(fctx, "ForceUnlock", false, func() error { _, err := fm.ForceUnlock(fctx); return err })
				cancel()
				think(ctx, randDuration(frng, minThink, maxThink))
			}
		})
	}
	s.ready <- struct{}{} // buffered for every worker, each once per fault

	select {
	case <-s.stopped:
		think(ctx, randDuration(rng, 0, closeLatest))
	case <-ctx.Done():
	}
	close(closing)
	set.startClose()
	cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), deadline(rng))
	var cw sync.WaitGroup
	for _, c := range cs {
		cw.Go(func() { _ = r.timed(cctx, "Close", false, func() error { return c.Close(cctx) }) })
	}
	cw.Wait()
	ccancel()
	must := set.mustEnd()
	s.mu.Lock()
	s.closes += len(cs)
	s.ended += len(must)
	s.mu.Unlock()
	for _, h := range must {
		lh, ok := h.(*lock.Held)
		if !ok {
			continue // a multilock.Held ends when its members do
		}
		switch cause := context.Cause(lh.Context()); {
		case lh.Context().Err() == nil:
			s.problem("w%d: a Held (owner %d) was live when its Client's Close returned", w.id, lh.Owner())
		case !errors.Is(cause, lock.ErrClosed) && !errors.Is(cause, lock.ErrLockLost):
			s.problem("w%d: Close ended a Held (owner %d) with %v, not ErrClosed", w.id, lh.Owner(), cause)
		}
	}
	wg.Wait()
}

// injectCloseStopped runs a close-stopped fault: the mode on, the masters
// stopped once the workers' Clients are up, resumed after f.d; then, a
// lease later, the closed Clients' leftovers are looked for.
func (r *round) injectCloseStopped(ctx context.Context, f fault) error {
	s := f.mode.stop
	r.setMode(f.mode)
	defer r.setMode(workerMode{})
	wctx, cancel := context.WithTimeout(ctx, readyWithin)
	for n := 0; n < nWorkers && wctx.Err() == nil; n++ {
		select {
		case <-s.ready:
		case <-wctx.Done():
		}
	}
	cancel()
	if err := sleepCtx(ctx, f.before); err != nil {
		return err
	}
	on := func(do func(*integration.Server) error) error { return r.onTargets(f, do) }
	err := on(func(s *integration.Server) error { return s.Pause(ctx) })
	close(s.stopped)
	if err != nil {
		return errors.Join(err, on(func(s *integration.Server) error { return s.Resume(context.WithoutCancel(ctx)) }))
	}
	err = sleepCtx(ctx, f.d)
	if err := errors.Join(err, on(func(s *integration.Server) error { return s.Resume(context.WithoutCancel(ctx)) })); err != nil {
		return err
	}
	resumed := time.Now()
	r.setMode(workerMode{})
	if err := sleepCtx(ctx, time.Until(resumed.Add(leftoverWait))); err != nil {
		return err
	}
	r.leftovers(s)
	return nil
}

// leftovers records, as problems of s, the holder fields of the Clients
// s closed still in the round's lock hashes, on any master (read past
// the proxies).
func (r *round) leftovers(s *stopSignal) {
	s.mu.Lock()
	ids := append([]string(nil), s.ids...)
	s.mu.Unlock()
	c := r.hist.counter
	for m, conn := range c.conns {
		for _, name := range c.names {
			// A second, not readTimeout: the master is running again by
			// now, and a stall of this process or of redis-server must
			// not pass for a leftover it could not read.
			rctx, cancel := context.WithTimeout(context.Background(), leftoverReadTimeout)
			kv, err := conn.Do(rctx, conn.B().Hgetall().Key(name).Build()).AsStrMap()
			cancel()
			if err != nil {
				s.problem("m%d: reading %s for leftovers: %v", m, name, err)
				continue
			}
			for f := range kv {
				for _, id := range ids {
					if strings.HasPrefix(f, id+":") {
						s.problem("m%d: %s still has field %s of a Client closed while the master was stopped, %v after the resume", m, name, f, leftoverWait)
					}
				}
			}
		}
	}
}

// isDone reports whether ch is closed.
func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
