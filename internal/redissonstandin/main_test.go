package redissonstandin_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/integration"
	rs "github.com/rlock-go/rlock/internal/redissonstandin"
)

// shared is one real redis-server for all tests; each uses names of its own.
var shared *integration.Server

// TestMain starts the server and, after the tests, checks for leaked
// goroutines (internal/leakcheck, through integration.Main).
func TestMain(m *testing.M) {
	integration.Main(m, 1, integration.Options{}, func(s []*integration.Server) { shared = s[0] })
}

// name is a lock name unique to the call, free of glob characters.
func name() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "rs:" + hex.EncodeToString(b[:])
}

func raw(t testing.TB) rueidis.Client {
	t.Helper()
	return integration.NewClient(t, shared.DirectAddr())
}

func bg() context.Context { return context.Background() }

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func do(t testing.TB, rc rueidis.Client, args ...string) rueidis.RedisResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg(), 5*time.Second)
	defer cancel()
	return rc.Do(ctx, rc.B().Arbitrary(args[0]).Args(args[1:]...).Build())
}

func pttl(t testing.TB, rc rueidis.Client, key string) int64 {
	t.Helper()
	v, err := do(t, rc, "PTTL", key).AsInt64()
	must(t, err)
	return v
}

func hash(t testing.TB, rc rueidis.Client, key string) map[string]string {
	t.Helper()
	m, err := do(t, rc, "HGETALL", key).AsStrMap()
	must(t, err)
	return m
}

func list(t testing.TB, rc rueidis.Client, key string) []string {
	t.Helper()
	v, err := do(t, rc, "LRANGE", key, "0", "-1").AsStrSlice()
	must(t, err)
	return v
}

func score(t testing.TB, rc rueidis.Client, key, member string) int64 {
	t.Helper()
	v, err := do(t, rc, "ZSCORE", key, member).AsInt64()
	must(t, err)
	return v
}

func exists(t testing.TB, rc rueidis.Client, key string) bool {
	t.Helper()
	n, err := do(t, rc, "EXISTS", key).AsInt64()
	must(t, err)
	return n == 1
}

// equal fails unless got and want are equal maps.
func equalMap(t testing.TB, what string, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("%s = %v, want %v", what, got, want)
		}
	}
}

func equalList(t testing.TB, what string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s = %q, want %q", what, got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%s = %q, want %q", what, got, want)
		}
	}
}

// between fails unless lo <= v <= hi.
func between(t testing.TB, what string, v, lo, hi int64) {
	t.Helper()
	if v < lo || v > hi {
		t.Fatalf("%s = %d, want in [%d, %d]", what, v, lo, hi)
	}
}

// clock is a settable client clock for the fair lock's scripts.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.UnixMilli(time.Now().UnixMilli())} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

func (c *clock) ms() int64 { return c.Now().UnixMilli() }

// message is one published message.
type message struct{ channel, text string }

// sub listens on a pattern from before it returns until the test ends.
type sub struct {
	msgs chan message
}

// psubscribe listens to every channel matching pattern.
func psubscribe(t testing.TB, pattern string) *sub {
	t.Helper()
	rc := raw(t)
	s := &sub{msgs: make(chan message, 64)}
	ready := make(chan struct{})
	ctx, cancel := context.WithCancel(bg())
	done := make(chan error, 1)
	var once sync.Once
	go func() {
		hook := rueidis.WithOnSubscriptionHook(ctx, func(ps rueidis.PubSubSubscription) {
			if ps.Kind == "psubscribe" {
				once.Do(func() { close(ready) })
			}
		})
		done <- rc.Receive(hook, rc.B().Psubscribe().Pattern(pattern).Build(), func(m rueidis.PubSubMessage) {
			s.msgs <- message{m.Channel, m.Message}
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("psubscribe %s: %v", pattern, err)
	case <-time.After(10 * time.Second):
		t.Fatalf("psubscribe %s: no confirmation", pattern)
	}
	return s
}

// next is the next message, failing after a deadline.
func (s *sub) next(t testing.TB) message {
	t.Helper()
	select {
	case m := <-s.msgs:
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no message within 10s")
	}
	return message{}
}

// expect fails unless the next message is text on channel.
func (s *sub) expect(t testing.TB, channel, text string) {
	t.Helper()
	if m := s.next(t); m.channel != channel || m.text != text {
		t.Fatalf("message %q on %q, want %q on %q", m.text, m.channel, text, channel)
	}
}

// marker publishes a message of the test's own on channel and expects it
// next: everything the scripts published before it has arrived, so
// "nothing else was published" can be checked without sleeping.
func (s *sub) marker(t testing.TB, rc rueidis.Client, channel string) {
	t.Helper()
	must(t, do(t, rc, "PUBLISH", channel, "marker").Error())
	if m := s.next(t); m.channel != channel || m.text != "marker" {
		t.Fatalf("message %q on %q, want only the marker on %q", m.text, m.channel, channel)
	}
}

func newClient(rc rueidis.Client, v rs.Version, now func() time.Time) *rs.Client {
	return rs.New(rc, rs.Options{Version: v, Now: now})
}
