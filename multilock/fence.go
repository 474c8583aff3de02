package multilock

import (
	"context"

	"github.com/rlock-go/rlock/internal/oneline"
	"github.com/rlock-go/rlock/reentrant"
)

// Fencing over several masters.
//
// Every master keeps Redisson's fenced-lock counter for its lock name,
// "redisson_lock_token:{name}", which the fenced acquire script INCRs on
// each grant. One master's counter alone does not make a RedLock's tokens
// increase: two successive quorums may share a single master, and the
// other masters of the second quorum may be behind. So a round that has
// its quorum takes the highest token among the grants, T, and raises
// every master's counter to at least T (reentrant.RaiseFence: max, never
// lower) before Lock returns, requiring a quorum of masters to be known
// at T or above among the masters that GRANTED this acquisition: those
// that granted T themselves, and granted ones whose raise succeeded.
// Raises on masters that did not grant are sent too, but do not count: a
// later acquisition's INCR there may land before the raise (nothing
// orders them), while on a granted master the later grant needs this
// hold's release, which the raise precedes on the same turn of events.
//
// Why that suffices: any later acquisition's quorum shares at least one
// master with this quorum-sized set; that master's counter is at least T,
// and the later acquisition INCRs it, so its own maximum is above T. It
// needs that master's counter to have survived: a master that restarts
// without its data lost its counter. Writing T back to every master, not
// only to a quorum, is what keeps tokens increasing when one master comes
// back empty (more generally, while fewer masters lost their counters
// than the later quorum shares with the masters that had T).

// fence returns the token of a round that has its quorum, after writing
// it back as above. Raises beyond the quorum finish in the background.
func (c *call) fence(ctx context.Context, grants []reply) (uint64, error) {
	l, o := c.l, c.o
	var top uint64
	for _, g := range grants {
		top = max(top, g.h.Fence())
	}
	atTop := make([]bool, len(l.ms))
	granted := make([]bool, len(l.ms))
	known := 0 // granting masters known to hold top or more
	for _, g := range grants {
		granted[g.i] = true
		if g.h.Fence() == top {
			atTop[g.i] = true
			known++
		}
	}
	type raised struct {
		granted bool
		err     error
	}
	results := make(chan raised, len(l.ms))
	pending := 0
	wctx := context.WithoutCancel(ctx)
	for i, m := range l.ms {
		if atTop[i] {
			continue
		}
		pending++
		l.bg.Add(1)
		go func() {
			defer l.bg.Done()
			rctx, cancel := context.WithTimeout(wctx, o.perMaster)
			defer cancel()
			_, err := reentrant.RaiseFence(rctx, m.Client().Redis(), m.Name(), top)
			if err != nil {
				err = l.onMaster(i, "raise fence", err)
			}
			results <- raised{granted[i], err}
		}()
	}
	var errs []error
	for ; pending > 0 && known < l.quorum; pending-- {
		switch r := <-results; {
		case r.err != nil:
			errs = append(errs, r.err)
		case r.granted:
			known++
		}
	}
	if known < l.quorum {
		return 0, oneline.Wrapf(oneline.Join(errs...), "fencing token %d is on %d masters, %d needed", top, known, l.quorum)
	}
	return top, nil
}
