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
	l    *Lock
	o    *options
	busy []chan struct{} // per master, a token held by the call's attempt there
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

// round collects the replies of one round. A reply that comes after the
// round decided is not counted: its sender gives a grant back itself.
type round struct {
	mu      sync.Mutex
	decided bool
	out     chan reply // buffered for every master: sends never block
}

func (r *round) deliver(rep reply) (counted bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.decided {
		return false
	}
	r.out <- rep
	return true
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
	released  []int // masters where this round released its grant
}

// busy reports whether holders of other owners alone kept the quorum out
// of reach: only their release (or lease expiry) can change that.
func (o outcome) busy(l *Lock) bool { return o.refused > len(l.ms)-l.quorum }

func (o outcome) quorumError(l *Lock, rounds int) *QuorumError {
	return &QuorumError{
		Kind: l.kind, Name: l.ms[0].Name(), Masters: len(l.ms), Needed: l.quorum,
		Granted: o.granted, Rounds: rounds, Validity: o.validity, Errs: o.errs,
	}
}

// round makes one attempt on every master in parallel and waits for the
// answers until all came, the per-master timeout or ctx ends. It succeeds
// when a quorum granted and validity (lease − elapsed − drift) is still
// positive; otherwise it releases every grant, because an answer lost
// after the write would leave a hold nobody knows of.
func (c *call) round(ctx context.Context, attempt int) (*Held, outcome) {
	l, o := c.l, c.o
	start := time.Now()
	out, grants := c.tally(ctx, c.collect(ctx, start))

	var fence uint64
	var ferr error
	if len(grants) >= l.quorum && ctx.Err() == nil && o.fenced {
		fence, ferr = c.fence(ctx, grants)
		if ferr != nil {
			out.errs = append(out.errs, ferr)
		}
	}
	elapsed := time.Since(start)
	out.validity = o.validityLease - elapsed - o.drift
	ok := len(grants) >= l.quorum && out.validity > 0 && ferr == nil && ctx.Err() == nil
	var h *Held
	if ok {
		h = newHeld(ctx, l, o, grants, fence, start, out.validity)
	} else {
		out.released = c.releaseAll(grants)
	}
	c.observe(ctx, attempt, out, elapsed, ok)
	return h, out
}

// collect starts the round's attempts, one per master, unless ctx ended,
// and returns the replies that came until all did, the per-master
// timeout or ctx ended; later ones are not counted.
func (c *call) collect(ctx context.Context, start time.Time) []reply {
	l, o := c.l, c.o
	n := len(l.ms)
	r := &round{out: make(chan reply, n)}
	mctx := context.WithoutCancel(ctx) // per-master holds end only by Unlock or loss
	replies := make([]reply, 0, n)
	if ctx.Err() == nil {
		for i := range l.ms {
			l.bg.Add(1)
			go c.attempt(mctx, r, i, start.Add(o.perMaster))
		}
	}
	// Wait for every answer, even once the quorum is out of reach: a
	// failed round then leaves no grant of ours behind on a master that
	// answers in time.
	timer := time.NewTimer(o.perMaster)
collect:
	for len(replies) < n {
		select {
		case rep := <-r.out:
			replies = append(replies, rep)
		case <-timer.C:
			break collect
		case <-ctx.Done():
			break collect
		}
	}
	timer.Stop()
	return r.decide(replies)
}

// tally sorts a round's replies into its grants and the outcome of the
// round should it fail: counts, the refusing holders' leases, and an
// error naming every master that did not grant, answered or not.
func (c *call) tally(ctx context.Context, replies []reply) (outcome, []reply) {
	l, o := c.l, c.o
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
	for i, ok := range answered {
		switch {
		case ok:
		case ctx.Err() != nil:
			out.errs = append(out.errs, l.onMaster(i, "acquire", fmt.Errorf("abandoned: %w", ctx.Err())))
		default:
			out.errs = append(out.errs, l.onMaster(i, "acquire", fmt.Errorf(
				"%w: no answer within the per-master timeout %v", lock.ErrUnavailable, o.perMaster)))
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

// attempt tries the i-th master once. A grant that comes after the round
// decided is released here; the master is free for this call's next
// attempt only then.
func (c *call) attempt(ctx context.Context, r *round, i int, deadline time.Time) {
	l := c.l
	defer l.bg.Done()
	select {
	case c.busy[i] <- struct{}{}:
	default: // an earlier round's attempt is still out: wait for it
		t := time.NewTimer(time.Until(deadline))
		select {
		case c.busy[i] <- struct{}{}:
			t.Stop()
		case <-t.C:
			r.deliver(reply{i: i, err: errInFlight, ttl: -1})
			return
		}
	}
	defer func() { <-c.busy[i] }()
	m := l.ms[i]
	h, err := m.TryLock(ctx, c.o.mopts...)
	rep := reply{i: i, h: h, err: err, ttl: -1}
	if err != nil && errors.Is(err, lock.ErrNotAcquired) {
		// ctx never ends (see collect): ErrNotAcquired means another owner
		// holds it. Its remaining lease bounds the sleep before the next
		// round when no unlock message comes.
		rep.refused = true
		qctx, cancel := context.WithDeadline(ctx, deadline)
		if ttl, err := m.RemainingTTL(qctx); err == nil {
			rep.ttl = ttl
		}
		cancel()
	}
	if !r.deliver(rep) && h != nil {
		_ = c.release(h)
	}
}

// releaseAll gives back the grants of a failed round, on all their
// masters in parallel, and waits for them up to the per-master timeout;
// slower releases finish in the background. It returns the masters
// released on.
func (c *call) releaseAll(grants []reply) []int {
	if len(grants) == 0 {
		return nil
	}
	l := c.l
	done := make(chan struct{}, len(grants))
	idx := make([]int, len(grants))
	for k, g := range grants {
		idx[k] = g.i
		l.bg.Add(1)
		go func() {
			defer l.bg.Done()
			_ = c.release(g.h)
			done <- struct{}{}
		}()
	}
	t := time.NewTimer(c.o.perMaster)
	defer t.Stop()
	for range grants {
		select {
		case <-done:
		case <-t.C:
			return idx
		}
	}
	return idx
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
