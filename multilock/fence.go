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
// its quorum takes the highest token among the grants that decided it,
// T, and raises every master's counter to at least T (reentrant.RaiseFence:
// max, never lower) before Lock returns, requiring a quorum of masters to
// be known at T or above among the masters whose grants decided the
// round: those that granted T themselves, and deciding ones whose raise
// succeeded. Raises on the other masters are sent too, but do not count:
// on one that did not grant, a later acquisition's INCR may land before
// the raise (nothing orders them), while on a deciding master the later
// grant needs this hold's release, which the raise precedes on the same
// turn of events. A grant that comes after the round decided (it joins
// the Held, or is released) is not looked at: its master's counter may be
// above T, which is harmless (counters need only be at least T), and its
// raise does not count either.
//
// The grants that decided the round are the quorum's, plus any that came
// in the same instant: the round decides as soon as a quorum granted, so T
// is the highest counter of (about) a quorum of masters, not of every
// master that grants. Before rounds decided at the quorum, a round whose
// masters all granted took the highest counter of all of them, and tokens
// kept increasing while any one master written at T kept its counter; that
// margin is gone, and what is left is exactly the bound below.
//
// Why that suffices: any later acquisition's deciding quorum shares at
// least one master with this quorum-sized set; that master's counter is
// at least T, and the later acquisition INCRs it, so its own maximum is
// above T. It needs that master's counter to have survived: a master that
// restarts without its data lost its counter. Writing T back to every
// master, not only to a quorum, is what keeps tokens increasing when one
// master comes back empty: if the write-back reached W of the N masters
// and f of those lost their counters, a later quorum of q still has an
// intact one while f < W + q − N (docs/safety.md, section 3), and no more.

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
		l.spawn(m.Client(), func() {
			rctx, cancel := context.WithTimeout(wctx, o.perMaster)
			defer cancel()
			_, err := reentrant.RaiseFence(rctx, m.Client().Redis(), m.Name(), top)
			if err != nil {
				err = l.onMaster(i, "raise fence", err)
			}
			results <- raised{granted[i], err}
		})
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
