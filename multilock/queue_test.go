package multilock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/multilock"
	"github.com/rlock-go/rlock/observe"
)

// attempts counts a Client's acquire attempts (observe.Observer
// AcquireStart) and how many were in flight at once.
type attempts struct {
	n, inFlight, maxInFlight atomic.Int64
}

func (a *attempts) observer() *observe.Observer {
	return &observe.Observer{
		AcquireStart: func(ctx context.Context, _ observe.AcquireStart) context.Context {
			a.n.Add(1)
			now := a.inFlight.Add(1)
			for {
				m := a.maxInFlight.Load()
				if now <= m || a.maxInFlight.CompareAndSwap(m, now) {
					break
				}
			}
			return ctx
		},
		AcquireEnd: func(context.Context, observe.AcquireEnd) { a.inFlight.Add(-1) },
	}
}

// observedClients makes one Client per shared master, each counting its
// acquire attempts.
func observedClients(t *testing.T, cfg lock.Config) ([]*lock.Client, []*attempts) {
	t.Helper()
	cs := make([]*lock.Client, len(shared))
	as := make([]*attempts, len(shared))
	for i, s := range shared {
		as[i] = &attempts{}
		c := cfg
		c.Observer = as[i].observer()
		cs[i] = clients(t, shared[i:i+1], c)[0]
		_ = s
	}
	return cs, as
}

// rounds is how many rounds the attempts on the masters make: every
// round tries every master once.
func rounds(as []*attempts) int64 {
	var n int64
	for _, a := range as {
		n = max(n, a.n.Load())
	}
	return n
}

// Finding 17 (docs/safety.md problem 3): while another owner holds a
// bare quorum (3 of 5 masters), a RedLock waiter has nothing to try: it
// must sleep until a master that refused it is released or the holder's
// leases end, not run rounds woken by the other waiter's releases of the
// two free masters.
func TestRedLockWaitersSleepWhileQuorumOutOfReach(t *testing.T) {
	n := name(t)
	// The holder's, renewed by its watchdog every 400 ms: a busy machine
	// stalled a 400 ms lease's renewals long enough to lose it, and the
	// waiters then rightly acquired.
	const lease = 1200 * time.Millisecond
	const wait = time.Second
	for _, c := range clients(t, shared[:3], lock.Config{WatchdogTimeout: lease}) {
		if _, err := c.Mutex(n).Lock(bg(t)); err != nil {
			t.Fatal(err)
		}
	}
	type waiter struct {
		as    []*attempts
		l     *multilock.Lock
		wakes atomic.Int64 // wake-ups by a message, a reconnect or a local release
		err   error
	}
	ws := make([]*waiter, 2)
	for i := range ws {
		cs, as := observedClients(t, lock.Config{})
		ws[i] = &waiter{as: as, l: multilock.NewRedLock(mutexes(cs, n)...)}
	}
	var wg sync.WaitGroup
	for _, w := range ws {
		obs := &observe.Observer{WakeUp: func(_ context.Context, e observe.WakeUp) {
			switch e.Reason {
			case observe.WakeMessage, observe.WakeReconnect, observe.WakeRelease:
				w.wakes.Add(1)
			}
		}}
		wg.Go(func() {
			_, w.err = w.l.TryLock(bg(t), lock.Wait(wait), multilock.Observe(obs))
		})
	}
	wg.Wait()
	for i, w := range ws {
		multilock.WaitBackground(w.l)
		if !errors.Is(w.err, multilock.ErrQuorum) {
			t.Errorf("waiter %d: %v, want ErrQuorum", i, w.err)
		}
		r, wakes := rounds(w.as), w.wakes.Load()
		t.Logf("waiter %d: %d rounds in %v (%.1f/s), %d wake-ups", i, r, wait, float64(r)/wait.Seconds(), wakes)
		// The first round, the one after subscribing, one per wake-up
		// and one per lease of the holder's that the waiter saw end: its
		// watchdog renews every third of the lease, so a lease seen ends
		// at least 2/3 of the lease after the round that saw it.
		if limit := 2 + wakes + int64((3*wait+2*lease-1)/(2*lease)); r > limit {
			t.Errorf("waiter %d: %d rounds, more than %d: 2 + %d wake-ups + one per lease seen", i, r, limit, wakes)
		}
		// The wake-ups are the other waiter's releases of masters that
		// refused this one: a few while their rounds still overlap.
		if wakes > 6 {
			t.Errorf("waiter %d: %d wake-ups by messages; the holder released nothing", i, wakes)
		}
	}
}

