package lock

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlock-go/rlock/integration"
)

// Found by review of f0b73ea: with no live Held and two holds Redis
// counts for nobody, a new acquisition first releases one (known). When
// the caller's ctx cut that release (its request delayed, here), the
// acquire still "went out": rueidis refused it (the ctx had ended), but
// it was recorded as unsettled in place of the release, which was then
// never settled nor fenced. The delayed release landed later and took
// the hold of the owner's next Lock: another Client was granted the lock
// while that Held was live. Now no acquire goes out while a request of
// the field is unsettled: the call fails, and the release is settled
// first.
func TestAcquireAfterACutReleaseOfStrays(t *testing.T) {
	srv := integration.Redis(t, integration.Options{})
	mk := func() *Client {
		c, err := New(context.Background(), Config{Addrs: []string{srv.Addr()}, CommandTimeout: time.Second, WatchdogTimeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = c.Close(ctx)
		})
		return c
	}
	c, other := mk(), mk()
	n := "knowncut:" + t.Name()
	ctx := WithOwner(context.Background())
	m := c.Mutex(n)
	h1, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h2, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Two holds nobody has: their Helds end without a release (as when
	// an acquire that ran after its caller gave up was settled twice).
	l := h1.l
	l.use()
	defer l.unuse()
	if err := l.take(context.Background(), nil, nil); err != nil {
		t.Fatal(err)
	}
	l.endHeld(h1, nil)
	l.endHeld(h2, nil)
	l.give()

	var once atomic.Bool
	delayed, err := srv.Inject(integration.Rule{Match: integration.MatchFunc(func(cmd []string) bool {
		return len(cmd) > 3 && strings.EqualFold(cmd[0], "EVALSHA") && slices.Contains(cmd, n) && slices.Contains(cmd, "PUBLISH") && once.CompareAndSwap(false, true)
	}), Action: integration.DelayRequest(600 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	defer delayed.Remove()
	lctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err = m.Lock(lctx)
	cancel()
	t.Logf("Lock(100 ms) while its release of a stray is delayed: %v", err)
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	if n := c.settling.wait(wctx); n > 0 {
		t.Fatalf("%d settlers still running after 10 s", n)
	}
	h3, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = h3.Unlock(context.Background()) }()
	if err := delayed.Wait(wctx); err != nil { // the delayed release is forwarded
		t.Fatal(err)
	}
	if _, err := other.Mutex(n).IsLocked(context.Background()); err != nil { // a round trip after it
		t.Fatal(err)
	}
	if g, err := other.Mutex(n).TryLock(context.Background()); err == nil {
		_ = g.Unlock(context.Background())
		t.Fatalf("double grant: another Client took %q while a Held of it is live (its context done: %v)", n, h3.Context().Err() != nil)
	}
}
