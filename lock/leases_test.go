package lock_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rlock-go/rlock/lock"
)

// Issue 29, stage 4: leases and keys. Each test failed first against the
// code before its fix by the finding's own assertion.

// R3-11: Go write-lock re-entries keep the key's expiry at one lease (a
// writer that dies frees the lock at most one lease after it last held).
func TestWriteReentriesDoNotOutliveOneLease(t *testing.T) {
	lease := 2 * time.Second
	for _, explicit := range []bool{false, true} {
		t.Run(map[bool]string{false: "watchdog", true: "lease"}[explicit], func(t *testing.T) {
			rc := raw(t)
			c := newClient(t, lock.Config{WatchdogTimeout: lease})
			var opts []lock.Option
			if explicit {
				opts = append(opts, lock.Lease(lease))
			}
			n := name(t)
			w := c.ReadWriteMutex(n).WriteLock()
			h, err := w.Lock(bg(), opts...)
			must(t, err)
			helds := []*lock.Held{h}
			defer func() {
				for _, g := range slices.Backward(helds) {
					_ = g.Unlock(bg())
				}
			}()
			var ttls []time.Duration
			over := false
			for range 5 {
				g, err := w.Lock(h.Context(), opts...)
				must(t, err)
				helds = append(helds, g)
				p := pttl(t, rc, n)
				ttls = append(ttls, p)
				over = over || p > lease
			}
			if over {
				t.Fatalf("after 1..5 write re-entries with a %v lease the key's PTTL is %v: more than one lease", lease, ttls)
			}
		})
	}
}

// R3-5: a Go fair waiter that is still waiting keeps its place, however
// long the hold ahead of it lasts. A and B queue (FairLockWaitTimeout
// 200 ms) behind a holder whose key has 1.5 s to live; the holder then
// re-enters with a 5 s lease, so that A and B, still in their Lock calls,
// sleep for the holder's new PTTL. The hold lasts past the lease they saw
// plus the wait; C arrives, then the holder releases. The grant order must
// be A, B, C.
func TestFairLiveWaiterKeepsItsPlace(t *testing.T) {
	srv := integrationRedis(t)
	rc := raw(t, srv)
	holder := newClient(t, lock.Config{}, srv)
	wcfg := lock.Config{FairLockWaitTimeout: 200 * time.Millisecond}
	waiters := map[string]*lock.Client{
		"A": newClient(t, wcfg, srv),
		"B": newClient(t, wcfg, srv),
		"C": newClient(t, wcfg, srv),
	}
	n := name(t)
	h, err := holder.FairMutex(n).Lock(bg(), lock.Lease(1500*time.Millisecond))
	must(t, err)

	ctx, cancel := context.WithTimeout(bg(), 20*time.Second)
	defer cancel()
	order := make(chan string, 3)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	start := func(who string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g, err := waiters[who].FairMutex(n).Lock(ctx)
			if err != nil {
				order <- who + " failed: " + err.Error()
				return
			}
			order <- who // before the Unlock: the next grant follows it
			_ = g.Unlock(bg())
		}()
	}
	start("A")
	awaitQueued(t, rc, n, 1)
	queuedAt := time.Now()
	start("B")
	awaitQueued(t, rc, n, 2)
	// The holder keeps the lock longer (a re-entry never shortens the
	// key's expiry; it extends it to the longer lease).
	inner, err := holder.FairMutex(n).Lock(h.Context(), lock.Lease(5*time.Second))
	must(t, err)
	if time.Since(queuedAt) > 1200*time.Millisecond {
		t.Fatalf("A and B took %v to queue: the holder's first lease may have run out", time.Since(queuedAt))
	}
	// The hold lasts longer than the lease A and B saw plus the wait (the
	// scenario's timing, not a synchronisation).
	time.Sleep(2500*time.Millisecond - time.Since(queuedAt))
	start("C")
	deadline := time.Now().Add(10 * time.Second)
	for len(placesOf(t, rc, waiters["C"], n)) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("C never queued: queue %v", queue(t, rc, n))
		}
		time.Sleep(10 * time.Millisecond) // polled: no signal for "queued in Redis"
	}
	t.Logf("queue when the holder releases: %v (A=%s B=%s C=%s)", queue(t, rc, n), waiters["A"].ID(), waiters["B"].ID(), waiters["C"].ID())
	must(t, inner.Unlock(bg()))
	must(t, h.Unlock(bg()))
	var got []string
	for range 3 {
		select {
		case w := <-order:
			got = append(got, w)
		case <-ctx.Done():
			t.Fatalf("grants so far %v; the others were not granted within 20 s", got)
		}
	}
	if !slices.Equal(got, []string{"A", "B", "C"}) {
		t.Fatalf("grant order %v for arrivals A, B, C: a live fair waiter lost its place", got)
	}
}
