package multilock

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/observe"
	"github.com/rlock-go/rlock/pubsub"
)

// Waiting between rounds.
//
// A call that must retry subscribes to every master's unlock channel
// (lock.Mutex.Watch, over the subscription connection each Client already
// has) once, after its first failed round and before its second, so that
// no release after that round goes unnoticed. A queued call uses its
// queue's subscription, opened by the first head that needs it and kept
// until the queue empties (queue.go). After each failed round the call
// sleeps until:
//
//   - when holders of other owners refused on so many masters that the
//     quorum was out of reach ("busy"): unlock messages from enough of
//     the masters that refused — as many as must be freed for the quorum
//     to be in reach —, a reconnect of one of their subscriptions (a
//     message may have been lost), a release by this process, or the end
//     of the leases it saw on those masters (a holder that died without
//     releasing is gone by then). Messages of the other masters, those
//     it could take anyway (other contenders giving back what a failed
//     round took), do not end the sleep: it never runs rounds in a loop
//     against a holder;
//   - otherwise (masters that failed or were slow, a round whose validity
//     ran out) a random delay, exponential from 20ms to 1s with ±50%
//     jitter, or a release by this process;
//   - the end of ctx or of TryLock's wait.
//
// When a round started by unlock messages fails again although the call
// got some masters, it collided with other contenders woken by the same
// releases (and when nobody reached the quorum, a split vote): its next
// round after a wake-up by messages then waits a random delay first, from
// 20ms and growing while the collisions repeat, so that contenders woken
// together do not collide again.
//
// The call's waiters watch beside the Client's own waiters of the name
// (pubsub.Hub.Observe, through lockcore's Watch): every release wakes
// them, and they take no wake-up a plain lock's waiter, or another
// multi-master lock's queue, of this process needs, so nothing is passed
// on when the call leaves.

// watches are places among the waiters of the masters' unlock channels,
// in the lock's canonical order of masters (queue.go); a master whose
// subscription has not succeeded (yet) has none: its releases end no
// sleep, the timers still do.
type watches struct {
	l      *Lock
	mu     sync.Mutex
	ws     []*pubsub.Waiter
	closed bool
	// ready is set once watch returned; a subscription that succeeds
	// after that signals late: a release before it went unheard, so the
	// sleeping call runs a round.
	ready  bool
	late   chan struct{}
	cancel context.CancelFunc // ends the subscriptions still under way
}

// subscribeTimeout bounds one attempt to subscribe on a master in the
// background, after watch stopped waiting for it; failed attempts are
// retried after a delay, until the watches are closed.
const subscribeTimeout = 2 * time.Second

