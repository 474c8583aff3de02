package pubsub_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/pubsub"
)

// waitFor polls cond every 10ms (server state has no event), bounded.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// wake waits for w's next wake-up, bounded.
func wake(t *testing.T, w *pubsub.Waiter) pubsub.Reason {
	t.Helper()
	select {
	case r := <-w.C():
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no wake-up")
		return 0
	}
}

// Reconnect drops the connection on purpose: the waiters are woken, the
// channel is subscribed again on a new connection, and messages flow.
func TestHubReconnect(t *testing.T) {
	rc := client(t)
	broke := make(chan error, 4)
	h := pubsub.New(rc, pubsub.Options{OnReconnect: func(err error) { broke <- err }})
	defer h.Close()
	// With no connection yet there is nothing to close.
	if err := h.Reconnect(t.Context()); err != nil {
		t.Fatal(err)
	}
	ch := t.Name()
	w, err := h.Subscribe(t.Context(), ch)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := h.Reconnect(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-broke:
	case <-time.After(10 * time.Second):
		t.Fatal("Reconnect did not break the connection")
	}
	if r := wake(t, w); r != pubsub.Reconnect {
		t.Fatalf("woken by %v, want reconnect", r)
	}
	waitFor(t, "the re-subscription", func() bool { return numsub(t, rc, ch) == 1 })
	// The confirmation's wake-up may still be pending; then a message.
	for len(w.C()) > 0 {
		<-w.C()
	}
	publish(t, rc, ch, "0")
	if r := wake(t, w); r != pubsub.Message && r != pubsub.Reconnect {
		t.Fatalf("woken by %v", r)
	}
	h.Close()
	if err := h.Reconnect(t.Context()); !errors.Is(err, pubsub.ErrClosed) {
		t.Fatalf("Reconnect after Close: %v, want ErrClosed", err)
	}
}

// A Hub on rueidis's Sentinel client: after a failover, Reconnect moves
// the subscription to the new master, where rueidis now dedicates
// connections; without it the subscription stays on the old master,
// which no longer hears the new master's publishes.
func TestHubReconnectFollowsSentinelFailover(t *testing.T) {
	g := integration.RedisSentinel(t, integration.SentinelOptions{})
	ctx, cancel := context.WithTimeout(t.Context(), 25*time.Second)
	defer cancel()
	old, err := g.Master(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:  g.SentinelAddrs(),
		DisableCache: true,
		Dialer:       net.Dialer{Timeout: 2 * time.Second},
		Sentinel:     rueidis.SentinelOption{MasterSet: g.MasterSet(), Dialer: net.Dialer{Timeout: 2 * time.Second}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	h := pubsub.New(rc, pubsub.Options{})
	defer h.Close()
	ch := t.Name()
	w, err := h.Subscribe(ctx, ch)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	oldRC := integration.NewClient(t, old.DirectAddr())
	if n := numsub(t, oldRC, ch); n != 1 {
		t.Fatalf("NUMSUB %d on the master, want 1", n)
	}
	m, err := g.Failover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	current := func() string {
		for a := range rc.Nodes() {
			return a
		}
		return ""
	}
	waitFor(t, "rueidis to follow the failover", func() bool { return current() == m.DirectAddr() })
	newRC := integration.NewClient(t, m.DirectAddr())
	// The old master is still a master of its own for a while: the
	// subscription stayed there and hears nothing of the new master.
	if n := numsub(t, oldRC, ch); n != 1 {
		t.Fatalf("NUMSUB %d on the old master before Reconnect, want 1", n)
	}
	if n := publish(t, newRC, ch, "0"); n != 0 {
		t.Fatalf("a publish on the new master reached %d connections before Reconnect, want 0", n)
	}
	if err := h.Reconnect(ctx); err != nil {
		t.Fatal(err)
	}
	if r := wake(t, w); r != pubsub.Reconnect {
		t.Fatalf("woken by %v, want reconnect", r)
	}
	waitFor(t, "the subscription on the new master", func() bool { return numsub(t, newRC, ch) == 1 })
	if n := numsub(t, oldRC, ch); n != 0 {
		t.Fatalf("NUMSUB %d on the old master after Reconnect, want 0", n)
	}
	for len(w.C()) > 0 {
		<-w.C()
	}
	if n := publish(t, newRC, ch, "1"); n != 1 {
		t.Fatalf("a publish on the new master reached %d connections, want 1", n)
	}
	if r := wake(t, w); r != pubsub.Message && r != pubsub.Reconnect {
		t.Fatalf("woken by %v", r)
	}
}
