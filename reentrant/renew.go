package reentrant

import (
	"fmt"
	"time"

	"github.com/redis/rueidis"
)

// maxRenewBatch is the most keys one renew command carries (Redisson's
// figure). Larger batches are split into several commands, all of which
// still go out in one DoMulti round trip.
const maxRenewBatch = 100

// Hold names one lock held by one field, for renewal.
type Hold struct {
	Name  string
	Field string
	// Read marks a read hold of a read-write lock (ModeRead): its
	// renewal extends the hash and every timeout key of the field.
	Read bool
}

// RenewBatch is a set of renew commands and the holds each one covers.
type RenewBatch struct {
	Cmds  []rueidis.Completed
	Holds [][]Hold // Holds[i] are the keys of Cmds[i], in order
	sc    []*Script
	keys  [][]string
	args  [][]string
}

// Eval builds the EVAL form of Cmds[i], to resend it after the server
// answered NOSCRIPT (its script cache was flushed or it restarted).
func (b *RenewBatch) Eval(c rueidis.Client, i int) rueidis.Completed {
	return b.sc[i].Eval(c, b.keys[i], b.args[i])
}

// BuildRenew splits holds into chunks of at most maxRenewBatch keys and
// builds one EVALSHA per chunk: RenewScript for plain and write holds,
// RenewReadScript (two keys a hold) for read holds; in a Redis Cluster it
// first groups them by slot, since one command may only touch one slot.
// Send them together with DoMulti: one round trip however many locks are
// held, of whatever kinds.
func BuildRenew(c rueidis.Client, lease time.Duration, holds []Hold) RenewBatch {
	type group struct {
		slot uint16
		read bool
	}
	var b RenewBatch
	groups := map[group][]Hold{}
	var order []group
	cluster := c.Mode() == rueidis.ClientModeCluster
	for _, h := range holds {
		g := group{read: h.Read}
		if cluster {
			probe := c.B().Pttl().Key(h.Name).Build()
			g.slot = probe.Slot()
		}
		if _, ok := groups[g]; !ok {
			order = append(order, g)
		}
		groups[g] = append(groups[g], h)
	}
	for _, g := range order {
		b.add(c, ms(lease), groups[g], g.read)
	}
	return b
}

// add appends the commands renewing holds, all of one slot and kind.
func (b *RenewBatch) add(c rueidis.Client, lease string, g []Hold, read bool) {
	sc, per := RenewScript, 1
	if read {
		sc, per = RenewReadScript, 2
	}
	for len(g) > 0 {
		n := min(len(g), maxRenewBatch/per)
		chunk := g[:n]
		g = g[n:]
		keys := make([]string, 0, n*per)
		args := make([]string, n+1)
		args[0] = lease
		for i, h := range chunk {
			keys = append(keys, h.Name)
			if read {
				keys = append(keys, ReadTimeoutPrefix(h.Name, h.Field))
			}
			args[i+1] = h.Field
		}
		b.Cmds = append(b.Cmds, sc.EvalSHA(c, keys, args))
		b.Holds = append(b.Holds, chunk)
		b.sc = append(b.sc, sc)
		b.keys = append(b.keys, keys)
		b.args = append(b.args, args)
	}
}

// ParseRenew reads one renew command's reply: renewed[i] tells whether
// the i-th hold of the command is still held (and was extended).
func ParseRenew(res rueidis.RedisResult, n int) (renewed []bool, err error) {
	vals, err := res.AsIntSlice()
	if err != nil {
		return nil, err
	}
	if len(vals) != n {
		return nil, fmt.Errorf("%w: renew returned %d values for %d keys", ErrUnexpectedReply, len(vals), n)
	}
	renewed = make([]bool, n)
	for i, v := range vals {
		renewed[i] = v == 1
	}
	return renewed, nil
}
