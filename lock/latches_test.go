package lock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/lock"
)

// Issue 29, stage 4: unlock latches (misuse-and-faults-2 P1-85, P1-87,
// P2-25). Written first by a helper (branch stage4-tests), failing on
// 97b029c by their own assertions.

// latchesOf lists the unlock latches of the lock called n.
func latchesOf(t testing.TB, rc rueidis.Client, n string) []string {
	t.Helper()
	ks, err := do(t, rc, "KEYS", "redisson_unlock_latch:{"+n+"}:*").AsStrSlice()
	must(t, err)
	return ks
}

// allLatches counts every unlock latch on the server.
func allLatches(t testing.TB, rc rueidis.Client) int {
	t.Helper()
	ks, err := do(t, rc, "KEYS", "redisson_unlock_latch:*").AsStrSlice()
	must(t, err)
	return len(ks)
}

// P1-85, P1-87: after Close, nothing of the Client's is left in Redis but
// the latches of releases whose answer was never received. Here every
// release is answered in the end (by the script, or by its latch when
// sent again), so no latch may be left.
func TestNoLatchLeftAfterClose(t *testing.T) {
	closeAndCheck := func(t *testing.T, c *lock.Client, rc rueidis.Client, n string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(bg(), 5*time.Second)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			t.Logf("Close: %v", err)
		}
		if ls := latchesOf(t, rc, n); len(ls) != 0 {
			t.Fatalf("after Close the Client left %d unlock latch(es) of answered releases in Redis: %v", len(ls), ls)
		}
	}
	// P1-85: lock and unlock, then redis-server restarts (its data kept)
	// before the latch is deleted; the Client goes on working, then closes.
	t.Run("restart", func(t *testing.T) {
		srv := integrationRedis(t, integration.Options{Persist: true})
		rc := raw(t, srv)
		c := newClient(t, lock.Config{CommandTimeout: 500 * time.Millisecond}, srv)
		n := name(t)
		h, err := c.Mutex(n).Lock(bg())
		must(t, err)
		must(t, h.Unlock(bg())) // answered: its latch is the Client's to delete
		must(t, srv.Kill(bg()))
		must(t, srv.Restart(bg(), integration.RestartOptions{KeepData: true, Delay: 1500 * time.Millisecond}))
		// The Client's connections broke with the restart: the first
		// requests on them may get no answer, and their records rightly
		// stay (a copy may still arrive). Another name takes those.
		warm := c.Mutex(n + ":warm")
		for deadline := time.Now().Add(10 * time.Second); ; {
			wh, err := warm.TryLock(bg())
			if err == nil && wh.Unlock(bg()) == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the Client does not work 10 s after the restart: %v", err)
			}
			time.Sleep(50 * time.Millisecond) // polled: the Client's reconnect has no signal outside it
		}
		h, err = c.Mutex(n).Lock(bg()) // the Client works after the restart
		must(t, err)
		must(t, h.Unlock(bg()))
		closeAndCheck(t, c, rc, n)
	})
	// P1-87: Unlock while the server answers OOM (unconfirmed), memory is
	// freed, the release is settled in the background; then Close.
	t.Run("oom", func(t *testing.T) {
		srv := integrationRedis(t)
		rc := raw(t, srv)
		c := newClient(t, lock.Config{}, srv)
		must(t, do(t, rc, "CONFIG", "SET", "maxmemory-policy", "noeviction").Error())
		n := name(t)
		h, err := c.Mutex(n).Lock(bg())
		must(t, err)
		must(t, do(t, rc, "CONFIG", "SET", "maxmemory", "1").Error())
		uctx, cancel := context.WithTimeout(bg(), 300*time.Millisecond)
		err = h.Unlock(uctx)
		cancel()
		if !errors.Is(err, lock.ErrUnavailable) {
			t.Fatalf("Unlock at maxmemory = %v, want ErrUnavailable", err)
		}
		must(t, do(t, rc, "CONFIG", "SET", "maxmemory", "0").Error())
		deadline := time.Now().Add(10 * time.Second)
		for exists(t, rc, n) {
			if time.Now().After(deadline) {
				t.Fatal("the lock whose Unlock failed at maxmemory is still held 10 s after memory was freed")
			}
			time.Sleep(20 * time.Millisecond) // polled: the settlement has no signal outside the Client
		}
		closeAndCheck(t, c, rc, n)
	})
	// The reply to a release is lost; the Client sends it again and is
	// answered by its latch. That latch stays, expiring (unlockLatchTTL):
	// the first copy got no answer, and deleting the latch would let a
	// copy still on its way release a later hold of the field.
	t.Run("lost reply", func(t *testing.T) {
		srv := integrationRedis(t)
		rc := raw(t, srv)
		c := newClient(t, lock.Config{CommandTimeout: 300 * time.Millisecond}, srv)
		n := name(t)
		h, err := c.Mutex(n).Lock(bg())
		must(t, err)
		inject(t, srv, integration.Rule{Match: isRelease(n), Action: integration.DropReply})
		must(t, h.Unlock(bg()))
		if exists(t, rc, n) {
			t.Fatal("Unlock returned nil but the lock is still in Redis")
		}
		ctx, cancel := context.WithTimeout(bg(), 5*time.Second)
		defer cancel()
		_ = c.Close(ctx)
		ls := latchesOf(t, rc, n)
		if len(ls) != 1 {
			t.Fatalf("after a release whose first reply was lost, latches %v, want its one latch kept", ls)
		}
		// The record's life: 4 × (WatchdogTimeout + CommandTimeout).
		if p, most := pttl(t, rc, ls[0]), 4*(lock.DefaultWatchdogTimeout+300*time.Millisecond); p <= 0 || p > most {
			t.Fatalf("the kept latch's PTTL %v, want it expiring within %v", p, most)
		}
	})
}

