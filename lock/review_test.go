package lock_test

import (
	"context"
	"errors"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/observe"
	"github.com/rlock-go/rlock/reentrant"
)

// Review (hold rebuild): tests of suspected defects. They fail at
// b7097e6.

// isSettle matches the settlement script of the lock called name (an
// EVALSHA of 2 keys that names it).
func isSettle(name string) integration.MatchFunc {
	return func(cmd []string) bool {
		return len(cmd) > 3 && strings.EqualFold(cmd[0], "EVALSHA") && cmd[1] == reentrant.SettleScript.SHA1() && slices.Contains(cmd, name)
	}
}

// isRenew matches a renewal naming the lock called name.
func isRenew(name string) integration.MatchFunc {
	return func(cmd []string) bool {
		return len(cmd) > 3 && strings.EqualFold(cmd[0], "EVALSHA") && cmd[1] == reentrant.RenewScript.SHA1() && slices.Contains(cmd, name)
	}
}

// A cancelled Lock whose give-back is lost leaves a stray hold (count 1,
// no Held). Close(context.Background()) settles it, then releases the stray
// with no bound: closeHold's retry has ctx=Background and stop=nil (no
// Held, so no lost channel). If the master stops answering after the
// settlement, Close never returns. docs/safety.md §6: "Unlock and Close
// against a dead master end when the lease is judged run out".
func TestReviewCloseWithAStrayIsBounded(t *testing.T) {
	for _, variant := range []string{"releases-dropped", "master-killed-after-settle"} {
		t.Run(variant, func(t *testing.T) {
			srv := integrationRedis(t)
			lease := time.Second
			c, err := lock.New(bg(), lock.Config{Addrs: []string{srv.Addr()}, WatchdogTimeout: lease, RenewInterval: 300 * time.Millisecond, CommandTimeout: 200 * time.Millisecond})
			must(t, err)
			n := name(t)
			ctx, cancel := context.WithCancel(bg())
			defer cancel()
			acquire := isAcquire(n)
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
			// Close while the stray's lease still runs.
			time.Sleep(100 * time.Millisecond)
			if variant == "master-killed-after-settle" {
				// The master answers Close's settlement, then dies as
				// Close sends the stray's release.
				drop.Remove()
				var once atomic.Bool
				release := isRelease(n)
				inject(t, srv, integration.Rule{Match: integration.MatchFunc(func(cmd []string) bool {
					if release(cmd) && once.CompareAndSwap(false, true) {
						go func() { _ = srv.Kill(bg()) }()
						return true
					}
					return false
				}), Action: integration.DropRequest})
			}
			done := make(chan error, 1)
			start := time.Now()
			go func() { done <- c.Close(bg()) }()
			select {
			case err := <-done:
				t.Logf("Close returned after %v: %v", time.Since(start), err)
			case <-time.After(5 * lease):
				buf := make([]byte, 1<<20)
				buf = buf[:runtime.Stack(buf, true)]
				for _, g := range strings.Split(string(buf), "\n\n") {
					if strings.Contains(g, "closeHold") {
						t.Log(g)
					}
				}
				t.Fatalf("Close(context.Background()) still blocked %v after it began (lease %v, CommandTimeout 200ms)", time.Since(start), lease)
			}
		})
	}
}

