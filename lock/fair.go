package lock

import (
	"context"
	"errors"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/rlock-go/rlock/observe"
	"github.com/rlock-go/rlock/pubsub"
	"github.com/rlock-go/rlock/reentrant"
)

// FairMutex returns the lock called name as Redisson's fair lock
// (redisson.getFairLock(name)): the plain lock's hash, plus a queue of
// waiters in Redis (the list "redisson_lock_queue:{name}" and the sorted
// set of their timeouts "redisson_lock_timeout:{name}") that Java and Go
// waiters join alike, so the lock is granted in the order they came,
// across processes. A release wakes only the waiter at the queue's head,
// on its own channel ("redisson_lock__channel:{name}:<holder field>").
//
// Each waiting Lock or TryLock with a Wait joins the queue itself (there
// is no local queue: goroutines of one process are ordered with everyone
// else's), and leaves it when it gives up. A waiter that stops coming
// back (its process died) keeps its place until its timeout passes:
// Config.FairLockWaitTimeout beyond the one ahead of it, 5 minutes by
// default, as Redisson's. A TryLock without Wait never joins the queue.
//
// It excludes Mutex(name) and every Redisson lock on the same hash, but
// only fair waiters are woken by its releases, and only fair waiters are
// ordered: use one kind per name everywhere. Fenced is refused: Redisson
// has no fenced fair lock. The queue's timeouts are read with each
// client's clock, as Redisson's are: clients whose clocks differ by more
// than a small part of FairLockWaitTimeout prune each other's waiters
// early or late.
func (c *Client) FairMutex(name string) *Mutex {
	m := c.Mutex(name)
	m.p = fairProtocol
	return m
}

// fairWait is a fair acquisition's place in its lock's queue: the wait it
// joined with, and whether it may be in the queue (its requests asked to
// join). Written by the acquisition's goroutine holding the hold's turn.
type fairWait struct {
	wait   time.Duration
	queued bool
	// others: when this acquisition was granted, other acquisitions of
	// its field (goroutines sharing the owner) were still waiting.
	others bool
}

// runFair acquires a fair lock: the call's own attempts, in the queue in
// Redis, asleep on its own channel between them; it leaves the queue when
// it ends without the lock.
func (a *acquisition) runFair() (held *Held, err error) {
	if held, done, err := a.direct(); done {
		return held, err
	}
	c := a.c
	fw := &fairWait{wait: c.cfg.FairLockWaitTimeout}
	if a.o.wait > 0 {
		fw.wait = a.o.wait // Redisson's tryLock(waitTime, ...)
	}
	a.o.fair = fw
	var w *pubsub.Waiter
	defer func() {
		if err != nil && a.l.leaveFair(a.ctx, fw, a.o.until) {
			// Other goroutines of the owner still wait in its one place,
			// and this call may have taken (or given back) what was meant
			// for it: one of them tries at once.
			c.queues.wakeField(a.ctx, a.m.name, a.l.field, w)
		}
		if w != nil {
			c.queues.closeSub(w)
		}
	}()
	var outage *backoff.ExponentialBackOff
	for {
		att, err := a.try()
		if err != nil {
			if err := a.retryAfter(err, &outage); err != nil {
				return nil, err
			}
			continue
		}
		outage = nil
		if att.held != nil {
			if fw.others {
				c.queues.wakeField(a.ctx, a.m.name, a.l.field, w)
			}
			return att.held, nil
		}
		if err := a.waitFair(&w, att); err != nil {
			return nil, err
		}
	}
}

// waitFair waits after an attempt of a fair waiter found the lock held.
// Without a subscription to the field's channel it subscribes and returns
// at once, for another attempt before sleeping (a release between the two
// still wakes it); when none can be had, it sleeps without one.
func (a *acquisition) waitFair(w **pubsub.Waiter, att outcome) error {
	left, err := a.left(att.TTL)
	if err != nil {
		return err
	}
	if *w == nil {
		sctx, cancel := context.WithTimeout(a.ctx, min(left, a.c.cfg.CommandTimeout))
		*w, _ = a.c.hub.Subscribe(sctx, reentrant.FairWaiterChannel(a.m.name, a.l.field))
		cancel()
		if a.ctx.Err() != nil {
			return join(ErrNotAcquired, context.Cause(a.ctx))
		}
		if *w != nil {
			return nil
		}
		// The subscription took time (up to all that was left): the sleep
		// is bounded by what is left now.
		if left, err = a.left(att.TTL); err != nil {
			return err
		}
	}
	return a.sleepFair(*w, att, left)
}

// sleepFair sleeps a fair waiter until its channel wakes it, at most the
// wait its attempt reported (the holder's lease, or the queue head's
// timeout), the watchdog's lease (a message lost in a reconnect costs no
// more) and the time left; without a subscription (w nil), at most a
// second.
func (a *acquisition) sleepFair(w *pubsub.Waiter, att outcome, left time.Duration) error {
	ttl := att.TTL
	d := ttl
	if d <= 0 {
		d = a.c.cfg.WatchdogTimeout
	}
	d = max(min(d, a.c.cfg.WatchdogTimeout, left), time.Millisecond)
	if w == nil {
		d = min(d, time.Second)
	}
	a.waiting(ttl, nil, att.position)
	slept, _, err := a.m.sleep(a.octx, a.ctx, w, nil, d, observe.WakeTimeout)
	a.end.Waited += slept
	return err
}

