package pubsub

import "sync"

// Waiter is one waiting call's place on a channel.
//
// A waiting call uses it so: Subscribe, then attempt; after each attempt
// that finds the lock held, wait on C (and the lock's TTL); after each
// wake-up, attempt again. It calls Pass when it took a wake-up from C and
// then leaves, or gives up, without the attempt that wake-up asked for;
// and Close when it leaves, in every case.
type Waiter struct {
	name string
	c    chan Reason // at most one pending wake-up

	// mu guards h and closed: a Waiter of a Shards moves to another Hub
	// when its channel's slot moves. It is taken before the Hub's mu.
	mu     sync.Mutex
	h      *Hub
	closed bool

	// all: an observer (Hub.Observe), woken by every message and taking
	// no wake-up from the channel's other waiters. Set before the Waiter
	// joins its channel; never changed.
	all bool
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

// Pass hands a wake-up to another waiter of the channel: the
// longest-waiting one that has none pending. It wakes nobody when no other
// waiter is left, and never w itself.
//
// Call it when the caller received from C and will not make the attempt
// that wake-up asked for, which is when it returns without having sent an
// attempt to Redis that got an answer since that wake-up: its ctx ended
// (in the sleep's select racing the wake-up, or before the attempt was
// sent), the Client was closed, or the attempt failed on the network
// (ErrUnavailable, a timeout). The release that sent the wake-up may have
// freed the lock, and w was the one waiter told so. Do not call it after
// an attempt that got an answer (acquired, or found the lock held): that
// attempt used the wake-up. Calling it when in doubt costs another waiter
// one attempt; not calling it can leave that waiter asleep on a free lock
// until the holder's lease would have ended.
//
// Pass may be called before or after Close; a wake-up still pending on C
// is handed on by Close without Pass.
func (w *Waiter) Pass() {
	w.mu.Lock()
	h := w.h
	h.mu.Lock()
	w.mu.Unlock()
	defer h.mu.Unlock()
	if ch := h.channels[w.name]; ch != nil && !w.all {
		wakeOneLocked(ch, w)
	}
}

// Close leaves the channel. A message wake-up that w had not consumed is
// handed to another waiter of the channel; when w was the last waiter, the
// Hub unsubscribes from the channel in the background: Close does no I/O.
// Close is idempotent.
func (w *Waiter) Close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	h := w.h
	h.mu.Lock()
	defer h.mu.Unlock()
	ch, removed := h.removeWaiterLocked(w)
	if !removed {
		return
	}
	select {
	case r := <-w.c:
		if r == Message && ch != nil && !w.all {
			wakeOneLocked(ch, nil)
		}
	default:
	}
	if ch == nil {
		h.dirtyLocked(w.name)
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

// channelNames lists the channels with waiters.
func (h *Hub) channelNames() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	names := make([]string, 0, len(h.channels))
	for n := range h.channels {
		names = append(names, n)
	}
	return names
}

// take removes the channel name with its waiters, which go to another
// Hub (see Shards.rehome); the background goroutine unsubscribes it if
// the connection carries it.
func (h *Hub) take(name string) []*Waiter {
	h.mu.Lock()
	defer h.mu.Unlock()
	ch := h.channels[name]
	if ch == nil {
		return nil
	}
	delete(h.channels, name)
	h.dirtyLocked(name)
	return ch.waiters
}

// adopt adds ws, waiters of the channel name that come from another Hub
// (their slot moved here), and has the background goroutine subscribe the
// channel; once the server confirms, every waiter is woken with Reconnect.
// With subscribe false they are only added (and woken at once): nothing
// is tried for them until the next re-subscription. It returns false when
// the Hub is closed; then nothing is done.
func (h *Hub) adopt(name string, ws []*Waiter, subscribe bool) bool {
	h.mu.Lock()
	closed := h.closed
	h.mu.Unlock()
	if closed {
		return false
	}
	for _, w := range ws {
		w.mu.Lock()
		if !w.closed {
			h.mu.Lock()
			ch := h.channels[name]
			if ch == nil {
				ch = &channel{name: name}
				h.channels[name] = ch
			}
			ch.waiters = append(ch.waiters, w)
			ch.subscribed = false
			w.h = h
			if !subscribe {
				w.signal(Reconnect)
			}
			h.mu.Unlock()
		}
		w.mu.Unlock()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.channels[name] != nil && subscribe {
		h.dirtyLocked(name)
	}
	return true
}
