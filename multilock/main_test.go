package multilock_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/internal/leakcheck"
	"github.com/rlock-go/rlock/lock"
)

// shared are five real redis-server masters for the tests, examples and
// benchmarks that inject no faults; each uses lock names of its own.
var shared []*integration.Server

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(withServers{m}) }

// withServers starts the shared masters around the tests, so that the leak
// check runs after they are stopped.
type withServers struct{ m *testing.M }

func (w withServers) Run() int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	servers, err := integration.StartMasters(ctx, 5, integration.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "multilock tests need redis-server (Debian: apt-get install redis-server):", err)
		return 1
	}
	shared = servers
	integration.WatchStalls()
	code := w.m.Run()
	integration.StopStalls()
	for _, s := range shared {
		if err := s.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "close redis-server:", err)
			code = 1
		}
	}
	return code
}

// name returns a lock name unique to the test.
func name(t testing.TB) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return strings.NewReplacer("/", ":", " ", "_").Replace(t.Name()) + ":" + hex.EncodeToString(b[:])
}

// clients makes one lock.Client per server, closed when the test ends.
func clients(t testing.TB, servers []*integration.Server, cfg lock.Config) []*lock.Client {
	t.Helper()
	cs := make([]*lock.Client, len(servers))
	for i, s := range servers {
		c := cfg
		c.Addrs = []string{s.Addr()}
		cl, err := lock.New(context.Background(), c)
		if err != nil {
			t.Fatalf("lock.New(%s): %v", s.Addr(), err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = cl.Close(ctx)
		})
		cs[i] = cl
	}
	return cs
}

// mutexes returns the Mutex called name on every Client.
func mutexes(cs []*lock.Client, name string) []*lock.Mutex {
	ms := make([]*lock.Mutex, len(cs))
	for i, c := range cs {
		ms[i] = c.Mutex(name)
	}
	return ms
}

// raws returns plain rueidis clients on the servers' direct addresses
// (not through their fault-injecting proxies), to look at the keys.
func raws(t testing.TB, servers []*integration.Server) []rueidis.Client {
	t.Helper()
	rs := make([]rueidis.Client, len(servers))
	for i, s := range servers {
		rc, err := rueidis.NewClient(rueidis.ClientOption{
			InitAddress: []string{s.DirectAddr()}, ForceSingleClient: true, DisableCache: true,
		})
		if err != nil {
			t.Fatalf("rueidis on %s: %v", s.DirectAddr(), err)
		}
		t.Cleanup(rc.Close)
		rs[i] = rc
	}
	return rs
}

// exists reports on which masters the key exists.
func exists(t testing.TB, rs []rueidis.Client, key string) []bool {
	t.Helper()
	out := make([]bool, len(rs))
	for i, rc := range rs {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		n, err := rc.Do(ctx, rc.B().Exists().Key(key).Build()).AsInt64()
		cancel()
		if err != nil {
			t.Fatalf("EXISTS on master %d: %v", i, err)
		}
		out[i] = n == 1
	}
	return out
}

// count returns how many of bs are true.
func count(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// bg is a fresh context for a test's calls, ended with the test.
func bg(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}