// Issue 14: waiters of one process for one RedLock (the same names on the
// same Clients, whatever *multilock.Lock they use) wait in a local queue:
// only its head runs rounds, so the masters see one attempt at a time and
// a round per acquisition, and a local release wakes the head at once.
func TestRedLockLocalWaitersQueue(t *testing.T) {
	n := name(t)
	cs, as := observedClients(t, lock.Config{})
	const workers, each = 4, 5
	var (
		holding, overlaps atomic.Int64
		roundsSeen        atomic.Int64
	)
	obs := &observe.Observer{Round: func(context.Context, observe.Round) { roundsSeen.Add(1) }}
	errs := make([]error, workers)
	ls := make([]*multilock.Lock, workers)
	var wg sync.WaitGroup
	for i := range workers {
		ls[i] = multilock.NewRedLock(mutexes(cs, n)...)
		wg.Go(func() {
			for range each {
				h, err := ls[i].Lock(bg(t), multilock.Observe(obs))
				if err != nil {
					errs[i] = err
					return
				}
				// Lock returned once a quorum granted; the round's
				// other attempts are still out and would overlap the
				// next head's round: wait for them, so that what is
				// counted is the queue's own contention.
				multilock.WaitBackground(ls[i])
				if holding.Add(1) > 1 {
					overlaps.Add(1)
				}
				time.Sleep(time.Millisecond) // the work the lock guards
				holding.Add(-1)
				if err := h.Unlock(bg(t)); err != nil {
					errs[i] = err
					return
				}
			}
		})
	}
	wg.Wait()
	for _, l := range ls {
		multilock.WaitBackground(l)
	}
	for i, err := range errs {
		if err != nil {
			t.Errorf("worker %d: %v", i, err)
		}
	}
	if o := overlaps.Load(); o > 0 {
		t.Errorf("%d overlapping holds", o)
	}
	r := rounds(as)
	t.Logf("%d acquisitions, %d rounds (observer: %d)", workers*each, r, roundsSeen.Load())
	for i, a := range as {
		if m := a.maxInFlight.Load(); m > 1 {
			t.Errorf("master %d: %d attempts in flight at once, want one contender at a time", i, m)
		}
	}
	if r > workers*each+2 {
		t.Errorf("%d rounds for %d acquisitions: only the head of the local queue should try", r, workers*each)
	}
	if q := multilock.Queues(); q != 0 {
		t.Errorf("%d local queues left after every call returned", q)
	}
}

// A local waiter behind a holder of its own process runs no round while
// that holder holds, and its first round follows the holder's Unlock (a
// WakeRelease); a queued TryLock whose wait ends before its turn returns
// ErrQuorum and leaves nothing queued.
func TestRedLockLocalReleaseHandsOver(t *testing.T) {
	n := name(t)
	cs, as := observedClients(t, lock.Config{}) // watchdog lease 30s: only a release ends the wait
	holder, err := multilock.NewRedLock(mutexes(cs, n)...).Lock(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := multilock.NewRedLock(mutexes(cs, n)...).TryLock(bg(t), lock.Wait(50*time.Millisecond)); !errors.Is(err, multilock.ErrQuorum) {
		t.Fatalf("queued TryLock behind a local holder: %v, want ErrQuorum", err)
	}
	if r := rounds(as); r != 1 {
		t.Errorf("%d rounds, want only the holder's: the waiter had no turn", r)
	}
	var wakes []observe.WakeUp
	waiting := make(chan struct{})
	obs := &observe.Observer{WakeUp: func(_ context.Context, e observe.WakeUp) { wakes = append(wakes, e) }}
	got := make(chan error, 1)
	go func() {
		close(waiting)
		h, err := multilock.NewRedLock(mutexes(cs, n)...).Lock(bg(t), multilock.Observe(obs))
		if err == nil {
			err = h.Unlock(bg(t))
		}
		got <- err
	}()
	<-waiting
	if err := holder.Unlock(bg(t)); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter: %v", err)
	}
	// The waiter may have joined after the Unlock: then it had no wait.
	if len(wakes) > 1 || len(wakes) == 1 && wakes[0].Reason != observe.WakeRelease {
		t.Errorf("wake-ups %+v: want at most one, by the local release", wakes)
	}
	if r := rounds(as); r != 2 {
		t.Errorf("%d rounds, want 2: the holder's and the waiter's", r)
	}
	if q := multilock.Queues(); q != 0 {
		t.Errorf("%d local queues left", q)
	}
}
