package lock

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/observe"
	"github.com/rlock-go/rlock/watchdog"
)

// Review of 78ef6b6 (issue 29 stage 2), finding 1: a waiter that is
// handed the turn as its own wait ends (take's error path) passes it on
// with passLocked, without applying a loss judged meanwhile. When that
// loss's lossJudged found the turn busy (it was being handed over), nobody
// applies it: the turn is free, the lost generation stays on the hold
// (helds, g, keep) and the hold stays in the Client's map until the next
// call on the same (name, owner), which may never come.
//
// The interleaving is driven by hand: the test holds the turn (a long
// Unlock, a settler), a Lock of the same owner waits for it, and the
// holder's give checks for a loss under tmu (none yet) and hands the turn
// to the waiter; the watchdog's lossJudged runs then and finds the turn
// busy; the waiter's ctx has ended, so it passes the turn on and frees it.
func TestReviewLossLostByAWaiterPassingTheTurn(t *testing.T) {
	c := internalClient(t)
	ctx := context.Background()
	m := c.Mutex("review3:pass")
	h, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l, g := h.l, h.g
	if !l.tryTake() { // the holder H (a long Unlock, a settler)
		t.Fatal("the turn of an idle hold is busy")
	}

	// W: a call of the same field waiting for the turn (attempt's take).
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	l.use()
	werr := make(chan error, 1)
	go func() {
		err := l.take(wctx, nil, nil)
		l.unuse() // before the answer: the checks below read the Client's map, which unuse updates
		werr <- err
	}()
	waitFor(t, 5*time.Second, "W waits for the turn", func() bool {
		l.tmu.Lock()
		defer l.tmu.Unlock()
		return l.waiters == 1
	})
	time.Sleep(20 * time.Millisecond) // W parked in take's select

	// H's give: current (no loss yet), then tmu and the check (no loss).
	l.current()
	l.tmu.Lock()
	if l.g.Load().lossErr() != nil {
		t.Fatal("a loss before it was judged")
	}
	// The watchdog judges the loss now: it ends the Helds, then tries
	// the turn (it blocks on tmu, held by H's give).
	lj := make(chan struct{})
	go func() {
		defer close(lj)
		l.lossJudged(g, &watchdog.LossError{Name: l.name, Kind: observe.LossLeaseExpired, Reason: "review: judged as the turn is handed over"})
	}()
	waitFor(t, 5*time.Second, "the loss ended the generation", func() bool { return g.cause() != nil })
	time.Sleep(20 * time.Millisecond) // lossJudged parked on tmu (tryTake)
	wcancel()                         // W's wait ends: it queues on tmu behind lossJudged
	time.Sleep(20 * time.Millisecond)
	l.passLocked() // H hands the turn to W (waiters is still 1)
	l.tmu.Unlock()

	<-lj
	if err := <-werr; err == nil {
		t.Skip("W took the turn (its select chose the hand-over): this run did not reach the interleaving")
	}
	l.tmu.Lock()
	busy := l.busy
	l.tmu.Unlock()
	if busy {
		t.Fatal("the turn is still busy: this run did not reach the interleaving")
	}
	// Nobody holds the turn now. The lost generation must have been applied.
	c.mu.Lock()
	_, inMap := c.index[key(l.name, l.field)]
	c.mu.Unlock()
	if l.g.Load() != nil || inMap {
		t.Errorf("turn free, loss judged, yet not applied: generation %v (lost %v), %d helds, keep %v, hold in the Client's map %v",
			l.g.Load() != nil, l.g.Load().lossErr() != nil, len(l.helds), l.keep.Load(), inMap)
	}
	// The Held's Unlock does not take the turn (it has ended): it does
	// not apply it either.
	if err := h.Unlock(ctx); !errors.Is(err, ErrLockLost) {
		t.Fatalf("Unlock of the lost Held = %v, want ErrLockLost", err)
	}
	c.mu.Lock()
	_, inMap = c.index[key(l.name, l.field)]
	c.mu.Unlock()
	if inMap {
		t.Errorf("after the lost Held's Unlock the hold is still in the Client's map (a leak per such loss until the same name and owner is used again)")
	}
}

