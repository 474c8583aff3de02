package lock

import (
	"context"

	"github.com/rlock-go/rlock/pubsub"
	"github.com/rlock-go/rlock/reentrant"
)

// Watch is a place among the waiters of one lock name on this Client's
// subscription: C receives when a release of the lock wakes it (one
// waiter per release), or when the subscription reconnected. Package
// multilock waits on the Watches of all its masters at once. Close it
// when done.
type Watch struct {
	w *pubsub.Waiter
}

// Watch subscribes to the lock's unlock channel and returns once the
// subscription is confirmed: every release after that wakes a Watch.
//
// May return ErrClosed, ErrUnavailable, ErrInvalid.
func (m *Mutex) Watch(ctx context.Context) (*Watch, error) {
	if err := m.check(ctx); err != nil {
		return nil, err
	}
	c := m.c
	if err := c.enter(); err != nil {
		return nil, err
	}
	defer c.exit()
	w, err := c.hub.Subscribe(ctx, reentrant.ChannelName(m.name))
	if err != nil {
		return nil, masterErr(c.addr, "subscribe", err)
	}
	return &Watch{w: w}, nil
}

// C receives a value each time the watch is woken; at most one is pending.
func (w *Watch) C() <-chan pubsub.Reason { return w.w.C() }

// Close leaves the waiters; an unconsumed wake-up passes to another.
func (w *Watch) Close() { w.w.Close() }
