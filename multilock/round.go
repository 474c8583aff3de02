package multilock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/observe"
)

// errInFlight is a master's failure in a round when the call's attempt
// of an earlier round was still unanswered until this round's deadline: a
// second attempt would queue behind it on the connection and could not be
// told apart from it.
var errInFlight = fmt.Errorf("%w: the previous attempt on this master is still unanswered", lock.ErrUnavailable)

// call is the state of one Lock or TryLock call across its rounds.
type call struct {
	l     *Lock
	o     *options
	busy  []chan struct{} // per master, a token held by the call's attempt there
	timer *time.Timer     // the rounds' per-master timeout, made once per call
}

func newCall(l *Lock, o *options) *call {
	c := &call{l: l, o: o, busy: make([]chan struct{}, len(l.ms))}
	for i := range c.busy {
		c.busy[i] = make(chan struct{}, 1)
	}
	return c
}

// reply is one master's answer to an attempt.
type reply struct {
	i       int
	h       *lock.Held
	err     error
	refused bool          // held by another owner
	ttl     time.Duration // when refused: the holder's remaining lease, or -1
}

// round collects the replies of one round. It decides as soon as a
// quorum granted, or can no longer grant, or at the per-master timeout;
// the attempts still out then are not waited for. A reply that comes
// after the round decided is not counted: once the round's outcome is
// known (settle), a late grant joins the round's Held while that is live
// (Held.adopt), and is released by its sender otherwise; one that comes
// in between waits in late for settle.
//
// done is closed once every attempt sent has been delivered and dealt
// with (a late grant adopted, or handed to its release) and settle has
// adopted what waited in late: Held.Settled.
type round struct {
	mu      sync.Mutex
	decided bool
	settled bool
	held    *Held      // the round's acquisition, once settled; nil if it failed
	late    []reply    // grants that came after the decision, before settle
	out     chan reply // buffered for every master: sends never block

	left    int  // attempts sent and not yet dealt with
	adopted bool // settle has dealt with late
	ended   bool // done is closed
	done    chan struct{}
}

func newRound(n int) *round {
	return &round{out: make(chan reply, n), done: make(chan struct{})}
}

// dealt counts one delivered reply as dealt with (reply), or settle's
// adoption of late as done (!reply), and closes done after the last.
func (r *round) dealt(reply bool) {
	r.mu.Lock()
	if reply {
		r.left--
	} else {
		r.adopted = true
	}
	end := r.left == 0 && r.adopted && !r.ended
	r.ended = r.ended || end
	r.mu.Unlock()
	if end {
		close(r.done)
	}
}

// deliver hands one master's reply to the round, or, once the round
// decided, deals with a grant itself: see round.
func (r *round) deliver(c *call, rep reply) {
	r.mu.Lock()
	switch {
	case !r.decided:
		r.out <- rep
		r.mu.Unlock()
		r.dealt(true)
		return
	case rep.h == nil:
		r.mu.Unlock()
		r.dealt(true)
		return
	case !r.settled:
		r.late = append(r.late, rep)
		r.mu.Unlock()
		r.dealt(true) // settle adopts or releases it
		return
	}
	h := r.held
	r.mu.Unlock()
	adopted := h != nil && h.adopt(rep)
	r.dealt(true)
	if !adopted {
		_ = c.release(rep.h)
	}
}

// decide stops counting and returns the replies that came meanwhile.
func (r *round) decide(replies []reply) []reply {
	r.mu.Lock()
	r.decided = true
	r.mu.Unlock()
	for {
		select {
		case rep := <-r.out:
			replies = append(replies, rep)
		default:
			return replies
		}
	}
}

// settle records the round's outcome, h (nil: it failed), and adopts or
// releases the grants that came between the decision and now; the
// releases run on the masters' workers.
func (r *round) settle(c *call, h *Held) {
	r.mu.Lock()
	r.settled, r.held = true, h
	late := r.late
	r.late = nil
	r.mu.Unlock()
	for _, g := range late {
		if h == nil || !h.adopt(g) {
			c.background(g.i, func() { _ = c.release(g.h) })
		}
	}
	r.dealt(false)
}

// outcome is a failed round, for the error and the wait after it.
type outcome struct {
	granted   int
	refused   int
	permanent int             // closed Clients, bad names
	ttl       time.Duration   // the longest remaining lease of the refusing holders
	refusers  []int           // the masters held by another owner
	ttls      []time.Duration // their remaining leases: -1 unknown, lock.NoExpiry
	validity  time.Duration
	errs      []error
}

