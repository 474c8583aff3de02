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
}

// RenewBatch is a set of renew commands and the holds each one covers.
type RenewBatch struct {
	Cmds  []rueidis.Completed
	Holds [][]Hold // Holds[i] are the keys of Cmds[i], in order
	keys  [][]string
	args  [][]string
}

// Eval builds the EVAL form of Cmds[i], to resend it after the server
// answered NOSCRIPT (its script cache was flushed or it restarted).
func (b *RenewBatch) Eval(c rueidis.Client, i int) rueidis.Completed {
	return RenewScript.Eval(c, b.keys[i], b.args[i])
}

// BuildRenew splits holds into chunks of at most maxRenewBatch and builds
// one EVALSHA per chunk; in a Redis Cluster it first groups them by slot,
// since one command may only touch one slot. Send them together with
// DoMulti: one round trip however many locks are held.
func BuildRenew(c rueidis.Client, lease time.Duration, holds []Hold) RenewBatch {
	var b RenewBatch
	groups := map[uint16][]Hold{}
	var order []uint16
	cluster := c.Mode() == rueidis.ClientModeCluster
	for _, h := range holds {
		var slot uint16
		if cluster {
			probe := c.B().Pttl().Key(h.Name).Build()
			slot = probe.Slot()
		}
		if _, ok := groups[slot]; !ok {
			order = append(order, slot)
		}
		groups[slot] = append(groups[slot], h)
	}
	leaseArg := ms(lease)
	for _, slot := range order {
		g := groups[slot]
		for len(g) > 0 {
			n := min(len(g), maxRenewBatch)
			chunk := g[:n]
			g = g[n:]
			keys := make([]string, n)
			args := make([]string, n+1)
			args[0] = leaseArg
			for i, h := range chunk {
				keys[i] = h.Name
				args[i+1] = h.Field
			}
			b.Cmds = append(b.Cmds, RenewScript.EvalSHA(c, keys, args))
			b.Holds = append(b.Holds, chunk)
			b.keys = append(b.keys, keys)
			b.args = append(b.args, args)
		}
	}
	return b
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