// lossSteps are lossJudged's two writes, in the order of 78ef6b6 (end,
// then why: the review's window) or of its fix (why, then end), for the
// tests to do apart, as a watchdog goroutine preempted between them would.
func lossSteps(_ *testing.T, g *gen, lost *LostError) map[string][2]func() {
	return map[string][2]func(){
		"end first": {func() { g.end.CompareAndSwap(nil, lost) }, func() { g.stop(lost) }},
		"why first": {func() { g.stop(lost) }, func() { g.end.CompareAndSwap(nil, lost) }},
	}
}

// bothOrders runs test with each order of lossJudged's two writes.
func bothOrders(t *testing.T, test func(t *testing.T, order string)) {
	for _, order := range []string{"end first", "why first"} {
		t.Run(order, func(t *testing.T) { test(t, order) })
	}
}

// Review finding 2: lossJudged sets its generation's end (which current
// reads) before its why (which a Held's ended reads, and born checks).
// Between the two, a turn holder's current applies the loss and a new
// generation of the same field may be born; an Unlock of a Held of the
// lost generation then finds it not ended, and releases the field's hold,
// which is the new generation's. Its Unlock returns nil; the new Held is
// then declared lost only after its hold was already released in Redis.
//
// The window is reproduced by doing lossJudged's first step (the end's
// compare-and-swap) and its second (stop) apart, as a preempted watchdog
// goroutine would.
func TestReviewStaleHeldReleasesTheNextGeneration(t *testing.T) {
	bothOrders(t, testReviewStaleHeldReleasesTheNextGenerationIn)
}

func testReviewStaleHeldReleasesTheNextGenerationIn(t *testing.T, order string) {
	c := internalClient(t)
	ctx := context.Background()
	m := c.Mutex("review3:stale")
	h1, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	octx := h1.Context() // carries the owner; a child of g1's context
	g1 := h1.g
	lost := &LostError{Name: h1.l.name, Kind: observe.LossLeaseExpired, Reason: "review: judged"}
	steps := lossSteps(t, g1, lost)[order]
	steps[0]() // lossJudged, step 1 (the watchdog goroutine is then preempted)
	// The same owner locks again (another goroutine): its turn's current
	// applies the loss, and a new generation is born from the hold Redis
	// still counts.
	h2, err := m.Lock(context.WithoutCancel(octx)) // the owner, not the lost Held's end
	if err != nil {
		t.Fatalf("Lock in the window: %v", err)
	}
	if h2.g == g1 {
		t.Fatal("h2 joined the lost generation")
	}
	// The lost generation's Held is unlocked in the window.
	uerr := h1.Unlock(ctx)
	steps[1]() // lossJudged, step 2

	if !errors.Is(uerr, ErrLockLost) {
		t.Errorf("Unlock of a Held whose generation's loss was judged = %v, want ErrLockLost", uerr)
	}
	if cause := context.Cause(h2.Context()); cause != nil {
		t.Errorf("the new generation's Held, which nobody unlocked, has ended: %v (its hold was released by the lost Held's Unlock)", cause)
	}
	if n, _ := c.rc.Do(ctx, c.rc.B().Exists().Key("review3:stale").Build()).AsInt64(); n == 0 {
		t.Errorf("the lock key is gone while h2 was returned live and never unlocked")
	}
	_ = h2.Unlock(ctx)
	runtime.KeepAlive(h1)
}

// Review finding 2, with Close: the loss's end is set, Close's stop
// comes before the loss's own stop. Close reports the loss (closeHold
// reads end), the observer was told of it, but the Held's Unlock and its
// context's cause say ErrClosed: "a loss judged first keeps its cause"
// (docs/design.md) does not hold in this window.
func TestReviewCloseBetweenALossTwoSteps(t *testing.T) {
	bothOrders(t, testReviewCloseBetweenALossTwoStepsIn)
}

