package lock

import (
	"context"
	"errors"
	"testing"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/observe"
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