// P2-25: an answered unlock latch is deleted within 1 s, whatever the
// unlock rate, and 2 s after the load stops no latch remains (every
// release here is answered). One Client, 64 goroutines each on its own
// name, TryLock+Unlock as fast as they can for 4 s.
func TestLatchesAreDeletedUnderLoad(t *testing.T) {
	srv := integrationRedis(t)
	rc := raw(t, srv)
	c := newClient(t, lock.Config{}, srv)
	prefix := name(t)
	const workers = 64
	load := 4 * time.Second

	var unlocks atomic.Int64
	var failed atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := c.Mutex(fmt.Sprintf("%s:%d", prefix, i))
			for {
				select {
				case <-stop:
					return
				default:
				}
				h, err := m.TryLock(bg())
				if err == nil {
					err = h.Unlock(bg())
				}
				if err != nil {
					failed.CompareAndSwap(nil, err)
					return
				}
				unlocks.Add(1)
			}
		}()
	}
	type sample struct {
		at time.Time
		n  int64
	}
	var hist []sample
	worst, worstAllowed := 0, int64(0)
	began := time.Now()
	for time.Since(began) < load {
		time.Sleep(100 * time.Millisecond) // sampling period
		before := time.Now()
		hist = append(hist, sample{before, unlocks.Load()})
		got := allLatches(t, rc)
		after := unlocks.Load()
		// Latches in Redis may come from the unlocks answered in the last
		// second (plus one sampling period of slack) only.
		var old int64
		for _, s := range hist {
			if s.at.Before(before.Add(-time.Second - 100*time.Millisecond)) {
				old = s.n
			}
		}
		// Plus the releases that ran but whose Unlock had not returned
		// yet: at most one per worker.
		if allowed := after - old + workers; int64(got) > allowed && got-int(allowed) > worst-int(worstAllowed) {
			worst, worstAllowed = got, allowed
		}
	}
	close(stop)
	wg.Wait()
	total := unlocks.Load()
	rate := float64(total) / time.Since(began).Seconds()
	if err, _ := failed.Load().(error); err != nil {
		t.Fatalf("a TryLock/Unlock cycle failed: %v", err)
	}
	stopped := time.Now()
	t.Logf("%d TryLock/Unlock cycles in %v: %.0f/s on one Client", total, load, rate)
	time.Sleep(time.Until(stopped.Add(2 * time.Second))) // the bound under test: 2 s after the load stops
	left := allLatches(t, rc)
	if worst > 0 {
		t.Errorf("during the load, %d unlock latches were in Redis when only %d unlocks were answered (or in flight) in the last 1.1 s: answered latches live longer than 1 s", worst, worstAllowed)
	}
	if left != 0 {
		t.Errorf("2 s after %d answered unlocks (%.0f/s), %d unlock latches are still in Redis", total, rate, left)
	}
}
