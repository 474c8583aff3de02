package multilock

import (
	"context"
	"reflect"
	"sync"
	"time"

	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/pubsub"
)

// Waiting between rounds.
//
// A call that must retry subscribes to every master's unlock channel
// (lock.Mutex.Watch, over the subscription connection each Client already
// has) once, after its first failed round and before its second, so that
// no release after that round goes unnoticed. It then sleeps after each
// failed round until whichever comes first:
//
//   - an unlock message (or a reconnect of the subscription) on any
//     master: a holder released somewhere, so the quorum may be in reach;
//   - when holders of other owners refused on so many masters that the
//     quorum was out of reach, the longest of their remaining leases: a
//     holder that died without releasing is gone by then;
//   - otherwise (a split vote between contenders, masters that failed or
//     were slow, a round whose validity ran out) a random delay,
//     exponential from 20ms to 1s with ±50% jitter, so that contenders
//     that collided do not collide again;
//   - the end of ctx or of TryLock's wait.
//
// It never polls a lock that is held: only a message or the holder's
// lease ends that sleep.

// watches are a call's places among the waiters of the masters' unlock
// channels; a master whose subscription failed has none (its releases
// then end no sleep, the timers still do).
type watches struct {
	l      *Lock
	mu     sync.Mutex
	ws     []*lock.Watch
	closed bool
}

// watch subscribes on every master in parallel and waits up to timeout. A
// subscription still under way then (the first one of a Client connects,
// and a stopped master makes that last until the dial gives up) goes on
// in the background and joins the later sleeps when it succeeds.
func (l *Lock) watch(ctx context.Context, timeout time.Duration) *watches {
	w := &watches{l: l, ws: make([]*lock.Watch, len(l.ms))}
	done := make(chan struct{}, len(l.ms))
	sctx := context.WithoutCancel(ctx)
	for i, m := range l.ms {
		l.bg.Add(1)
		go func() {
			defer l.bg.Done()
			defer func() { done <- struct{}{} }()
			wctx, cancel := context.WithTimeout(sctx, timeout)
			defer cancel()
			x, err := m.Watch(wctx)
			if err != nil {
				return
			}
			w.mu.Lock()
			defer w.mu.Unlock()
			if w.closed {
				x.Close()
				return
			}
			w.ws[i] = x
		}()
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	for range l.ms {
		select {
		case <-done:
		case <-t.C:
			return w
		case <-ctx.Done():
			return w
		}
	}
	return w
}

// close leaves every channel; an unconsumed wake-up passes to another
// waiter of this process. The UNSUBSCRIBEs go out in the background, in
// parallel: one to a stopped master waits for its timeout, and the call
// that is returning must not wait for it.
func (w *watches) close() {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.closed = true
	ws := w.ws
	w.mu.Unlock()
	for _, x := range ws {
		if x != nil {
			w.l.bg.Add(1)
			go func() {
				defer w.l.bg.Done()
				x.Close()
			}()
		}
	}
}

// current returns the watches subscribed so far.
func (w *watches) current() []*lock.Watch {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]*lock.Watch(nil), w.ws...)
}

// drain drops a pending wake-up of the masters where the call just
// released its own grants: most likely the message of that release.
// (Best effort: the message may come later, and then ends the next sleep
// early; the next round is then one unneeded attempt.)
func (w *watches) drain(masters []int) {
	ws := w.current()
	for _, i := range masters {
		if x := ws[i]; x != nil {
			select {
			case <-x.C():
			default:
			}
		}
	}
}

// settleMax bounds how long a woken call waits for the unlock messages of
// the other masters a holder is releasing (in parallel, so they come
// within about a round trip of each other) before its next round.
const settleMax = 5 * time.Millisecond

// sleep waits up to d for a wake-up of any master. reason says what the
// end of d means. After the first unlock message it keeps listening, for
// at most settleMax, until messages came from need distinct masters: a
// holder releases on every master, and a round started after the first
// message alone would mostly find the others still held. It returns ctx's
// error when ctx ended first.
func (w *watches) sleep(ctx context.Context, o *options, d time.Duration, reason lock.WakeReason, need int) error {
	t := time.NewTimer(d)
	defer t.Stop()
	ws := w.current()
	cases := make([]reflect.SelectCase, 2, 2+len(ws))
	cases[0] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())}
	cases[1] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(t.C)}
	idx := make([]int, 0, len(ws))
	for i, x := range ws {
		if x != nil {
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(x.C())})
			idx = append(idx, i)
		}
	}
	start := time.Now()
	e := WakeUp{Reason: reason}
	woken := 0
	for {
		chosen, v, _ := reflect.Select(cases)
		if chosen == 0 {
			return ctx.Err()
		}
		if chosen == 1 {
			break // d ran out, or the settling after a message did
		}
		if woken == 0 {
			i := idx[chosen-2]
			e.Addr = w.l.addrs[i]
			e.Reason = lock.WakeMessage
			if r, _ := v.Interface().(pubsub.Reason); r == pubsub.Reconnect {
				e.Reason = lock.WakeReconnect
			}
		}
		woken++
		cases[chosen].Chan = reflect.Value{} // one wake-up per master
		if woken >= need || e.Reason == lock.WakeReconnect {
			break
		}
		if woken == 1 {
			t.Reset(min(settleMax, max(d-time.Since(start), 0)))
		}
	}
	e.Slept = time.Since(start)
	if o.obs != nil && o.obs.WakeUp != nil {
		o.obs.WakeUp(ctx, e)
	}
	return nil
}