// Close releases every hold while the watchdog still runs and the entry
// is not marked busy (closeHold, unlike Unlock, does not Begin; endClosed
// removes the entry only after the release loop). A renewal that reaches
// Redis after Close's release deleted the key answers 0 and the watchdog
// reports a loss: the Held ends with a *LostError ("renewal found the lock
// no longer held"), the Observer gets a Loss, and Close returns an error
// matching ErrLockLost, though Close released the lock itself. Here the
// release's reply is lost (the connection reset), which keeps Close in its
// retry for a few ms while ticks (RenewInterval 10ms) go on.
func TestReviewCloseIsNotReportedAsALoss(t *testing.T) {
	srv := integrationRedis(t)
	var losses atomic.Int32
	obs := &observe.Observer{Loss: func(context.Context, observe.Loss) { losses.Add(1) }}
	bad, rounds := 0, 10
	for round := 0; round < rounds; round++ {
		// keepLease, not 300 ms: a process frozen longer than the lease
		// (stop 41's CI machine) loses it before Close, a loss this test
		// would count.
		c, err := lock.New(bg(), lock.Config{Addrs: []string{srv.Addr()}, WatchdogTimeout: keepLease, RenewInterval: 10 * time.Millisecond, CommandTimeout: 200 * time.Millisecond, Observer: obs})
		must(t, err)
		n := name(t)
		h, err := c.Mutex(n).Lock(bg())
		must(t, err)
		f := inject(t, srv, integration.Rule{Match: isRelease(n), Action: integration.DropReply})
		cerr := c.Close(bg())
		f.Remove()
		cause := context.Cause(h.Context())
		if !errors.Is(cause, lock.ErrClosed) || errors.Is(cerr, lock.ErrLockLost) {
			bad++
			t.Logf("round %d: Close()=%v; Held cause=%v", round, cerr, cause)
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d Closes reported a loss of a lock Close released itself (Observer losses: %d)", bad, rounds, losses.Load())
	}
}

// Close ends its Helds before its first release (the hold spin model's
// CLOSE_LATE, docs/model/hold.pml): another Client may be granted the
// lock as soon as the release has run, and a Held whose owner does not
// know of Close must have ended by then. Here the release's reply is
// delayed 1 s after Redis ran it: another Client's waiter is granted
// meanwhile. Before, Close ended the Helds only after the release's
// answer: the grant came while the Held's context was live.
func TestCloseEndsItsHeldsBeforeItReleases(t *testing.T) {
	srv := integrationRedis(t)
	a, err := lock.New(bg(), lock.Config{Addrs: []string{srv.Addr()}, CommandTimeout: 3 * time.Second})
	must(t, err)
	b := newClient(t, lock.Config{}, srv)
	n := name(t)
	h, err := a.Mutex(n).Lock(bg())
	must(t, err)
	f := inject(t, srv, integration.Rule{Match: isRelease(n), Action: integration.DelayReply(time.Second)})
	defer f.Remove()
	closed := make(chan error, 1)
	go func() { closed <- a.Close(bg()) }()
	hb, err := b.Mutex(n).Lock(bg())
	must(t, err)
	live := h.Context().Err() == nil
	must(t, hb.Unlock(bg()))
	must(t, <-closed)
	if f.Hits() != 1 {
		t.Fatalf("the release's reply was delayed %d times, want 1", f.Hits())
	}
	if live {
		t.Fatal("another Client was granted the lock while a Held of the closing Client was live")
	}
	if cause := context.Cause(h.Context()); !errors.Is(cause, lock.ErrClosed) {
		t.Fatalf("the Held ended with %v, want ErrClosed", cause)
	}
}

// A lock lost while Close releases it (its release unanswered until the
// lease ran out) is reported by Close with the watchdog's words, the loss
// the Observer got: Close's ending of the Helds first must not replace it
// (a regression the review of stage 2 found: Close made up
// "lease_expired" while the Observer said "renew_failed").
func TestCloseReportsTheWatchdogsLoss(t *testing.T) {
	srv := integrationRedis(t)
	var kinds []observe.LossKind
	var mu sync.Mutex
	obs := &observe.Observer{Loss: func(_ context.Context, l observe.Loss) { mu.Lock(); kinds = append(kinds, l.Kind); mu.Unlock() }}
	c, err := lock.New(bg(), lock.Config{Addrs: []string{srv.Addr()}, WatchdogTimeout: 1500 * time.Millisecond, CommandTimeout: 300 * time.Millisecond, ReplicaSyncTimeout: -1, Observer: obs})
	must(t, err)
	n := name(t)
	_, err = c.Mutex(n).Lock(bg())
	must(t, err)
	inject(t, srv, integration.Rule{Match: isRelease(n), Action: integration.DelayReply(10 * time.Second), Times: math.MaxInt})
	cerr := c.Close(bg())
	var lost *lock.LostError
	if !errors.As(cerr, &lost) {
		t.Fatalf("Close = %v, want a *LostError", cerr)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(kinds) != 1 || kinds[0] != lost.Kind {
		t.Fatalf("Close reported a loss of kind %q (%s), the Observer %v", lost.Kind, lost.Reason, kinds)
	}
}
