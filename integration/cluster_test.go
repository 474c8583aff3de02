package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

func TestCluster(t *testing.T) {
	c := RedisCluster(t, 3, Options{})
	ctx := testCtx(t)
	for _, s := range c.Nodes() {
		info, err := command(ctx, s.DirectAddr(), "", "CLUSTER", "INFO")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_known_nodes:3") {
			t.Fatalf("node %s:\n%s", s.DirectAddr(), info)
		}
		if s.Addr() != s.DirectAddr() {
			t.Fatalf("node Addr %s, want its own port %s", s.Addr(), s.DirectAddr())
		}
		if err := s.Partition(ctx); !errors.Is(err, ErrNoProxy) {
			t.Fatalf("Partition on a cluster node: %v, want ErrNoProxy", err)
		}
	}

	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: c.Addrs(), DisableCache: true, Dialer: netDialer()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	if rc.Mode() != rueidis.ClientModeCluster {
		t.Fatalf("client mode %v", rc.Mode())
	}
	// Keys spread over the slots: each lands on exactly one node, and
	// every node gets some.
	perNode := map[string]int{}
	for i := range 30 {
		k := fmt.Sprintf("k%d", i)
		if err := rc.Do(ctx, rc.B().Set().Key(k).Value("v").Build()).Error(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
		owners := 0
		for _, s := range c.Nodes() {
			n, err := command(ctx, s.DirectAddr(), "", "CLUSTER", "COUNTKEYSINSLOT", slotOf(t, ctx, s, k))
			if err != nil {
				t.Fatal(err)
			}
			if n == "1" {
				owners++
				perNode[s.DirectAddr()]++
			}
		}
		if owners != 1 {
			t.Fatalf("key %s found on %d nodes", k, owners)
		}
	}
	if len(perNode) != 3 {
		t.Fatalf("keys per node: %v, want all three nodes used", perNode)
	}
}

func slotOf(t *testing.T, ctx context.Context, s *Server, key string) string {
	t.Helper()
	slot, err := command(ctx, s.DirectAddr(), "", "CLUSTER", "KEYSLOT", key)
	if err != nil {
		t.Fatal(err)
	}
	return slot
}

func TestClusterRefusesDocker(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := StartCluster(ctx, 3, Options{Backend: BackendDocker}); err == nil {
		t.Fatal("cluster on the docker backend: no error")
	}
}
