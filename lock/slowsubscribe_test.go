package lock_test

import (
	"strings"
	"testing"
	"time"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/lock"
)

// A TryLock with a Wait whose subscription to the lock's channel is not
// answered: the subscription is bounded by the time left, and the sleep
// after it must be bounded by what is left after it, not by what was left
// before it. Before, the sleep took the time left before the subscription
// again: "TryLock(Wait 1s) returned 1.001s after its Wait ran out" (plain
// and fair alike; the fair waiter's version failed
// TestBoundLockWhoseCtxEndsWhileTheMasterIsStopped beside two CPU hogs).
func TestTryLockWaitWithAnUnansweredSubscription(t *testing.T) {
	for _, kind := range []string{"plain", "fair"} {
		t.Run(kind, func(t *testing.T) {
			srv := integrationRedis(t)
			n := name(t)
			holder := newClient(t, lock.Config{}, srv)
			c := newClient(t, lock.Config{CommandTimeout: time.Second}, srv)
			warm(t, c)
			mutex := func(c *lock.Client) *lock.Mutex {
				if kind == "fair" {
					return c.FairMutex(n)
				}
				return c.Mutex(n)
			}
			h, err := mutex(holder).Lock(bg())
			must(t, err)
			defer func() { _ = h.Unlock(bg()) }()
			// Every SUBSCRIBE of the waiter's Client is held on its way to
			// Redis past the call: its subscription never comes.
			inject(t, srv, integration.Rule{Match: integration.MatchFunc(func(cmd []string) bool {
				return len(cmd) > 0 && strings.HasSuffix(strings.ToUpper(cmd[0]), "SUBSCRIBE")
			}), Action: integration.DelayRequest(10 * time.Second)})
			wait := time.Second
			start := time.Now()
			_, err = mutex(c).TryLock(bg(), lock.Wait(wait))
			over, stalled := lateness(start.Add(wait), time.Now())
			t.Logf("TryLock(Wait %v) returned %v after its Wait ran out%s: %v", wait, over.Round(time.Millisecond), stalledNote(stalled), err)
			if err == nil {
				t.Fatal("granted a lock another Client holds")
			}
			if over-stalled > boundSlack {
				t.Errorf("TryLock(Wait %v) returned %v after its Wait ran out%s (bound %v)", wait, over.Round(time.Millisecond), stalledNote(stalled), boundSlack)
			}
		})
	}
}
