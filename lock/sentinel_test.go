package lock_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/reentrant"
)

// Redis Sentinel (Config.MasterSet, issue 17), against real redis-server
// and redis-sentinel processes: one master, two replicas, three
// sentinels. The servers require password "pw", the sentinels "spw".

const (
	serverPW   = "pw"
	sentinelPW = "spw"
)

func sentinelGroup(t *testing.T) *integration.SentinelGroup {
	t.Helper()
	return integration.RedisSentinel(t, integration.SentinelOptions{Password: serverPW, SentinelPassword: sentinelPW})
}

// viaSentinel is cfg connecting through g's sentinels.
func viaSentinel(g *integration.SentinelGroup, cfg lock.Config) lock.Config {
	cfg.MasterSet, cfg.Addrs = g.MasterSet(), g.SentinelAddrs()
	cfg.Password, cfg.SentinelPassword = serverPW, sentinelPW
	return cfg
}

// sctx bounds a Sentinel test.
func sctx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg(), 25*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond every 20ms until it holds, failing the test after
// 10s: for server state that has no event (which master rueidis talks
// to, where a subscription is).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	pollUntil(t, 10*time.Second, what, cond)
}

// pollUntil is eventually with a deadline of d.
func pollUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func field(c *lock.Client, h *lock.Held) string { return reentrant.Field(c.ID(), h.Owner()) }

func pttl(t *testing.T, rc rueidis.Client, key string) time.Duration {
	t.Helper()
	ms, err := do(t, rc, "PTTL", key).AsInt64()
	must(t, err)
	return time.Duration(ms) * time.Millisecond
}

func numsubOn(t *testing.T, rc rueidis.Client, channel string) int64 {
	t.Helper()
	m, err := rc.Do(bg(), rc.B().PubsubNumsub().Channel(channel).Build()).AsIntMap()
	must(t, err)
	return m[channel]
}

func scriptOn(t *testing.T, rc rueidis.Client, sha string) bool {
	t.Helper()
	v, err := do(t, rc, "SCRIPT", "EXISTS", sha).AsIntSlice()
	must(t, err)
	return len(v) == 1 && v[0] == 1
}