// watch subscribes on every master in parallel and waits up to timeout. A
// subscription still under way then (the first one of a Client connects,
// and a stopped master makes that last until the dial gives up) goes on
// in the background, retried until it succeeds or the watches are
// closed, and joins the later sleeps when it succeeds.
func (l *Lock) watch(ctx context.Context, timeout time.Duration) *watches {
	bctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w := &watches{l: l, ws: make([]*pubsub.Waiter, len(l.cms)), late: make(chan struct{}, 1), cancel: cancel}
	done := make(chan struct{}, len(l.cms))
	for i, m := range l.cms {
		l.spawn(m.Client(), func() { w.subscribe(bctx, i, m, timeout, done) })
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	defer func() {
		w.mu.Lock()
		w.ready = true
		w.mu.Unlock()
	}()
	for range l.cms {
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

// subscribe subscribes on the i-th master (canonical), retrying failed
// attempts until ctx ends (the watches are closed) or the master's Client
// cannot subscribe for good (closed, bad name). It sends on done after
// the first attempt.
func (w *watches) subscribe(ctx context.Context, i int, m *lock.Mutex, first time.Duration, done chan<- struct{}) {
	bound, delay := first, minRetryDelay
	for {
		wctx, cancel := context.WithTimeout(ctx, bound)
		x, err := core.Watch(wctx, m)
		cancel()
		if done != nil {
			done <- struct{}{}
			done = nil
		}
		if err == nil {
			w.mu.Lock()
			defer w.mu.Unlock()
			if w.closed {
				x.Close()
				return
			}
			w.ws[i] = x
			if w.ready {
				select {
				case w.late <- struct{}{}:
				default:
				}
			}
			return
		}
		if errors.Is(err, lock.ErrClosed) || errors.Is(err, lock.ErrInvalid) {
			return
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
		bound, delay = max(bound, subscribeTimeout), min(2*delay, maxRetryDelay)
	}
}

// close leaves every channel; an unconsumed wake-up passes to another
// waiter of this process. The UNSUBSCRIBEs go out in the background, in
// parallel, on the masters' Clients' workers: one to a stopped master
// waits for its timeout, and the call that is returning must not wait
// for it.
func (w *watches) close() {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.closed = true
	ws := w.ws
	w.mu.Unlock()
	w.cancel()
	for i, x := range ws {
		if x != nil {
			w.l.spawn(w.l.cms[i].Client(), x.Close)
		}
	}
}

// current returns the watches subscribed so far.
func (w *watches) current() []*pubsub.Waiter {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]*pubsub.Waiter(nil), w.ws...)
}

// drain takes the pending wake-ups before a round, which sees what they
// announced.
func (w *watches) drain() {
	if w == nil {
		return
	}
	select {
	case <-w.late:
	default:
	}
	for _, x := range w.current() {
		if x == nil {
			continue
		}
		select {
		case <-x.C():
		default:
		}
	}
}

// leasesEnd returns how long until enough of the refusing holders'
// leases end for need of their masters to be free. A lease unknown (the
// query failed), or on a master whose releases the call cannot hear of
// (no subscription yet), counts as ending after maxRetryDelay at most.
func (w *watches) leasesEnd(l *Lock, out outcome, need int) time.Duration {
	ws := w.current()
	ends := make([]time.Duration, 0, len(out.refusers))
	for k, i := range out.refusers {
		ttl := out.ttls[k]
		switch {
		case ttl < 0:
			ttl = maxRetryDelay
		case ws == nil || ws[l.canon[i]] == nil:
			ttl = min(ttl, maxRetryDelay)
		}
		ends = append(ends, ttl)
	}
	slices.Sort(ends)
	if need > len(ends) {
		return lock.NoExpiry
	}
	return ends[need-1]
}

// sleep is one wait between rounds.
type sleep struct {
	d      time.Duration
	reason observe.WakeReason // what the end of d means
	listen []int              // the masters (canonical) whose unlock messages count
	need   int                // how many of them must send one
	kick   <-chan struct{}    // a release by this process
}

// sleep waits for s: up to s.d, until unlock messages came from s.need
// distinct masters of s.listen, a reconnect of one of their
// subscriptions, or a kick. It returns what woke it; ctx's error when ctx
// ended first.
func (w *watches) sleep(ctx context.Context, o *options, s sleep) (observe.WakeReason, error) {
	t := time.NewTimer(s.d)
	defer t.Stop()
	cases, idx := w.cases(ctx, t, s)
	start := time.Now()
	e := observe.WakeUp{Reason: s.reason}
	woken := 0
wait:
	for {
		chosen, v, _ := reflect.Select(cases)
		switch chosen {
		case 0:
			return "", ctx.Err()
		case 1:
			break wait
		case 2:
			e.Reason = observe.WakeRelease
			break wait
		case 3: // a subscription landed late: what it missed, a round sees
			e.Reason = observe.WakeReconnect
			break wait
		}
		i := idx[chosen-firstMaster]
		cases[chosen].Chan = reflect.Value{} // one wake-up per master
		if woken == 0 {
			e.Addr = w.l.caddrs[i]
		}
		woken++
		if r, _ := v.Interface().(pubsub.Reason); r == pubsub.Reconnect {
			e.Reason, e.Addr = observe.WakeReconnect, w.l.caddrs[i]
			break
		}
		if woken >= s.need {
			e.Reason = observe.WakeMessage
			break
		}
	}
	e.Slept = time.Since(start)
	if o.obs != nil && o.obs.WakeUp != nil {
		o.obs.WakeUp(ctx, e)
	}
	return e.Reason, nil
}

// firstMaster is the index of the first master's case in a sleep's
// select: the cases before it are ctx, the timer, the kick and a late
// subscription.
const firstMaster = 4

// cases returns the select cases of sleep s with timer t, and the
// canonical positions of the masters whose cases follow firstMaster: those
// of s.listen that have a subscription.
func (w *watches) cases(ctx context.Context, t *time.Timer, s sleep) ([]reflect.SelectCase, []int) {
	ws := w.current()
	cases := make([]reflect.SelectCase, firstMaster, firstMaster+len(s.listen))
	cases[0] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())}
	cases[1] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(t.C)}
	cases[2] = reflect.SelectCase{Dir: reflect.SelectRecv}
	if s.kick != nil {
		cases[2].Chan = reflect.ValueOf(s.kick)
	}
	cases[3] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(w.late)}
	idx := make([]int, 0, len(s.listen))
	for _, i := range s.listen {
		if ws != nil && ws[i] != nil {
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ws[i].C())})
			idx = append(idx, i)
		}
	}
	return cases, idx
}