// joinFair counts a request of a fair acquisition that asks to join the
// queue, holding the turn: from now on it may be queued, and a pending
// leave of the field is moot (its place is kept).
func (l *hold) joinFair(fw *fairWait) {
	if l.fair == nil {
		l.fair = &fairPlace{}
	}
	if !fw.queued {
		if l.fair.queued == 0 && !l.fair.leave {
			// The field's place is new: its timeout in Redis will be
			// set with this wait, which every request of the field then
			// sends (a grant lowers the others' timeouts by it, a leave
			// the ones behind), whatever wait a later goroutine of the
			// owner asked for.
			l.fair.wait = fw.wait
		}
		fw.queued = true
		l.fair.queued++
	}
	l.fair.leave = false
}

// leaving reports whether the field must still leave a fair queue; the
// caller holds the turn.
func (l *hold) leaving() bool { return l.fair != nil && l.fair.leave }

// leftFair uncounts a fair acquisition that left the queue (acquired: the
// script took it out), holding the turn.
func (l *hold) leftFair(fw *fairWait) {
	if fw != nil && fw.queued {
		fw.queued = false
		l.fair.queued--
		fw.others = l.fair.queued > 0
	}
}

// wakeField wakes one other waiting acquisition of field (a goroutine
// sharing the owner that was just granted): the field left the queue with
// this grant, so no release will wake it, and its next attempt re-enters
// at once. Each one granted wakes the next. w is the granted call's own
// subscription to the field's channel, if it made one; otherwise one is
// taken for the moment (the waiting goroutines hold the channel's
// subscription, so it costs no round trip).
func (qs *waitQueues) wakeField(ctx context.Context, name, field string, w *pubsub.Waiter) {
	if w != nil {
		w.Pass()
		return
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), qs.timeout)
	w, err := qs.hub.Subscribe(sctx, reentrant.FairWaiterChannel(name, field))
	cancel()
	if err == nil {
		w.Pass()
		qs.closeSub(w)
	}
}

// leaveFair takes a fair acquisition that ends without the lock out of
// the queue: when it was the field's last queued acquisition, after any
// request of the field that may still run is settled (or it could queue
// the field again), the field leaves the queue, and holds nobody has (a
// grant whose answer was lost) are released. It waits at most two command
// timeouts, and no longer than the caller's ctx and a TryLock's last
// moment (until, when not zero) allow: what it could not finish then, a
// settler finishes in the background (R3-8: a fair Lock whose ctx ended
// while the master did not answer returned two command timeouts late). It
// reports whether other acquisitions of the field still wait (or may: the
// turn could not be had), which one of them should be woken for.
func (l *hold) leaveFair(ctx context.Context, fw *fairWait, until time.Time) (others bool) {
	if !fw.queued {
		return fw.others // granted (then given back), or never queued
	}
	closing := l.e.closed()
	if closing || ctx.Err() != nil || (!until.IsZero() && !time.Now().Before(until)) {
		return l.leaveFairLater(fw, closing)
	}
	tctx, cancel := context.WithTimeout(ctx, 2*l.e.cfg.CommandTimeout)
	defer cancel()
	if err := l.take(tctx, nil, nil); err != nil {
		l.finishLater(fw)
		return true
	}
	defer l.give()
	if l.leftLast(fw) {
		return true
	}
	// Within the caller's ctx: each send ends with it (stops.caller).
	if l.settle(tctx, stops{caller: true}) != nil {
		l.finishLater(nil)
		return false
	}
	l.releaseStrays(tctx, stops{caller: true})
	if l.leaveNow(tctx, stops{caller: true}) != nil {
		l.finishLater(nil)
	}
	return false
}

// leftLast uncounts fw, holding the turn, and, when it was the field's
// last queued acquisition, records the field's leave as pending; it
// reports whether others of the field are still queued.
func (l *hold) leftLast(fw *fairWait) (others bool) {
	l.leftFair(fw)
	if l.fair.queued > 0 {
		return true
	}
	l.setLeave(true)
	return false
}

// leaveFairLater is leaveFair when the caller's time is up or the Client
// is closing: nothing is sent now. The acquisition is uncounted and the
// field's leave recorded as pending, which a settler sends, or Close
// (closeHold) when it is closing; when the turn is busy, all of it is
// the settler's.
func (l *hold) leaveFairLater(fw *fairWait, closing bool) (others bool) {
	if !l.tryTake() {
		l.finishLater(fw)
		return true
	}
	defer l.give()
	if l.leftLast(fw) {
		return true
	}
	if !closing {
		l.finishLater(nil)
	}
	return false
}

// leaveNow sends the field's pending leave, holding the turn, once no
// request of it may still run and none of its acquisitions is queued.
func (l *hold) leaveNow(ctx context.Context, st stops) error {
	if !l.leaving() || l.fair.queued > 0 || l.unsettled != nil {
		return nil
	}
	lv := reentrant.LeaveFair{Name: l.name, Field: l.field, Wait: l.fair.wait, Publish: l.e.publish}
	err := l.e.retry(ctx, l.name, "leave fair queue", st, func(actx context.Context) error {
		_, err := lv.Run(actx, l.e.rc)
		return err
	})
	if err != nil && !errors.Is(err, ErrUnavailable) {
		// Refused (the script is not the field's to run, an ACL): no
		// retry would change that; the waiter is pruned at its timeout.
		err = nil
	}
	if err == nil {
		l.setLeave(false)
	}
	return err
}

// setLeave records (or clears) l's pending leave; the caller holds the
// turn. Like an unsettled request, it keeps the hold.
func (l *hold) setLeave(leave bool) {
	l.fair.leave = leave
	l.setKeep()
}
