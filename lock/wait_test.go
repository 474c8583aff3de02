package lock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/observe"
)

// wakeCounter is an Observer that counts waits and wake-ups by reason.
type wakeCounter struct {
	waiting  chan struct{}
	mu       sync.Mutex
	byReason map[observe.WakeReason]int
	woken    chan observe.WakeReason
}

func newWakeCounter() *wakeCounter {
	return &wakeCounter{waiting: make(chan struct{}, 1024), byReason: map[observe.WakeReason]int{}, woken: make(chan observe.WakeReason, 1024)}
}

func (w *wakeCounter) observer() *observe.Observer {
	return &observe.Observer{
		Waiting: func(context.Context, observe.Waiting) { w.waiting <- struct{}{} },
		WakeUp: func(_ context.Context, e observe.WakeUp) {
			w.mu.Lock()
			w.byReason[e.Reason]++
			w.mu.Unlock()
			w.woken <- e.Reason
		},
	}
}

func (w *wakeCounter) count(r observe.WakeReason) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.byReason[r]
}

func numsub(t testing.TB, rc rueidis.Client, channel string) int64 {
	t.Helper()
	m, err := do(t, rc, "PUBSUB", "NUMSUB", channel).ToArray()
	must(t, err)
	n, err := m[1].AsInt64()
	must(t, err)
	return n
}

// waitUnsubscribed waits until the channel has no subscriber: a waiter's
// Close unsubscribes in the background, and the server sends no event for
// it, so it is asked in a loop bounded by 10s.
func waitUnsubscribed(t testing.TB, count func() int64, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	poll := time.NewTicker(5 * time.Millisecond)
	defer poll.Stop()
	for {
		n := count()
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d subscribers %s, want 0", n, what)
		}
		<-poll.C
	}
}

func channelOf(n string) string { return "redisson_lock__channel:{" + n + "}" }

// A waiter sleeps until a release wakes it: rlock's Unlock, a Redisson
// service's unlock, a ForceUnlock. The holder's lease is long, so only a
// message can end the wait.
func TestWaiterWakesOnRelease(t *testing.T) {
	releases := map[string]func(t *testing.T, h *lock.Held, c *lock.Client, n string){
		"rlock unlock": func(t *testing.T, h *lock.Held, _ *lock.Client, _ string) { must(t, h.Unlock(bg())) },
		"force unlock": func(t *testing.T, _ *lock.Held, c *lock.Client, n string) {
			_, err := c.Mutex(n).ForceUnlock(bg())
			must(t, err)
		},
	}
	for what, release := range releases {
		t.Run(what, func(t *testing.T) {
			holder := newClient(t, lock.Config{})
			wc := newWakeCounter()
			waiter := newClient(t, lock.Config{Observer: wc.observer()})
			n := name(t)
			h, err := holder.Mutex(n).Lock(bg())
			must(t, err)
			got := make(chan error, 1)
			go func() {
				h2, err := waiter.Mutex(n).Lock(bg())
				if err == nil {
					err = h2.Unlock(bg())
				}
				got <- err
			}()
			<-wc.waiting
			release(t, h, holder, n)
			must(t, <-got)
			if wc.count(observe.WakeMessage) != 1 || wc.count(observe.WakeTimeout) != 0 {
				t.Fatalf("wake-ups %v, want exactly one by message", wc.byReason)
			}
		})
	}
	t.Run("redisson unlock", func(t *testing.T) {
		rc := raw(t)
		java := newRedisson(t, rc)
		wc := newWakeCounter()
		waiter := newClient(t, lock.Config{Observer: wc.observer()})
		n := name(t)
		if ok, _ := java.lock(n, 1, time.Minute); !ok {
			t.Fatal("stand-in could not lock")
		}
		got := make(chan error, 1)
		go func() {
			h, err := waiter.Mutex(n).Lock(bg())
			if err == nil {
				err = h.Unlock(bg())
			}
			got <- err
		}()
		<-wc.waiting
		if v, err := java.unlock(n, 1, "0123456789abcdef0123456789abcdef").AsInt64(); err != nil || v != 1 {
			t.Fatalf("stand-in unlock = %d, %v", v, err)
		}
		must(t, <-got)
		if wc.count(observe.WakeMessage) != 1 {
			t.Fatalf("wake-ups %v, want one by message", wc.byReason)
		}
	})
}

