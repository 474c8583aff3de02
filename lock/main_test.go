package lock_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/lock"
)

// shared is one real redis-server for the tests that need no faults of
// their own; every test uses names of its own on it.
var shared *integration.Server

func TestMain(m *testing.M) {
	integration.Main(m, 1, integration.Options{}, func(s []*integration.Server) { shared = s[0] })
}

// name returns a lock name unique to the test.
func name(t testing.TB) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return strings.NewReplacer("/", ":", " ", "_").Replace(t.Name()) + ":" + hex.EncodeToString(b[:])
}

// newClient returns a Client on addr (the shared server by default),
// closed when the test ends.
func newClient(t testing.TB, cfg lock.Config, srv ...*integration.Server) *lock.Client {
	t.Helper()
	s := shared
	if len(srv) > 0 {
		s = srv[0]
	}
	if len(cfg.Addrs) == 0 {
		cfg.Addrs = []string{s.Addr()}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := lock.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Close(ctx) // ErrClosed when the test closed it itself
	})
	return c
}

// raw returns a plain rueidis client on the server's own port, for the
// test's own looks at Redis, closed when the test ends.
func raw(t testing.TB, srv ...*integration.Server) rueidis.Client {
	t.Helper()
	s := shared
	if len(srv) > 0 {
		s = srv[0]
	}
	return integration.NewClient(t, s.DirectAddr())
}

func do(t testing.TB, rc rueidis.Client, args ...string) rueidis.RedisResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return rc.Do(ctx, rc.B().Arbitrary(args[0]).Args(args[1:]...).Build())
}

func hgetInt(t testing.TB, rc rueidis.Client, key, field string) int64 {
	t.Helper()
	v, err := do(t, rc, "HGET", key, field).AsInt64()
	if rueidis.IsRedisNil(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func exists(t testing.TB, rc rueidis.Client, key string) bool {
	t.Helper()
	n, err := do(t, rc, "EXISTS", key).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// keys lists the keys that mention the test's lock name.
func keys(t testing.TB, rc rueidis.Client, name string) []string {
	t.Helper()
	ks, err := do(t, rc, "KEYS", "*"+name+"*").AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func bg() context.Context { return context.Background() }

// integrationRedis starts a server of the test's own, for faults.
func integrationRedis(t testing.TB, opts ...integration.Options) *integration.Server {
	t.Helper()
	var o integration.Options
	if len(opts) > 0 {
		o = opts[0]
	}
	return integration.Redis(t, o)
}
