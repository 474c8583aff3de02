package lock

import (
	"context"
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
