package lock_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/reentrant"
)

// Regression tests that lose or delay one request or reply with the
// integration fault proxy (safety findings 2, 8, 14a). They use only
// calls that db82bdb had, and failed there.

// isAcquire matches an acquire script of the lock called name: an
// EVALSHA that names it, is no renewal, publishes nothing (a release
// does), and has other than 2 keys (a settlement has 2).
func isAcquire(name string) integration.MatchFunc {
	return func(cmd []string) bool {
		return len(cmd) > 3 && strings.EqualFold(cmd[0], "EVALSHA") && cmd[2] != "2" && cmd[1] != reentrant.RenewScript.SHA1() &&
			slices.Contains(cmd, name) && !slices.Contains(cmd, "PUBLISH") && !slices.Contains(cmd, "SPUBLISH")
	}
}

// isRelease matches a release script of the lock called name.
func isRelease(name string) integration.MatchFunc {
	return func(cmd []string) bool {
		return len(cmd) > 3 && strings.EqualFold(cmd[0], "EVALSHA") && slices.Contains(cmd, name) && slices.Contains(cmd, "PUBLISH")
	}
}

func inject(t *testing.T, srv *integration.Server, r integration.Rule) *integration.Fault {
	t.Helper()
	f, err := srv.Inject(r)
	must(t, err)
	t.Cleanup(f.Remove)
	return f
}

// Finding 2: the undo of an acquire whose request was lost must not
// remove the hold of the caller's immediate retry with the same owner.
func TestUndoOfALostAcquireSparesTheRetry(t *testing.T) {
	srv := integrationRedis(t)
	c := newClient(t, lock.Config{CommandTimeout: 100 * time.Millisecond}, srv)
	other := newClient(t, lock.Config{}, srv)
	rc := raw(t, srv)
	for round := 0; round < 20; round++ {
		n := name(t)
		ctx := lock.WithOwner(bg())
		owner, _ := lock.OwnerFrom(ctx)
		// One acquire of n is lost (never reaches Redis; the connection
		// is reset).
		inject(t, srv, integration.Rule{Match: isAcquire(n), Action: integration.DropRequest})
		h, err := c.Mutex(n).Lock(ctx)
		if err != nil {
			if !errors.Is(err, lock.ErrUnavailable) {
				t.Fatalf("Lock with one acquire lost = %v", err)
			}
			h, err = c.Mutex(n).Lock(ctx) // the caller's retry, at once, same owner
			must(t, err)
		}
		time.Sleep(200 * time.Millisecond) // room for an undo in flight to land
		if got := hgetInt(t, rc, n, reentrant.Field(c.ID(), owner)); got != 1 {
			t.Fatalf("round %d: the Held is live but Redis counts %d holds", round, got)
		}
		if g, err := other.Mutex(n).TryLock(bg()); err == nil {
			_ = g.Unlock(bg())
			t.Fatalf("round %d: another client was granted the lock the retry holds", round)
		}
		must(t, h.Unlock(bg()))
	}
}

// Finding 8: an acquire answered after its lease ran out never returns a
// Held that another client can contradict.
func TestAcquireAnsweredAfterItsLease(t *testing.T) {
	for _, explicit := range []bool{false, true} {
		t.Run(map[bool]string{false: "watchdog", true: "lease"}[explicit], func(t *testing.T) {
			// A try in which a stall of the process, not the answer's
			// delay, let the lease run out is void and made again, up
			// to three in all.
			integration.Tries(t, 3, func(k int) bool {
				return acquireAnsweredAfterItsLease(t, explicit, fmt.Sprintf("%s:%d", name(t), k))
			})
		})
	}
}

// acquireAnsweredAfterItsLease is one try of
// TestAcquireAnsweredAfterItsLease on lock name n; it reports whether it
// was void.
func acquireAnsweredAfterItsLease(t *testing.T, explicit bool, n string) (void bool) {
	t.Helper()
	srv := integrationRedis(t)
	lease := 300 * time.Millisecond
	cfg := lock.Config{CommandTimeout: time.Second}
	var opts []lock.Option
	if explicit {
		opts = append(opts, lock.Lease(lease))
	} else {
		cfg = lock.Config{WatchdogTimeout: lease, RenewInterval: 100 * time.Millisecond, CommandTimeout: 150 * time.Millisecond}
	}
	c := newClient(t, cfg, srv)
	other := newClient(t, lock.Config{}, srv)
	// Only the first acquire's reply is late (a delay cut short by
	// a closed connection would otherwise move to the next one).
	var once atomic.Bool
	acquire := isAcquire(n)
	inject(t, srv, integration.Rule{Match: integration.MatchFunc(func(cmd []string) bool {
		return acquire(cmd) && once.CompareAndSwap(false, true)
	}), Action: integration.DelayReply(450 * time.Millisecond)})
	h, err := c.Mutex(n).Lock(bg(), opts...)
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	defer func() { _ = h.Unlock(bg()) }()
	g, err := other.Mutex(n).TryLock(bg())
	if err != nil {
		return false
	}
	tried := time.Now()
	_ = g.Unlock(bg())
	// The Held's grant was sent at AcquiredAt. Returned for a grant
	// answered after its lease (the finding), the other client's
	// TryLock comes 450 ms or more after it, stall or not. A stall of
	// the process between them can also outlast a fresh grant's lease:
	// what is left of the span once the stall is taken out is then well
	// within the lease.
	span := tried.Sub(h.AcquiredAt())
	if stall := integration.LongestStall(h.AcquiredAt(), tried); stall > 0 && span-stall < lease/2 {
		t.Logf("another client was granted %v after the Held's grant was sent, a CPU stalled %v of it: void", span, stall)
		return true
	}
	t.Fatalf("another client was granted the lock %v after the Held's grant was sent, while the Held returned is alive=%v", span, alive(h))
	return false
}