// 50 waiters in one process form one queue: one contender in Redis at a
// time, one subscription, and every release of this Client hands the lock
// to the next waiter at once.
func TestOneProcessQueuesItsWaiters(t *testing.T) {
	const waiters = 50
	holder := newClient(t, lock.Config{})
	wc := newWakeCounter()
	var attempts atomic.Int64
	obs := wc.observer()
	obs.AcquireEnd = func(ctx context.Context, e observe.AcquireEnd) { attempts.Add(int64(e.Attempts)) }
	c := newClient(t, lock.Config{Observer: obs})
	rc := raw(t)
	n := name(t)
	h, err := holder.Mutex(n).Lock(bg())
	must(t, err)

	var inside, overlaps atomic.Int32
	errs := make(chan error, waiters)
	for i := 0; i < waiters; i++ {
		go func() {
			h, err := c.Mutex(n).Lock(bg())
			if err != nil {
				errs <- err
				return
			}
			if inside.Add(1) != 1 {
				overlaps.Add(1)
			}
			inside.Add(-1)
			errs <- h.Unlock(bg())
		}()
	}
	<-wc.waiting // the head sleeps; the others wait behind it
	if got := numsub(t, rc, channelOf(n)); got != 1 {
		t.Fatalf("PUBSUB NUMSUB = %d, want 1: one subscription for the queue", got)
	}
	must(t, h.Unlock(bg()))
	for i := 0; i < waiters; i++ {
		must(t, <-errs)
	}
	if wc.count(observe.WakeTimeout) != 0 || overlaps.Load() != 0 {
		t.Fatalf("timeouts %d, overlaps %d; want 0, 0", wc.count(observe.WakeTimeout), overlaps.Load())
	}
	// One contender at a time: the head's first attempt, its attempt
	// after subscribing, and one after each wake-up; and each waiter that
	// came while its Client had no queue yet attempted once before it
	// queued (all 50 may have).
	if got := attempts.Load(); got > 5*waiters {
		t.Fatalf("%d attempts for %d waiters: waiters contend beside the head", got, waiters)
	}
	waitUnsubscribed(t, func() int64 { return numsub(t, rc, channelOf(n)) }, "after every waiter left")
}

// Killing the subscription connection wakes every waiter (a message may
// have been lost) and re-subscribes; nobody is stranded.
func TestSubscriptionKilledDoesNotStrandWaiters(t *testing.T) {
	const waiters = 3
	srv := integrationRedis(t)
	rc := raw(t, srv)
	holder := newClient(t, lock.Config{}, srv)
	wc := newWakeCounter()
	c := newClient(t, lock.Config{Observer: wc.observer()}, srv)
	n := name(t)
	h, err := holder.Mutex(n).Lock(bg())
	must(t, err)
	errs := make(chan error, waiters)
	for i := 0; i < waiters; i++ {
		go func() {
			h, err := c.Mutex(n).Lock(bg())
			if err == nil {
				err = h.Unlock(bg())
			}
			errs <- err
		}()
	}
	<-wc.waiting // the queue's head sleeps; the others wait behind it
	if k, err := do(t, rc, "CLIENT", "KILL", "TYPE", "pubsub").AsInt64(); err != nil || k != 1 {
		t.Fatalf("CLIENT KILL TYPE pubsub = %d, %v; want 1", k, err)
	}
	if r := <-wc.woken; r != observe.WakeReconnect {
		t.Fatalf("head woken by %s, want reconnect", r)
	}
	// The head tried again and went back to sleep; wait until the
	// connection has re-subscribed (no event says so: Redis is asked, in
	// a bounded loop), then release.
	<-wc.waiting
	deadline := time.Now().Add(10 * time.Second)
	poll := time.NewTicker(5 * time.Millisecond)
	defer poll.Stop()
	for numsub(t, rc, channelOf(n)) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the subscription was not re-established")
		}
		<-poll.C
	}
	must(t, h.Unlock(bg()))
	for i := 0; i < waiters; i++ {
		must(t, <-errs)
	}
	if wc.count(observe.WakeTimeout) != 0 {
		t.Fatalf("a waiter slept until the lease ran out: %v", wc.byReason)
	}
}

// A waiter on a held lock sends nothing while it waits: the only EVALSHAs
// the server sees are the holder's renewals.
func TestWaiterSendsNothingWhileWaiting(t *testing.T) {
	srv := integrationRedis(t)
	rc := raw(t, srv)
	obs, tk := ticks()
	holder := newClient(t, lock.Config{WatchdogTimeout: 3 * time.Second, RenewInterval: 500 * time.Millisecond, Observer: obs}, srv)
	wc := newWakeCounter()
	c := newClient(t, lock.Config{Observer: wc.observer()}, srv)
	n := name(t)
	h, err := holder.Mutex(n).Lock(bg())
	must(t, err)
	ctx, cancel := context.WithCancel(bg())
	got := make(chan error, 1)
	go func() { _, err := c.Mutex(n).Lock(ctx); got <- err }()
	<-wc.waiting
	nextTick(t, tk)
	before := evalshaCalls(t, rc)
	const n0 = 4
	for i := 0; i < n0; i++ {
		nextTick(t, tk)
	}
	after := evalshaCalls(t, rc)
	// The holder's renewals are the only scripts run meanwhile.
	if after-before != n0 {
		t.Fatalf("%d EVALSHAs while one waiter waited through %d renewals, want %d", after-before, n0, n0)
	}
	cancel()
	if err := <-got; !errors.Is(err, context.Canceled) || !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("cancelled wait = %v, want ErrNotAcquired and context.Canceled", err)
	}
	// Cancelling left no subscription, and nothing but the holder's lock.
	waitUnsubscribed(t, func() int64 { return numsub(t, rc, channelOf(n)) }, "after the wait was cancelled")
	if ks := keys(t, rc, n); len(ks) != 1 || ks[0] != n {
		t.Fatalf("keys %q, want only the holder's lock", ks)
	}
	must(t, h.Unlock(bg()))
}