// busy reports whether holders of other owners alone kept the quorum out
// of reach: only their release (or lease expiry) can change that.
func (o outcome) busy(l *Lock) bool { return o.refused > len(l.ms)-l.quorum }

func (o outcome) quorumError(l *Lock, rounds int) *QuorumError {
	return &QuorumError{
		Kind: l.kind, Name: l.names(), Masters: len(l.ms), Needed: l.quorum,
		Granted: o.granted, Rounds: rounds, Validity: o.validity, Errs: o.errs, parts: l.parts,
	}
}

// round makes one attempt on every master in parallel and waits for the
// answers until a quorum granted, a quorum can no longer grant, the
// per-master timeout or ctx ends. It succeeds when a quorum granted and
// validity (lease − elapsed − drift) is still positive; otherwise it
// releases every grant, because an answer lost after the write would
// leave a hold nobody knows of. Grants that come later join the Held, or
// are released when the round failed (see round).
func (c *call) round(ctx context.Context, attempt int) (*Held, outcome) {
	l, o := c.l, c.o
	start := time.Now()
	r := newRound(len(l.ms))
	replies, pending := c.collect(ctx, r, start)
	out, grants := c.tally(replies, pending)

	var fences []uint64
	var ferr error
	if len(grants) >= l.quorum && ctx.Err() == nil && o.fenced {
		fences, ferr = c.fence(ctx, grants)
		if ferr != nil {
			out.errs = append(out.errs, ferr)
		}
	}
	elapsed := time.Since(start)
	out.validity = o.validityLease - elapsed - o.drift
	ok := len(grants) >= l.quorum && out.validity > 0 && ferr == nil && ctx.Err() == nil
	var h *Held
	if ok {
		h = newHeld(ctx, l, o, grants, fences, start, out.validity)
		h.settled = r.done
	} else {
		c.releaseAll(ctx, grants)
	}
	r.settle(c, h)
	c.observe(ctx, attempt, out, elapsed, ok)
	return h, out
}

// collect starts the round's attempts, one per master, unless ctx ended,
// and returns the replies that came until the round could decide (a
// quorum granted, or can no longer grant), the per-master timeout or ctx
// ended; later ones are not counted. pending says why the masters that
// did not answer are counted as failed.
func (c *call) collect(ctx context.Context, r *round, start time.Time) (replies []reply, pending error) {
	l, o := c.l, c.o
	n := len(l.ms)
	replies = make([]reply, 0, n)
	if ctx.Err() != nil {
		return r.decide(replies), fmt.Errorf("abandoned: %w", ctx.Err())
	}
	c.send(context.WithoutCancel(ctx), r, start.Add(o.perMaster)) // per-master holds end only by Unlock or loss
	if c.timer == nil {
		c.timer = time.NewTimer(o.perMaster)
	} else {
		c.timer.Reset(o.perMaster)
	}
	defer c.timer.Stop()
	pending = fmt.Errorf("%w: still unanswered when the round decided", lock.ErrUnavailable)
	granted := 0
	for len(replies) < n && granted < l.quorum && len(replies)-granted <= n-l.quorum {
		select {
		case rep := <-r.out:
			replies = append(replies, rep)
			if rep.h != nil {
				granted++
			}
		case <-c.timer.C:
			return r.decide(replies), fmt.Errorf("%w: no answer within the per-master timeout %v", lock.ErrUnavailable, o.perMaster)
		case <-ctx.Done():
			return r.decide(replies), fmt.Errorf("abandoned: %w", ctx.Err())
		}
	}
	return r.decide(replies), pending
}

// send starts an attempt on every master, each on a worker of its
// master's Client (no goroutine is started per master and round); a
// closed Client answers ErrClosed at once.
func (c *call) send(ctx context.Context, r *round, deadline time.Time) {
	l := c.l
	r.mu.Lock()
	r.left = len(l.ms) // before the first attempt can be dealt with
	r.mu.Unlock()
	for i, m := range l.ms {
		l.bg.Add(1)
		if !core.Go(m.Client(), func() { c.attempt(ctx, r, i, deadline) }) {
			l.bg.Done()
			r.deliver(c, reply{i: i, err: lock.ErrClosed, ttl: -1})
		}
	}
}

// background runs f, a call's cleanup on the i-th master, on a worker of
// that master's Client (Lock.spawn).
func (c *call) background(i int, f func()) { c.l.spawn(c.l.ms[i].Client(), f) }

// spawn runs f on a worker of c, counted in l.bg: every goroutine of
// package multilock is a worker of a member's Client, which Close joins.
// f runs inline when c no longer lends (closed: f finds it closed and
// returns at once).
func (l *Lock) spawn(c *lock.Client, f func()) {
	l.bg.Add(1)
	g := func() {
		defer l.bg.Done()
		f()
	}
	if !core.Go(c, g) {
		g()
	}
}

