package pubsub

import (
	"context"
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