// TryLock with a wait gives up with ErrNotAcquired when the wait ends.
func TestTryLockWaitEnds(t *testing.T) {
	holder := newClient(t, lock.Config{})
	c := newClient(t, lock.Config{})
	n := name(t)
	h, err := holder.Mutex(n).Lock(bg())
	must(t, err)
	_, err = c.Mutex(n).TryLock(bg(), lock.Wait(100*time.Millisecond))
	if !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("TryLock = %v, want ErrNotAcquired", err)
	}
	ctx, cancel := context.WithTimeout(bg(), 100*time.Millisecond)
	defer cancel()
	_, err = c.Mutex(n).Lock(ctx)
	if !errors.Is(err, lock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock past its deadline = %v, want ErrNotAcquired and DeadlineExceeded", err)
	}
	must(t, h.Unlock(bg()))
}

// A Lock that finds the lock held attempts once before it queues (alone:
// its Client had no queue for the name), and that attempt counts as the
// queue head's first: it then subscribes, attempts once more (a release
// may have come before the subscription) and sleeps, and one attempt
// after the release's message takes the lock: three attempts in all, as
// when every attempt was made in the queue. An uncontended Lock makes
// one.
func TestLockAttemptsOnceBeforeItQueues(t *testing.T) {
	holder := newClient(t, lock.Config{})
	wc := newWakeCounter()
	attempts := make(chan int, 2)
	obs := wc.observer()
	obs.AcquireEnd = func(_ context.Context, e observe.AcquireEnd) { attempts <- e.Attempts }
	c := newClient(t, lock.Config{Observer: obs})
	n := name(t)

	h, err := c.Mutex(n).Lock(bg())
	must(t, err)
	if got := <-attempts; got != 1 {
		t.Errorf("an uncontended Lock made %d attempts, want 1", got)
	}
	must(t, h.Unlock(bg()))

	hh, err := holder.Mutex(n).Lock(bg())
	must(t, err)
	got := make(chan error, 1)
	go func() {
		h, err := c.Mutex(n).Lock(bg())
		if err == nil {
			err = h.Unlock(bg())
		}
		got <- err
	}()
	<-wc.waiting // asleep after its attempts
	must(t, hh.Unlock(bg()))
	must(t, <-got)
	if n := <-attempts; n != 3 {
		t.Errorf("a Lock that waited for one release made %d attempts, want 3 (alone, after subscribing, after the wake-up); wake-ups %v", n, wc.byReason)
	}
}

// Two names whose releases are announced on one channel ("x" and "{x}",
// Redisson's channel wraps a name in braces unless it is already so
// wrapped) wait apart in one Client: a release of one lets its waiter
// in while the other stays held. Until 2026-12-01 both waited in one
// queue (keyed by the channel) whose head alone attempted, so a waiter
// of a freed "x" queued behind a waiter of a held "{x}" waited until
// "{x}" was granted: for as long as its holder kept it.
func TestNamesSharingAChannelWaitApart(t *testing.T) {
	holder := newClient(t, lock.Config{})
	wc := newWakeCounter()
	c := newClient(t, lock.Config{Observer: wc.observer()})
	rc := raw(t)
	x := name(t)
	wrapped := "{" + x + "}"
	hx, err := holder.Mutex(x).Lock(bg())
	must(t, err)
	hw, err := holder.Mutex(wrapped).Lock(bg())
	must(t, err)

	ctx, cancel := context.WithTimeout(bg(), 30*time.Second)
	defer cancel()
	type got struct {
		name string
		err  error
	}
	acquired := make(chan got, 2)
	waitFor := func(n string) {
		h, err := c.Mutex(n).Lock(ctx)
		if err == nil {
			err = h.Unlock(bg())
		}
		acquired <- got{n, err}
	}
	go waitFor(wrapped)
	<-wc.waiting // the waiter of "{x}" sleeps
	go waitFor(x)
	select {
	case <-wc.waiting: // the waiter of "x" sleeps on its own
	case <-time.After(5 * time.Second):
		t.Logf("the waiter of %q did not start waiting on its own within 5s", x)
	}
	if got := numsub(t, rc, channelOf(x)); got != 1 {
		t.Errorf("PUBSUB NUMSUB %s = %d, want 1: the Client's one subscription", channelOf(x), got)
	}

	must(t, hx.Unlock(bg())) // "x" is free; "{x}" stays held
	select {
	case g := <-acquired:
		if g.name != x || g.err != nil {
			t.Fatalf("first acquisition: %q, %v; want %q, nil", g.name, g.err, x)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the waiter of the freed %q was not granted it within 10s while %q stayed held", x, wrapped)
	}
	must(t, hw.Unlock(bg()))
	if g := <-acquired; g.name != wrapped || g.err != nil {
		t.Fatalf("second acquisition: %q, %v; want %q, nil", g.name, g.err, wrapped)
	}
}
