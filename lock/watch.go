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
		return nil, masterErr(c.errAt(m.name), "subscribe", err)
	}
	return &Watch{w: w}, nil
}

// C receives a value each time the watch is woken; at most one is pending.
// A nil or zero Watch's C never receives.
func (w *Watch) C() <-chan pubsub.Reason {
	if w == nil || w.w == nil {
		return nil
	}
	return w.w.C()
}

// Close leaves the waiters; an unconsumed wake-up passes to another.
func (w *Watch) Close() {
	if w == nil || w.w == nil {
		return
	}
	w.w.Close()
}

// Pass hands a wake-up taken from C, and not used by an attempt that got
// an answer, to another waiter of the lock's channel on this Client
// (pubsub.Waiter.Pass); never to w itself.
func (w *Watch) Pass() {
	if w == nil || w.w == nil {
		return
	}
	w.w.Pass()
}
