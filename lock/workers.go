package lock

import (
	"context"
	"sync"
	"time"
)

// Workers: the goroutines that run the Client's deferred work (spawn:
// settlers, UNSUBSCRIBEs, replica counts, slot tables) and that it lends
// to package multilock (through internal/lockcore's Go), so that a
// multi-master lock's round sends its per-master calls without starting
// a goroutine per master per call.
//
// A worker runs one function at a time. Idle workers wait on a stack,
// the most recently parked first, so that the few a steady load needs
// stay warm (their stacks already grown); one idle for workerIdle ends.
// A function lent when no worker is idle starts one.
//
// The Client owns them: Close, after the calls in flight ended and the
// holds were released, stops lending and ends the idle workers; a busy
// one ends after its function, which sees the Client closed (ErrClosed).
// Close then joins them with its other background goroutines (c.bg).
// workers.mu guards idle and closed; a worker's channel has one sender,
// whoever popped it from idle.

// workerIdle is how long an idle worker waits for work before it ends.
const workerIdle = 30 * time.Second

type workers struct {
	bg *sync.WaitGroup // the Client's background goroutines, which Close joins

	mu     sync.Mutex
	idle   []*worker
	closed bool
	stop   chan struct{} // closed by Close: idle workers end
}

type worker struct {
	work chan func() // buffer 1: the sender never waits
}

// lend runs f on one of the Client's workers and reports whether it
// could: false once Close has stopped lending (f is not run).
func (wk *workers) lend(f func()) bool {
	wk.mu.Lock()
	if wk.closed {
		wk.mu.Unlock()
		return false
	}
	var w *worker
	if n := len(wk.idle); n > 0 {
		w = wk.idle[n-1]
		wk.idle[n-1] = nil
		wk.idle = wk.idle[:n-1]
	} else {
		if wk.stop == nil {
			wk.stop = make(chan struct{})
		}
		w = &worker{work: make(chan func(), 1)}
		wk.bg.Add(1) // before Close's c.bg.Wait: it sets closed first
		go wk.run(w, wk.stop)
	}
	wk.mu.Unlock()
	w.work <- f
	return true
}

// run runs the functions sent to w until it was idle for workerIdle or
// Close stopped lending.
func (wk *workers) run(w *worker, stop <-chan struct{}) {
	defer wk.bg.Done()
	t := time.NewTimer(workerIdle)
	defer t.Stop()
	for {
		select {
		case f := <-w.work:
			f()
			if !wk.park(w) {
				return
			}
			t.Reset(workerIdle)
		case <-t.C:
			if wk.leave(w) {
				return
			}
		case <-stop:
			if wk.leave(w) {
				return
			}
			stop = nil // popped meanwhile: its function is on the way
		}
	}
}

// park puts w back among the idle workers; false once lending stopped.
func (wk *workers) park(w *worker) bool {
	wk.mu.Lock()
	defer wk.mu.Unlock()
	if wk.closed {
		return false
	}
	wk.idle = append(wk.idle, w)
	return true
}

// leave takes w out of the idle workers; false when it is not among them
// (popped by lend: a function is on the way).
func (wk *workers) leave(w *worker) bool {
	wk.mu.Lock()
	defer wk.mu.Unlock()
	for k, x := range wk.idle {
		if x == w {
			wk.idle = append(wk.idle[:k], wk.idle[k+1:]...)
			return true
		}
	}
	return false
}

// spawn runs f on a worker: the Client's deferred work (a settler, an
// UNSUBSCRIBE, a replica count, a slot table), which Close joins; inline
// once Close stopped lending (no path of package lock spawns then; a
// settler would take a free turn and give up after at most one send).
func (wk *workers) spawn(f func()) {
	if !wk.lend(f) {
		f()
	}
}

// close stops lending and ends the idle workers.
func (wk *workers) close() {
	wk.mu.Lock()
	defer wk.mu.Unlock()
	wk.closed = true
	if wk.stop != nil {
		close(wk.stop)
	}
}

// tally counts work in flight that Close waits for (the calls in flight,
// the settlers): a sync.WaitGroup whose wait can end with a ctx, without
// a goroutine.
type tally struct {
	mu   sync.Mutex
	n    int
	zero chan struct{} // made by a wait; closed when n drops to 0
}

// Add adds d to the count.
func (t *tally) Add(d int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n += d
	if t.n == 0 && t.zero != nil {
		close(t.zero)
		t.zero = nil
	}
}

// Done takes one from the count.
func (t *tally) Done() { t.Add(-1) }

// wait waits until the count is 0 or ctx ends, and reports how many are
// still counted (0 when it ended waiting for none).
func (t *tally) wait(ctx context.Context) int {
	t.mu.Lock()
	if t.n == 0 {
		t.mu.Unlock()
		return 0
	}
	if t.zero == nil {
		t.zero = make(chan struct{})
	}
	z := t.zero
	t.mu.Unlock()
	select {
	case <-z:
		return 0
	case <-ctx.Done():
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n
}