// tally sorts a round's replies into its grants and the outcome of the
// round should it fail: counts, the refusing holders' leases, and an
// error naming every master that did not grant, answered (its error) or
// not (pending).
func (c *call) tally(replies []reply, pending error) (outcome, []reply) {
	l := c.l
	n := len(l.ms)
	var out outcome
	out.ttl = -1
	answered := make([]bool, n)
	grants := make([]reply, 0, n)
	for _, rep := range replies {
		answered[rep.i] = true
		switch {
		case rep.h != nil:
			grants = append(grants, rep)
			continue
		case rep.refused:
			out.refused++
			out.ttl = max(out.ttl, rep.ttl)
			out.refusers = append(out.refusers, rep.i)
			out.ttls = append(out.ttls, rep.ttl)
		case errors.Is(rep.err, lock.ErrClosed) || errors.Is(rep.err, lock.ErrInvalid):
			out.permanent++
		}
		out.errs = append(out.errs, l.onMaster(rep.i, "acquire", rep.err))
	}
	if len(grants) < l.quorum {
		for i, ok := range answered {
			if !ok {
				out.errs = append(out.errs, l.onMaster(i, "acquire", pending))
			}
		}
	}
	out.granted = len(grants)
	return out, grants
}

// observe reports the round to the Observer's Round hook, if any.
func (c *call) observe(ctx context.Context, attempt int, out outcome, elapsed time.Duration, ok bool) {
	l, o := c.l, c.o
	if o.obs == nil || o.obs.Round == nil {
		return
	}
	e := observe.Round{Attempt: attempt, Masters: len(l.ms), Needed: l.quorum, Granted: out.granted, Refused: out.refused,
		Elapsed: elapsed, Validity: out.validity, Acquired: ok}
	if !ok {
		e.Err = out.quorumError(l, attempt)
	}
	o.obs.Round(ctx, e)
}

// attempt tries the i-th master once, on a worker, and hands the reply
// to the round (which, once decided, gives a grant to the round's Held
// or back). The master is free for this call's next attempt only then.
func (c *call) attempt(ctx context.Context, r *round, i int, deadline time.Time) {
	l := c.l
	defer l.bg.Done()
	if !c.take(i, deadline) {
		r.deliver(c, reply{i: i, err: errInFlight, ttl: -1})
		return
	}
	defer func() { <-c.busy[i] }()
	h, err := l.ms[i].TryLock(ctx, c.o.mopts...)
	rep := reply{i: i, h: h, err: err, ttl: -1}
	// ctx never ends (see collect): a *ConflictError means another owner
	// holds it, and carries its remaining lease, which bounds the sleep
	// before the next round when no unlock message comes. Other errors
	// (an unreachable master) are failures, not refusals.
	if ce, ok := errors.AsType[*lock.ConflictError](err); ok {
		rep.refused, rep.ttl = true, ce.TTL
		if ce.TTL < 0 {
			rep.ttl = lock.NoExpiry
		}
	}
	r.deliver(c, rep)
}

// take waits for the i-th master's token until deadline: an earlier
// round's attempt there may still be out. It reports whether it got it.
func (c *call) take(i int, deadline time.Time) bool {
	select {
	case c.busy[i] <- struct{}{}:
		return true
	default:
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case c.busy[i] <- struct{}{}:
		return true
	case <-t.C:
		return false
	}
}

// releaseAll gives back the grants of a failed round, on all their
// masters in parallel (on their Clients' workers), and waits for them up
// to the per-master timeout, so that the call's next round finds them
// free; not past ctx, which ends the call (issue 29, stage 3). Slower
// releases finish in the background, joined by Close.
func (c *call) releaseAll(ctx context.Context, grants []reply) {
	if len(grants) == 0 {
		return
	}
	done := make(chan struct{}, len(grants))
	for _, g := range grants {
		c.background(g.i, func() {
			_ = c.release(g.h)
			done <- struct{}{}
		})
	}
	t := time.NewTimer(c.o.perMaster)
	defer t.Stop()
	for range grants {
		select {
		case <-done:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// release gives back one hold nobody else knows of. It retries until the
// hold is released or ends (lost, its Client closed), for at most twice
// the lease: by then an unreachable master has expired it.
func (c *call) release(h *lock.Held) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*c.o.validityLease)
	defer cancel()
	stop := context.AfterFunc(h.Context(), cancel)
	defer stop()
	return h.Unlock(ctx)
}
