package pubsub_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/pubsub"
)

// shardNumSub is PUBSUB SHARDNUMSUB of ch on one node.
func shardNumSub(t *testing.T, rc rueidis.Client, ch string) int64 {
	t.Helper()
	m, err := rc.Do(bg(), rc.B().PubsubShardnumsub().Channel(ch).Build()).AsIntMap()
	if err != nil {
		t.Fatal(err)
	}
	return m[ch]
}

// waitShardNumSub waits until ch has want subscribers on the node. The
// server sends no event for it: it is asked in a loop bounded by bound.
func waitShardNumSub(t *testing.T, rc rueidis.Client, ch string, want int64, what string) {
	t.Helper()
	deadline := time.Now().Add(bound)
	tk := time.NewTicker(5 * time.Millisecond)
	defer tk.Stop()
	for {
		n := shardNumSub(t, rc, ch)
		if n == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("SHARDNUMSUB %s never %d within %v (last %d): %s", ch, want, bound, n, what)
		}
		<-tk.C
	}
}

// spublish publishes a release of ch on one node; the node must have one
// subscriber for it.
func spublish(t *testing.T, rc rueidis.Client, ch string) {
	t.Helper()
	n, err := rc.Do(bg(), rc.B().Spublish().Channel(ch).Message("0").Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("SPUBLISH %s reached %d connections, want 1", ch, n)
	}
}

// nameOnSlots returns a channel name, prefixed prefix, whose slot is in
// [lo, hi] and differs from avoid.
func nameOnSlots(prefix string, lo, hi int, avoid ...string) string {
	for i := 0; ; i++ {
		n := fmt.Sprintf("%s:%d", prefix, i)
		s := int(pubsub.Slot(n))
		if s < lo || s > hi {
			continue
		}
		clash := false
		for _, a := range avoid {
			clash = clash || pubsub.Slot(a) == pubsub.Slot(n)
		}
		if !clash {
			return n
		}
	}
}

// A slot that moves to another master while a waiter waits on one of its
// channels (safety.md finding 18): the channel is re-subscribed on its new
// owner, its waiter is woken once that is confirmed, and the other
// channels of the old owner stay subscribed, also through the old owner's
// next re-subscription (after CLIENT KILL TYPE pubsub), which must not
// fail for all of them because of the moved one.
func TestShardsMovedSlot(t *testing.T) {
	cl := integration.RedisCluster(t, 3, integration.Options{})
	nodes := make([]rueidis.Client, 3)
	ids := make([]string, 3)
	for i, s := range cl.Nodes() {
		nodes[i] = integration.NewClient(t, s.DirectAddr())
		id, err := nodes[i].Do(bg(), nodes[i].B().ClusterMyid().Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: cl.Addrs(), DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	s := pubsub.NewShards(rc, pubsub.Options{})
	defer s.Close()

	// Node 0 owns the first third of the slots. x's slot moves to node 1;
	// y's stays.
	third := pubsub.Slots/3 - 1
	x := nameOnSlots(t.Name()+":x", 0, third)
	y := nameOnSlots(t.Name()+":y", 0, third, x)
	wx, err := s.Subscribe(bg(), x)
	if err != nil {
		t.Fatal(err)
	}
	defer wx.Close()
	wy, err := s.Subscribe(bg(), y)
	if err != nil {
		t.Fatal(err)
	}
	defer wy.Close()
	if shardNumSub(t, nodes[0], x) != 1 || shardNumSub(t, nodes[0], y) != 1 {
		t.Fatal("x and y not subscribed on node 0")
	}

	// Move x's (empty) slot from node 0 to node 1, as redis-cli --cluster
	// reshard does: IMPORTING, MIGRATING, then the new owner everywhere.
	slot := fmt.Sprint(pubsub.Slot(x))
	do := func(i int, args ...string) {
		t.Helper()
		if err := nodes[i].Do(bg(), nodes[i].B().Arbitrary(args...).Build()).Error(); err != nil {
			t.Fatalf("node %d: %s: %v", i, strings.Join(args, " "), err)
		}
	}
	do(1, "CLUSTER", "SETSLOT", slot, "IMPORTING", ids[0])
	do(0, "CLUSTER", "SETSLOT", slot, "MIGRATING", ids[1])
	for _, i := range []int{1, 0, 2} {
		do(i, "CLUSTER", "SETSLOT", slot, "NODE", ids[1])
	}

	// Node 0's connection breaks: its re-subscription must not fail for
	// y because x moved.
	if err := nodes[0].Do(bg(), nodes[0].B().ClientKill().TypePubsub().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	waitShardNumSub(t, nodes[0], y, 1, "y re-subscribed on node 0 after the break")
	// A wake-up for the re-subscription may still be pending: the
	// message's then joins it.
	spublish(t, nodes[0], y)
	next(t, wy, "y's release on node 0")

	// x's release after the move is published on its new owner; the
	// waiter hears it once re-subscribed there.
	waitShardNumSub(t, nodes[1], x, 1, "x re-subscribed on its new owner")
	if n := shardNumSub(t, nodes[0], x); n != 0 {
		t.Fatalf("x still subscribed on its old owner (%d)", n)
	}
	spublish(t, nodes[1], x)
	next(t, wx, "x's release on its new owner")
	if n := s.Channels(); n != 2 {
		t.Fatalf("%d channels, want 2", n)
	}
}