// Finding 14a: a Lock whose ctx ends while its acquire is in flight, and
// whose give-back is lost, must not leave a hold that is renewed for ever.
func TestCancelledLockWithLostGiveBackIsNotRenewed(t *testing.T) {
	srv := integrationRedis(t)
	lease := time.Second
	c := newClient(t, lock.Config{WatchdogTimeout: lease, RenewInterval: 300 * time.Millisecond, CommandTimeout: 200 * time.Millisecond}, srv)
	other := newClient(t, lock.Config{}, srv)
	n := name(t)
	ctx, cancel := context.WithCancel(bg())
	defer cancel()
	acquire := isAcquire(n)
	// The acquire runs, its reply comes late, and the Lock's ctx is
	// cancelled while it is in flight; every release is lost meanwhile.
	inject(t, srv, integration.Rule{Match: integration.MatchFunc(func(cmd []string) bool {
		if acquire(cmd) {
			cancel()
			return true
		}
		return false
	}), Action: integration.DelayReply(100 * time.Millisecond)})
	drop := inject(t, srv, integration.Rule{Match: isRelease(n), Action: integration.DropRequest, Times: math.MaxInt})
	if _, err := c.Mutex(n).Lock(ctx); err == nil {
		t.Fatal("Lock whose ctx ended mid-acquire returned a Held")
	}
	time.Sleep(500 * time.Millisecond) // the give-back fails meanwhile
	drop.Remove()
	g, err := other.Mutex(n).TryLock(bg(), lock.Wait(4*lease))
	if err != nil {
		t.Fatalf("a cancelled Lock left a hold nobody releases: %v", err)
	}
	must(t, g.Unlock(bg()))
}

// A copy of an acquire that its client gave up on (it sent the request
// again on a new connection and was answered) can still reach Redis
// later: after a re-entry of the owner (the model's shortest M7 trail,
// docs/model/README.md: the copy adds a third hold to the owner's two) or
// after its release (a hold nobody knows of, keeping everyone out for a
// lease). It must find the request fenced and change nothing. Both failed
// before the fence.
func TestLateCopyOfAnAnsweredAcquireTakesNothing(t *testing.T) {
	srv := integrationRedis(t)
	c := newClient(t, lock.Config{CommandTimeout: 100 * time.Millisecond}, srv)
	rc := raw(t, srv)
	for _, after := range []string{"reentry", "release"} {
		t.Run(after, func(t *testing.T) {
			n := name(t)
			var once atomic.Bool
			acquire := isAcquire(n)
			late := inject(t, srv, integration.Rule{Match: integration.MatchFunc(func(cmd []string) bool {
				return acquire(cmd) && once.CompareAndSwap(false, true)
			}), Action: integration.LateRequest(300 * time.Millisecond)})
			h, err := c.Mutex(n).Lock(bg()) // answered through the copy sent again
			must(t, err)
			field := reentrant.Field(c.ID(), h.Owner())
			var inner *lock.Held
			want := int64(0)
			if after == "reentry" {
				inner, err = c.Mutex(n).Lock(h.Context())
				must(t, err)
				want = 2
			} else {
				must(t, h.Unlock(bg()))
			}
			wctx, cancel := context.WithTimeout(bg(), 5*time.Second)
			err = late.Wait(wctx) // the late copy has run
			cancel()
			must(t, err)
			if got := hgetInt(t, rc, n, field); got != want {
				t.Fatalf("after the late copy Redis counts %d holds of the owner, want %d (HGETALL %v)", got, want, hgetall(t, rc, n))
			}
			if inner != nil {
				must(t, inner.Unlock(bg()))
				must(t, h.Unlock(bg()))
			}
			if exists(t, rc, n) {
				t.Fatalf("lock left after every Unlock (HGETALL %v)", hgetall(t, rc, n))
			}
		})
	}
}

func hgetall(t *testing.T, rc rueidis.Client, key string) map[string]string {
	t.Helper()
	m, err := do(t, rc, "HGETALL", key).AsStrMap()
	if err != nil {
		t.Fatal(err)
	}
	return m
}