// TestSentinel: locks through the sentinels, the errors of a bad
// deployment or Config, and what a replica given as a master does. One
// deployment, no failover.
func TestSentinel(t *testing.T) {
	g := sentinelGroup(t)
	ctx := sctx(t)
	master, err := g.Master(ctx)
	must(t, err)
	rc := integration.NewClient(t, master.DirectAddr(), serverPW)

	t.Run("LockUnlock", func(t *testing.T) {
		c := newClient(t, viaSentinel(g, lock.Config{}))
		if c.Addr() != master.DirectAddr() {
			t.Fatalf("Addr() = %s, want the master %s", c.Addr(), master.DirectAddr())
		}
		m := c.Mutex(name(t))
		h, err := m.Lock(ctx)
		must(t, err)
		inner, err := m.Lock(h.Context())
		must(t, err)
		if n := hgetInt(t, rc, m.Name(), field(c, h)); n != 2 {
			t.Fatalf("hold count %d on the master, want 2", n)
		}
		must(t, inner.Unlock(ctx))
		must(t, h.Unlock(ctx))
		if exists(t, rc, m.Name()) {
			t.Fatal("lock still on the master after Unlock")
		}
	})

	t.Run("FromClient", func(t *testing.T) {
		opt := func(replicaOnly bool) rueidis.ClientOption {
			return rueidis.ClientOption{InitAddress: g.SentinelAddrs(), Password: serverPW, DisableCache: true,
				ReplicaOnly: replicaOnly, Dialer: net.Dialer{Timeout: 2 * time.Second},
				Sentinel: rueidis.SentinelOption{MasterSet: g.MasterSet(), Password: sentinelPW}}
		}
		src, err := rueidis.NewClient(opt(false))
		must(t, err)
		defer src.Close()
		c, err := lock.FromClient(src, lock.Config{})
		must(t, err)
		if c.Addr() != master.DirectAddr() {
			t.Fatalf("Addr() = %s, want the master %s", c.Addr(), master.DirectAddr())
		}
		h, err := c.Mutex(name(t)).Lock(ctx)
		must(t, err)
		if !exists(t, rc, h.Name()) {
			t.Fatal("lock not on the master")
		}
		must(t, h.Unlock(ctx))
		must(t, c.Close(ctx))
		must(t, src.Do(ctx, src.B().Ping().Build()).Error()) // Close left it open

		// A client reading from a replica is refused, not used.
		ro, err := rueidis.NewClient(opt(true))
		must(t, err)
		defer ro.Close()
		_, err = lock.FromClient(ro, lock.Config{})
		if !errors.Is(err, lock.ErrInvalid) || !strings.Contains(err.Error(), "replica") {
			t.Fatalf("FromClient of a ReplicaOnly sentinel client: %v, want ErrInvalid naming the replica", err)
		}
	})

	t.Run("ConnectErrors", func(t *testing.T) {
		closed := func() string { // a loopback port nobody listens on
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			must(t, err)
			a := ln.Addr().String()
			must(t, ln.Close())
			return a
		}
		const dial = time.Second
		cases := []struct {
			name  string
			cfg   func(lock.Config) lock.Config
			kind  error
			words []string
		}{
			{"WrongMasterSet", func(c lock.Config) lock.Config { c.MasterSet = "nosuch"; return c },
				lock.ErrInvalid, []string{`"nosuch"`, "monitor no master set"}},
			{"UnreachableSentinels", func(c lock.Config) lock.Config { c.Addrs = []string{closed(), closed()}; return c },
				lock.ErrUnavailable, []string{"connection refused"}},
			{"NotASentinel", func(c lock.Config) lock.Config {
				c.Addrs = []string{master.DirectAddr()}
				c.SentinelPassword = serverPW
				return c
			},
				lock.ErrInvalid, []string{"not a sentinel"}},
			{"WrongSentinelPassword", func(c lock.Config) lock.Config { c.SentinelPassword = "wrong"; return c },
				lock.ErrAuth, []string{"WRONGPASS", "SentinelPassword"}},
			{"NoSentinelPassword", func(c lock.Config) lock.Config { c.SentinelPassword = ""; return c },
				lock.ErrAuth, []string{"NOAUTH"}},
			{"WrongMasterPassword", func(c lock.Config) lock.Config { c.Password = "wrong"; return c },
				lock.ErrAuth, []string{"WRONGPASS", "Password"}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				cfg := tc.cfg(viaSentinel(g, lock.Config{DialTimeout: dial}))
				start := time.Now()
				c, err := lock.New(ctx, cfg)
				took := time.Since(start)
				if err == nil {
					_ = c.Close(ctx)
					t.Fatal("New succeeded")
				}
				if !errors.Is(err, tc.kind) {
					t.Fatalf("New: %v, want %v", err, tc.kind)
				}
				for _, w := range append(tc.words, `master set "`+cfg.MasterSet+`"`) {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
				checkOneLine(t, err)
				if took > dial { // all of them answer (or refuse) at once
					t.Errorf("New took %v, more than DialTimeout %v", took, dial)
				}
			})
		}
		// Sentinels that accept connections but answer nothing: New ends
		// with the DialTimeout, shared among them.
		t.Run("PausedSentinels", func(t *testing.T) {
			for _, s := range g.Sentinels() {
				must(t, s.Pause(ctx))
				defer func() { must(t, s.Resume(ctx)) }()
			}
			start := time.Now()
			_, err := lock.New(ctx, viaSentinel(g, lock.Config{DialTimeout: dial}))
			took := time.Since(start)
			if !errors.Is(err, lock.ErrUnavailable) {
				t.Fatalf("New with paused sentinels: %v, want ErrUnavailable", err)
			}
			// Within DialTimeout; twice that allows for a loaded machine.
			if took > 2*dial {
				t.Errorf("New took %v with DialTimeout %v", took, dial)
			}
		})
	})

	t.Run("ConfigRefused", func(t *testing.T) {
		named := func(set string) lock.Config {
			cfg := viaSentinel(g, lock.Config{})
			cfg.MasterSet = set
			return cfg
		}
		for _, cfg := range []lock.Config{
			viaSentinel(g, lock.Config{Cluster: true}),
			{Addrs: []string{master.DirectAddr()}, SentinelPassword: "x"},
			{Addrs: []string{master.DirectAddr()}, SentinelUsername: "x"},
			{MasterSet: g.MasterSet()},
			named("my master"),
			named("m\x00"),
			named(" mymaster"),
		} {
			c, err := lock.New(ctx, cfg)
			if err == nil {
				_ = c.Close(ctx)
			}
			if !errors.Is(err, lock.ErrInvalid) {
				t.Errorf("New(%+v): %v, want ErrInvalid", cfg, err)
			}
		}
	})

	// A replica given as a standalone master: New refuses it at once, an
	// ErrUnavailable naming it as a replica (issue 28, row 26). A Client
	// whose master is demoted after it was made (here FromClient, which
	// asks nothing) finds out from the first acquire's READONLY, which
	// rlock reads as a failover in progress: an ErrUnavailable naming the
	// replica, after riding it out until the ctx ends (TryLock) or past
	// the failover window (Lock).
	t.Run("ReplicaAsMaster", func(t *testing.T) {
		var replica *integration.Server
		for _, s := range g.Servers() {
			if s != master {
				replica = s
			}
		}
		_, err := lock.New(ctx, lock.Config{Addrs: []string{replica.DirectAddr()}, Password: serverPW})
		if !errors.Is(err, lock.ErrUnavailable) || !strings.Contains(err.Error(), replica.DirectAddr()+" is a replica of ") {
			t.Fatalf("New on a replica: %v, want ErrUnavailable naming it as a replica", err)
		}
		src, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{replica.DirectAddr()}, Password: serverPW, DisableCache: true})
		must(t, err)
		defer src.Close()
		// A short CommandTimeout: Close settles the refused request,
		// READONLY again, for two of them.
		c, err := lock.FromClient(src, lock.Config{CommandTimeout: 250 * time.Millisecond})
		must(t, err)
		defer func() { _ = c.Close(bg()) }()
		n := name(t)
		actx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		_, err = c.Mutex(n).TryLock(actx)
		if !errors.Is(err, lock.ErrUnavailable) || !errors.Is(err, lock.ErrNotAcquired) {
			t.Fatalf("TryLock on a replica: %v, want ErrNotAcquired and ErrUnavailable", err)
		}
		for _, w := range []string{"READONLY", "is a replica", replica.DirectAddr()} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q does not say %q", err, w)
			}
		}
		checkOneLine(t, err)
		if exists(t, rc, n) {
			t.Fatal("a lock appeared on the master")
		}
	})
}
