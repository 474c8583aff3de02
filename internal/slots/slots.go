// Package slots reads which master of a Redis Cluster owns each hash
// slot (CLUSTER SLOTS), for the packages that must name or reach that
// master: pubsub (SSUBSCRIBE goes to the owner) and lock (errors and
// events name the node that answered, not the first seed).
package slots

import (
	"context"
	"net"
	"strconv"

	"github.com/redis/rueidis"
)

// Count is the number of hash slots of a Redis Cluster.
const Count = 16384

// Table maps each slot to its master's address.
type Table struct {
	Addrs []string // masters, indexed by Owner's values
	Owner []int16  // per slot, an index into Addrs; -1 when unknown
}

// Addr returns the address of slot's master, "" when unknown.
func (t Table) Addr(slot uint16) string {
	if int(slot) >= len(t.Owner) || t.Owner[slot] < 0 {
		return ""
	}
	return t.Addrs[t.Owner[slot]]
}

// Read asks c (a cluster client) for the slot owners with CLUSTER SLOTS.
func Read(ctx context.Context, c rueidis.Client) (Table, error) {
	ranges, err := c.Do(ctx, c.B().ClusterSlots().Build()).ToArray()
	if err != nil {
		return Table{}, err
	}
	return Parse(ranges), nil
}

// Parse builds a Table from CLUSTER SLOTS's answer; malformed entries are
// skipped.
func Parse(ranges []rueidis.RedisMessage) Table {
	t := Table{Owner: make([]int16, Count)}
	for i := range t.Owner {
		t.Owner[i] = -1
	}
	index := map[string]int16{}
	for _, r := range ranges {
		lo, hi, addr, ok := parseRange(r)
		if !ok {
			continue
		}
		i, known := index[addr]
		if !known {
			i = int16(len(t.Addrs))
			index[addr] = i
			t.Addrs = append(t.Addrs, addr)
		}
		for slot := lo; slot <= hi; slot++ {
			t.Owner[slot] = i
		}
	}
	return t
}

// parseRange reads one entry of CLUSTER SLOTS: {lo, hi, {ip, port, ...}, replicas...}.
func parseRange(r rueidis.RedisMessage) (lo, hi int64, addr string, ok bool) {
	f, err := r.ToArray()
	if err != nil || len(f) < 3 {
		return 0, 0, "", false
	}
	lo, err1 := f[0].AsInt64()
	hi, err2 := f[1].AsInt64()
	master, err3 := f[2].ToArray()
	if err1 != nil || err2 != nil || err3 != nil || len(master) < 2 || lo < 0 || hi >= Count {
		return 0, 0, "", false
	}
	ip, err1 := master[0].ToString()
	port, err2 := master[1].AsInt64()
	if err1 != nil || err2 != nil || ip == "" {
		return 0, 0, "", false
	}
	return lo, hi, net.JoinHostPort(ip, strconv.FormatInt(port, 10)), true
}

// Group groups items by slot (slot gives an item's), keeping their order
// within a slot and the slots in the order each first appears: one
// multi-key command or SSUBSCRIBE may only name keys or channels of one
// slot (rueidis's cluster builder panics otherwise, and a Cluster answers
// CROSSSLOT).
func Group[T any](items []T, slot func(T) uint16) [][]T {
	idx := map[uint16]int{}
	var groups [][]T
	for _, it := range items {
		s := slot(it)
		i, ok := idx[s]
		if !ok {
			i = len(groups)
			idx[s] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], it)
	}
	return groups
}
