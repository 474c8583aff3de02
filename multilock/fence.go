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

// Fencing a MultiLock over several names (Redisson's getMultiLock on one
// client) is done per name: each name is its own group, whose token is the
// highest its own counters gave (one counter when the name is on one
// master), written back to that name's other masters only. A later
// acquisition of the name, by any lock, INCRs one of those counters, so
// each name's tokens increase as a single fenced lock's do, and one
// name's counter is never raised to another's.

// groupNames sets the Lock's fencing groups.
func (l *Lock) groupNames() {
	l.group = make([]int, len(l.ms))
	byName := map[string]int{}
	for i, m := range l.ms {
		key := m.Name()
		if l.kind == kindRedLock {
			key = "" // one group
		}
		g, ok := byName[key]
		if !ok {
			g = len(l.groups)
			byName[key] = g
			l.groups = append(l.groups, nil)
		}
		l.groups[g] = append(l.groups[g], i)
		l.group[i] = g
	}
}

// raised is one fence raise's outcome on the i-th master.
type raised struct {
	i   int
	err error
}

// raise writes its group's top token to every master not at it, each on
// a worker of its master's Client, bounded by the per-master timeout,
// and returns the channel their outcomes come on (buffered: a raise
// nobody waits for any more ends on its own) and how many it started.
func (c *call) raise(ctx context.Context, tops []uint64, atTop []bool) (<-chan raised, int) {
	l, o := c.l, c.o
	results := make(chan raised, len(l.ms))
	pending := 0
	for i, m := range l.ms {
		if atTop[i] {
			continue
		}
		pending++
		top := tops[l.group[i]]
		l.spawn(m.Client(), func() {
			rctx, cancel := context.WithTimeout(ctx, o.perMaster)
			defer cancel()
			_, err := reentrant.RaiseFence(rctx, m.Client().Redis(), m.Name(), top)
			if err != nil {
				err = l.onMaster(i, "raise fence", err)
			}
			results <- raised{i, err}
		})
	}
	return results, pending
}

// fence returns the tokens of a round that has its quorum, one per
// fencing group, after writing each back as above. Raises beyond what a
// group needs finish in the background.
func (c *call) fence(ctx context.Context, grants []reply) ([]uint64, error) {
	l := c.l
	tops := make([]uint64, len(l.groups))
	for _, g := range grants {
		tops[l.group[g.i]] = max(tops[l.group[g.i]], g.h.Fence())
	}
	// A group needs as many of its members known at its top as the lock
	// needs masters beyond those it may miss: a RedLock's one group its
	// quorum, a MultiLock's groups every member.
	need := make([]int, len(l.groups))
	for g, members := range l.groups {
		need[g] = len(members) - (len(l.ms) - l.quorum)
	}
	atTop := make([]bool, len(l.ms))
	granted := make([]bool, len(l.ms))
	known := make([]int, len(l.groups)) // granting members known to hold their group's top or more
	for _, g := range grants {
		granted[g.i] = true
		if g.h.Fence() == tops[l.group[g.i]] {
			atTop[g.i] = true
			known[l.group[g.i]]++
		}
	}
	results, pending := c.raise(context.WithoutCancel(ctx), tops, atTop)
	short := func() int { // the first group still short of its need, or -1
		for g := range l.groups {
			if known[g] < need[g] {
				return g
			}
		}
		return -1
	}
	var errs []error
	for ; pending > 0 && short() >= 0; pending-- {
		var r raised
		select {
		case r = <-results:
		case <-ctx.Done(): // the raises still out end on their own (results is buffered)
			return nil, oneline.Wrapf(ctx.Err(), "fencing tokens abandoned")
		}
		switch {
		case r.err != nil:
			errs = append(errs, r.err)
		case granted[r.i]:
			known[l.group[r.i]]++
		}
	}
	if g := short(); g >= 0 {
		return nil, oneline.Wrapf(oneline.Join(errs...), "fencing token %d of %q is on %d %s, %d needed",
			tops[g], l.ms[l.groups[g][0]].Name(), known[g], l.parts, need[g])
	}
	return tops, nil
}
