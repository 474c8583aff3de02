package lock

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/reentrant"
)

// A release whose answers are lost is sent again only while its latch
// lives: a copy that ran after the latch expired would release a second
// hold of the owner's, deleting the key while the outer hold is live, and
// another client could be granted before the owner reads the reply. The
// model's M6 (docs/model). It failed before the retry horizon: Unlock kept
// sending copies for as long as the outer hold was renewed.
func TestReleaseRetriesStopWhileTheirLatchLives(t *testing.T) {
	srv := integration.Redis(t, integration.Options{})
	ctx := context.Background()
	c, err := New(ctx, Config{Addrs: []string{srv.Addr()}, CommandTimeout: 100 * time.Millisecond, WatchdogTimeout: 400 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	c.e.recordMin = 0 // records live 4 leases + 4 command timeouts: 2 s
	other, err := New(ctx, Config{Addrs: []string{srv.DirectAddr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	rc := integration.NewClient(t, srv.DirectAddr())
	n := "horizon:" + t.Name()
	outer, err := c.Mutex(n).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := c.Mutex(n).Lock(outer.Context())
	if err != nil {
		t.Fatal(err)
	}
	release := func(cmd []string) bool {
		return len(cmd) > 3 && strings.EqualFold(cmd[0], "EVALSHA") && cmd[1] == reentrant.ReleaseScript.SHA1() && slices.Contains(cmd, n)
	}
	// The first release runs and its reply is lost; every copy after it
	// is lost on its way, until the test removes the fault.
	var first, later atomic.Bool
	mustInject(t, srv, integration.Rule{Match: integration.MatchFunc(func(cmd []string) bool {
		return release(cmd) && first.CompareAndSwap(false, true)
	}), Action: integration.DropReply})
	drop := mustInject(t, srv, integration.Rule{Match: integration.MatchFunc(func(cmd []string) bool {
		return release(cmd) && !later.CompareAndSwap(false, true) // all but the first
	}), Action: integration.DropRequest, Times: 1 << 30})
	unlocked := make(chan error, 1)
	go func() { unlocked <- inner.Unlock(ctx) }()

	// The first release's latch appears, then expires.
	latch := "redisson_unlock_latch:{" + n + "}:*"
	waitFor(t, 5*time.Second, "the first release's latch", func() bool { return len(scan(t, rc, latch)) > 0 })
	waitFor(t, 10*time.Second, "the latch to expire", func() bool { return len(scan(t, rc, latch)) == 0 })
	// Copies reach Redis again; the reply of one that runs now is slow,
	// so that another client may ask before the owner reads it.
	drop.Remove()
	mustInject(t, srv, integration.Rule{Match: integration.MatchFunc(release), Action: integration.DelayReply(time.Second)})
	deadline := time.Now().Add(5 * time.Second)
	for {
		select {
		case err := <-unlocked:
			if err != nil && !errors.Is(err, ErrUnavailable) {
				t.Fatalf("inner Unlock = %v", err)
			}
			<-inner.Done()
			if errors.Is(context.Cause(inner.Context()), ErrLockLost) && !errors.Is(context.Cause(outer.Context()), ErrLockLost) {
				t.Fatalf("inner lost, outer not: %v", context.Cause(inner.Context()))
			}
			if alive := outer.Context().Err() == nil; alive {
				if got, _ := rc.Do(ctx, rc.B().Hget().Key(n).Field(outer.l.field).Build()).AsInt64(); got != 1 {
					t.Fatalf("outer hold live, Redis counts %d holds", got)
				}
			}
			return
		default:
		}
		if outer.Context().Err() == nil {
			if g, err := other.Mutex(n).TryLock(ctx); err == nil {
				_ = g.Unlock(ctx)
				t.Fatal("another client was granted the lock while the outer hold was live and not told: the release ran twice")
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("inner Unlock did not return")
		}
		// Polled: a free key in Redis sends no signal, and the window
		// in which another client could be granted is what is probed.
		time.Sleep(20 * time.Millisecond)
	}
}

func mustInject(t *testing.T, srv *integration.Server, r integration.Rule) *integration.Fault {
	t.Helper()
	f, err := srv.Inject(r)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Remove)
	return f
}

// waitFor polls cond (a condition in Redis, which sends no signal) until
// it holds, or fails the test after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("waited %v for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func scan(t *testing.T, rc rueidis.Client, pattern string) []string {
	t.Helper()
	ks, err := rc.Do(context.Background(), rc.B().Keys().Pattern(pattern).Build()).AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	return ks
}