func testReviewCloseBetweenALossTwoStepsIn(t *testing.T, order string) {
	srv := integration.Redis(t, integration.Options{})
	c, err := New(context.Background(), Config{Addrs: []string{srv.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	h, err := c.Mutex("review3:close").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hctx := h.Context()
	g := h.g
	lost := &LostError{Name: h.l.name, Kind: observe.LossLeaseExpired, Reason: "review: judged"}
	steps := lossSteps(t, g, lost)[order]
	steps[0]() // lossJudged, step 1
	cerr := c.Close(ctx)
	steps[1]() // lossJudged, step 2
	uerr := h.Unlock(ctx)
	t.Logf("Close: %v; Unlock: %v; context cause: %v", cerr, uerr, context.Cause(hctx))
	if errors.Is(cerr, ErrLockLost) && !errors.Is(context.Cause(hctx), ErrLockLost) {
		t.Errorf("Close says the lock was lost, the Held's context says %v", context.Cause(hctx))
	}
}

// Checked sound: a Held's context made while its generation is stopped
// (by a loss) always ends, with the loss as its cause; children made
// with context.WithCancel end synchronously with it; the Lock context's
// values are kept, its deadline is not.
func TestReviewHeldContextUnderConcurrentLoss(t *testing.T) {
	c := internalClient(t)
	type k struct{}
	for i := range 200 {
		lctx, cancel := context.WithTimeout(context.WithValue(context.Background(), k{}, i), time.Minute)
		m := c.Mutex("review3:ctx")
		hs := make([]*Held, 0, 4)
		h, err := m.Lock(lctx)
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
		for range 3 {
			h2, err := m.Lock(h.Context())
			if err != nil {
				t.Fatal(err)
			}
			hs = append(hs, h2)
		}
		start := make(chan struct{})
		ctxs := make(chan context.Context, len(hs)*2)
		done := make(chan struct{})
		for _, x := range hs {
			go func() {
				<-start
				cx := x.Context()
				ctxs <- cx
				child, ccancel := context.WithCancel(cx)
				defer ccancel()
				ctxs <- child
				done <- struct{}{}
			}()
		}
		close(start)
		h.l.loseAll(observe.LossNotHeld, "review")
		for range hs {
			<-done
		}
		close(ctxs)
		for cx := range ctxs {
			select {
			case <-cx.Done():
			default:
				t.Fatalf("round %d: a Held's context (or its child) is live after the loss returned", i)
			}
			var le *LostError
			if !errors.As(context.Cause(cx), &le) {
				t.Fatalf("round %d: cause %v, want a *LostError", i, context.Cause(cx))
			}
			if cx.Value(k{}) != i {
				t.Fatalf("round %d: the Lock context's value is lost", i)
			}
			if _, ok := cx.Deadline(); ok {
				t.Fatalf("round %d: the Held's context has the Lock context's deadline", i)
			}
		}
		for _, x := range hs {
			if err := x.Unlock(context.Background()); !errors.Is(err, ErrLockLost) {
				t.Fatalf("round %d: Unlock after the loss = %v", i, err)
			}
		}
		cancel()
		_, _ = m.ForceUnlock(context.Background())
	}
	c.mu.Lock()
	n := len(c.index)
	c.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d holds left in the map", n)
	}
}

// Review finding 2, the money case: the lease ran out and another Client
// took the lock; the watchdog's lossJudged has set the generation's end
// but not yet its why. An Unlock then applies the loss (current), sends
// its release, which Redis answers "not held", and returns nil: the
// holder is told its hold ended normally.
func TestReviewUnlockOfALostHoldReturnsNilInTheWindow(t *testing.T) {
	bothOrders(t, testReviewUnlockOfALostHoldReturnsNilInTheWindowIn)
}

func testReviewUnlockOfALostHoldReturnsNilInTheWindowIn(t *testing.T, order string) {
	c := internalClient(t)
	c2, err := New(context.Background(), Config{Addrs: []string{c.addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c2.Close(context.Background()) }()
	ctx := context.Background()
	const n = "review3:window"
	h, err := c.Mutex(n).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	g := h.g
	// The lease ran out (here: the key is deleted), another Client takes it.
	if err := c.rc.Do(ctx, c.rc.B().Del().Key(n).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	other, err := c2.Mutex(n).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lost := &LostError{Name: n, Kind: observe.LossLeaseExpired, Reason: "review: judged"}
	steps := lossSteps(t, g, lost)[order]
	steps[0]() // lossJudged, step 1
	uerr := h.Unlock(ctx)
	steps[1]() // lossJudged, step 2
	if uerr == nil {
		t.Errorf("Unlock of a hold whose lease ran out, while another Client holds the lock, returned nil")
	}
	_ = other.Unlock(ctx)
}
