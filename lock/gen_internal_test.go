package lock

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/observe"
	"github.com/rlock-go/rlock/watchdog"
)

// A loss judged while another call holds the hold's turn (a long Unlock,
// a settler) ends every Held at once, through their generation's context,
// without the turn; the hold's own state (helds, the entry) follows when
// the turn is given back, and the hold then leaves the Client's map. The
// loss is judged here by a force unlock's path (loseAll, which the
// watchdog's judgement shares), with the turn taken by the test.
func TestLossWhileTheTurnIsHeldEndsHeldsAtOnce(t *testing.T) {
	c := internalClient(t)
	ctx := context.Background()
	m := c.Mutex("gen:turn")
	h, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h2, err := m.Lock(h.Context()) // a re-entry: one generation, two Helds
	if err != nil {
		t.Fatal(err)
	}
	ctx1 := h.Context() // made before the loss; h2's is made after
	l := h.l
	l.use()
	if !l.tryTake() {
		t.Fatal("the turn of an idle hold is busy")
	}
	l.loseAll(observe.LossNotHeld, "test: judged while the turn is held")

	if !errors.Is(context.Cause(ctx1), ErrLockLost) {
		t.Fatalf("a Held's context after a loss judged while the turn was held: cause %v, want ErrLockLost", context.Cause(ctx1))
	}
	if !errors.Is(context.Cause(h2.Context()), ErrLockLost) {
		t.Fatalf("a context made after the loss: cause %v, want ErrLockLost", context.Cause(h2.Context()))
	}
	if done, err := h2.ended(); !done || !errors.Is(err, ErrLockLost) {
		t.Fatalf("h2.ended() = %v, %v; want true, ErrLockLost", done, err)
	}
	if len(l.helds) != 2 || l.g.Load() == nil {
		t.Fatalf("the hold's state changed without its turn: %d helds, generation %v", len(l.helds), l.g.Load() != nil)
	}
	l.give() // applies the loss
	if len(l.helds) != 0 || l.g.Load() != nil || l.keep.Load() {
		t.Fatalf("after the turn was given back: %d helds, generation %v, keep %v; want none", len(l.helds), l.g.Load() != nil, l.keep.Load())
	}
	l.unuse()
	c.mu.Lock()
	n := len(c.index)
	c.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d holds left in the Client's map after the loss was applied", n)
	}
	if err := h.Unlock(ctx); !errors.Is(err, ErrLockLost) {
		t.Fatalf("Unlock of a lost Held = %v, want ErrLockLost", err)
	}
}

// internalClient is a Client of a redis-server of the test's own, closed
// when the test ends.
func internalClient(t *testing.T) *Client {
	t.Helper()
	srv := integration.Redis(t, integration.Options{})
	c, err := New(context.Background(), Config{Addrs: []string{srv.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// Two judgements of one loss at once (the watchdog's, and loseAll's after
// wd.Lose found the entry gone) report it to the Observer once: the one
// that ended the Helds does. Here the first has ended them (stop) and not
// yet recorded the loss when the second runs whole; before, the second
// reported it too (and the first then did).
func TestOneLossIsReportedOnce(t *testing.T) {
	srv := integration.Redis(t, integration.Options{})
	var reports atomic.Int32
	obs := &observe.Observer{Loss: func(context.Context, observe.Loss) { reports.Add(1) }}
	c, err := New(context.Background(), Config{Addrs: []string{srv.Addr()}, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	h, err := c.Mutex("gen:report").Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	g := h.g
	first := &LostError{Name: "gen:report", Kind: observe.LossLeaseExpired, Reason: "test: the first judgement"}
	g.stop(first) // the first judgement's first step
	h.l.lossJudged(g, &watchdog.LossError{Name: "gen:report", Kind: observe.LossNotHeld, Reason: "test: the second"})
	if n := reports.Load(); n != 0 {
		t.Fatalf("the second judgement of a loss whose Helds the first had ended reported it: %d reports", n)
	}
	if err := h.Unlock(context.Background()); !errors.Is(err, ErrLockLost) {
		t.Fatalf("Unlock = %v, want ErrLockLost", err)
	}
}
