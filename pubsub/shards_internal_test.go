package pubsub

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/integration"
)

// A slot table that names the wrong master (as after a resharding) is
// corrected by the MOVED answer to SSUBSCRIBE: the Subscribe is retried
// on the master the answer names, and a SPUBLISH reaches the waiter.
func TestShardsFollowMoved(t *testing.T) {
	cl := integration.RedisCluster(t, 3, integration.Options{})
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: cl.Addrs()[:1], DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	s := NewShards(rc, Options{})
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	name := t.Name()
	slot := Slot(name)
	if err := s.refresh(ctx); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	right := s.owner[slot]
	s.owner[slot] = (right + 1) % int16(len(s.addrs)) // a wrong master
	s.mu.Unlock()

	w, err := s.Subscribe(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	s.mu.Lock()
	fixed := s.owner[slot]
	hubs := len(s.hubs)
	s.mu.Unlock()
	if fixed != right || hubs != 2 {
		t.Fatalf("owner %d (want %d), %d hubs (want 2: the wrong one, then the owner)", fixed, right, hubs)
	}
	if err := rc.Do(ctx, rc.B().Spublish().Channel(name).Message("0").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if r := <-w.C(); r != Message {
		t.Fatalf("woken by %v", r)
	}
	if n := s.Channels(); n != 1 {
		t.Fatalf("%d channels, want 1", n)
	}
}

// A slot that moved while a Hub's connection was broken (so the node's
// sunsubscribe never reached it) is answered MOVED in the Hub's
// re-subscription: that channel goes to its new owner, and the Hub's other
// channels are re-subscribed all the same (safety.md finding 18). The test
// holds the Hub's connection lock to keep the re-subscription back until
// the slot has moved.
func TestShardsResubscriptionSurvivesMovedSlot(t *testing.T) {
	cl := integration.RedisCluster(t, 3, integration.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nodes := make([]rueidis.Client, 3)
	ids := make([]string, 3)
	for i, s := range cl.Nodes() {
		nodes[i] = integration.NewClient(t, s.DirectAddr())
		id, err := nodes[i].Do(ctx, nodes[i].B().ClusterMyid().Build()).ToString()
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
	broke := make(chan error, 8)
	s := NewShards(rc, Options{OnReconnect: func(err error) { broke <- err }})
	defer s.Close()

	// x and y on node 0 (the first third of the slots), on two slots.
	var x, y string
	for i := 0; y == ""; i++ {
		n := fmt.Sprintf("%s:%d", t.Name(), i)
		if Slot(n) >= Slots/3 {
			continue
		}
		if x == "" {
			x = n
		} else if Slot(n) != Slot(x) {
			y = n
		}
	}
	wx, err := s.Subscribe(ctx, x)
	if err != nil {
		t.Fatal(err)
	}
	defer wx.Close()
	wy, err := s.Subscribe(ctx, y)
	if err != nil {
		t.Fatal(err)
	}
	defer wy.Close()
	s.mu.Lock()
	h0 := s.hubs[cl.Addrs()[0]]
	s.mu.Unlock()
	if h0 == nil {
		t.Fatal("no Hub for node 0")
	}

	// Hold the re-subscription back, break the connection, move x's slot.
	if err := h0.lockSub(ctx); err != nil {
		t.Fatal(err)
	}
	if err := nodes[0].Do(ctx, nodes[0].B().ClientKill().TypePubsub().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	<-broke
	slot := fmt.Sprint(Slot(x))
	for _, c := range []struct {
		i    int
		args []string
	}{
		{1, []string{"IMPORTING", ids[0]}},
		{0, []string{"MIGRATING", ids[1]}},
		{1, []string{"NODE", ids[1]}},
		{0, []string{"NODE", ids[1]}},
		{2, []string{"NODE", ids[1]}},
	} {
		args := append([]string{"CLUSTER", "SETSLOT", slot}, c.args...)
		if err := nodes[c.i].Do(ctx, nodes[c.i].B().Arbitrary(args...).Build()).Error(); err != nil {
			t.Fatalf("node %d: %v: %v", c.i, args, err)
		}
	}
	for _, w := range []*Waiter{wx, wy} {
		<-w.C() // the wake-up at the break
	}
	h0.unlockSub()

	// Both are woken once re-subscribed, y on node 0, x on node 1, and
	// releases reach them there.
	for _, c := range []struct {
		w    *Waiter
		node int
		name string
	}{{wy, 0, y}, {wx, 1, x}} {
		tm := time.NewTimer(10 * time.Second)
		select {
		case <-c.w.C():
		case <-tm.C:
			t.Fatalf("%s not woken after the re-subscription", c.name)
		}
		tm.Stop()
		n, err := nodes[c.node].Do(ctx, nodes[c.node].B().Spublish().Channel(c.name).Message("0").Build()).AsInt64()
		if err != nil || n != 1 {
			t.Fatalf("SPUBLISH %s on node %d reached %d, %v; want 1", c.name, c.node, n, err)
		}
		select {
		case <-c.w.C():
		case <-ctx.Done():
			t.Fatalf("%s: release not heard", c.name)
		}
	}
	if n := len(broke); n != 0 {
		t.Fatalf("%d more reconnects of node 0's Hub, want 0", n)
	}
}
