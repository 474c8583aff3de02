package pubsub

import (
	"context"

	"github.com/redis/rueidis"
)

// Waiter is one waiting call's place on a channel.
type Waiter struct {
	h    *Hub
	name string
	c    chan Reason // at most one pending wake-up
}

// C receives a Reason each time the waiter is woken. At most one wake-up
// is pending at a time.
func (w *Waiter) C() <-chan Reason { return w.c }

// signal leaves a wake-up for w; false when one was already pending.
func (w *Waiter) signal(r Reason) bool {
	select {
	case w.c <- r:
		return true
	default:
		return false
	}
}

// Close leaves the channel. A message wake-up that w had not consumed is
// handed to another waiter of the channel; when w was the last waiter, the
// connection unsubscribes from the channel. Close is idempotent.
func (w *Waiter) Close() {
	h := w.h
	h.mu.Lock()
	ch, removed := h.removeWaiterLocked(w)
	if !removed {
		h.mu.Unlock()
		return
	}
	select {
	case r := <-w.c:
		if r == Message && ch != nil {
			wakeOneLocked(ch)
		}
	default:
	}
	last := ch == nil
	h.mu.Unlock()
	if last {
		h.unsubscribe(w.name)
	}
}

// removeWaiterLocked removes w; it returns the channel when waiters
// remain on it, nil when w was the last (the channel is then forgotten).
func (h *Hub) removeWaiterLocked(w *Waiter) (remaining *channel, removed bool) {
	ch := h.channels[w.name]
	if ch == nil {
		return nil, false
	}
	for i, x := range ch.waiters {
		if x == w {
			ch.waiters = append(ch.waiters[:i], ch.waiters[i+1:]...)
			removed = true
			break
		}
	}
	if !removed {
		return nil, false
	}
	if len(ch.waiters) == 0 {
		delete(h.channels, w.name)
		return nil, true
	}
	return ch, true
}

// unsubscribe drops the subscription of a channel that has no waiters
// left, unless a new waiter has come for it meanwhile.
func (h *Hub) unsubscribe(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), h.opts.UnsubscribeTimeout)
	defer cancel()
	if h.lockSub(ctx) != nil {
		// Closed, or the connection is busy reconnecting: a reconnect
		// subscribes only channels that still have waiters.
		return
	}
	defer h.unlockSub()
	h.mu.Lock()
	_, back := h.channels[name]
	conn := h.conn
	h.mu.Unlock()
	if back || conn == nil {
		return
	}
	var cmd rueidis.Completed
	if h.opts.Sharded {
		cmd = conn.B().Sunsubscribe().Channel(name).Build()
	} else {
		cmd = conn.B().Unsubscribe().Channel(name).Build()
	}
	_ = conn.Do(ctx, cmd).Error() // a failure breaks the connection, and a reconnect forgets the channel
}
