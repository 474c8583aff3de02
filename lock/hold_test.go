package lock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/observe"
	"github.com/rlock-go/rlock/reentrant"
)

// Regression tests for the hold: each names the finding of the safety
// review of db82bdb (shared/reviews/safety.md, misuse-and-faults.md) it
// reproduces; each failed on that commit.

// lostCause reports whether h ended with a loss.
func lostCause(h *lock.Held) bool {
	return errors.Is(context.Cause(h.Context()), lock.ErrLockLost)
}

// alive reports whether h's context has not ended.
func alive(h *lock.Held) bool {
	select {
	case <-h.Done():
		return false
	default:
		return true
	}
}

// Finding 3: a retried release's latched "released" answer must not end
// a newer hold of the same owner. The first Unlock's release is queued on
// a paused server and its Unlock gives up; the owner locks again at once.
func TestLatchedAnswerIsHistoryNotState(t *testing.T) {
	srv := integrationRedis(t)
	c := newClient(t, lock.Config{CommandTimeout: 100 * time.Millisecond, WatchdogTimeout: 2 * time.Second}, srv)
	rc := raw(t, srv)
	n := name(t)
	ctx := lock.WithOwner(bg())
	h1, err := c.Mutex(n).Lock(ctx)
	must(t, err)
	must(t, srv.Pause(bg()))
	uctx, cancel := context.WithTimeout(bg(), 250*time.Millisecond)
	err = h1.Unlock(uctx) // the release waits in the paused server
	cancel()
	if !errors.Is(err, lock.ErrUnavailable) {
		t.Fatalf("Unlock on a paused server = %v, want ErrUnavailable", err)
	}
	resumed := make(chan error, 1)
	go func() {
		time.Sleep(100 * time.Millisecond) // the next Lock is in flight when the server resumes
		resumed <- srv.Resume(bg())
	}()
	h2, err := c.Mutex(n).Lock(ctx)
	must(t, err)
	must(t, <-resumed)
	if h2.Reentrant() {
		t.Fatal("h2 counted as a re-entry: the first hold was released")
	}
	if err := h1.Unlock(bg()); err != nil {
		t.Fatalf("second Unlock of h1 = %v, want nil (its release went through)", err)
	}
	if !alive(h2) {
		t.Fatalf("h2 ended by h1's answer: %v", context.Cause(h2.Context()))
	}
	if got := hgetInt(t, rc, n, reentrant.Field(c.ID(), h2.Owner())); got != 1 {
		t.Fatalf("count %d, want 1: h2's hold", got)
	}
	must(t, h2.Unlock(bg()))
	if exists(t, rc, n) {
		t.Fatal("lock left after h2's Unlock")
	}
}

// Finding 4a: goroutines sharing an owner share the hold with an exact
// count: whenever one of them holds a Held, Redis has a hold of the owner,
// and in the end the count is 0.
func TestSharedOwnerCountIsExact(t *testing.T) {
	c := newClient(t, lock.Config{})
	rc := raw(t)
	n := name(t)
	ctx := lock.WithOwner(bg())
	owner, _ := lock.OwnerFrom(ctx)
	field := reentrant.Field(c.ID(), owner)
	var violations, holds atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 150; i++ {
				h, err := c.Mutex(n).Lock(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				holds.Add(1)
				if hgetInt(t, rc, n, field) < 1 {
					violations.Add(1)
				}
				if err := h.Unlock(bg()); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if v := violations.Load(); v > 0 {
		t.Fatalf("%d of %d holds had no hold in Redis", v, holds.Load())
	}
	if exists(t, rc, n) {
		t.Fatalf("lock left with count %d after every hold was released", hgetInt(t, rc, n, field))
	}
}

// Finding 5: a re-entry with a shorter Lease must not shorten the key's
// expiry under an outer watchdog hold, nor must its Unlock.
func TestShortReentryKeepsTheOuterLease(t *testing.T) {
	c := newClient(t, lock.Config{WatchdogTimeout: 3 * time.Second, RenewInterval: time.Second})
	other := newClient(t, lock.Config{})
	rc := raw(t)
	n := name(t)
	outer, err := c.Mutex(n).Lock(bg())
	must(t, err)
	for _, unlockInner := range []bool{false, true} {
		inner, err := c.Mutex(n).Lock(outer.Context(), lock.Lease(100*time.Millisecond))
		must(t, err)
		if unlockInner {
			must(t, inner.Unlock(bg()))
		}
		if pttl, _ := do(t, rc, "PTTL", n).AsInt64(); pttl < 1000 {
			t.Fatalf("unlock inner=%v: PTTL %dms after a Lease(100ms) re-entry, want the outer's seconds", unlockInner, pttl)
		}
		time.Sleep(150 * time.Millisecond) // past the inner lease: the point of the test is time itself
		if h, err := other.Mutex(n).TryLock(bg()); err == nil {
			must(t, h.Unlock(bg()))
			t.Fatalf("unlock inner=%v: another client got the lock while the outer hold is alive=%v", unlockInner, alive(outer))
		}
	}
	must(t, outer.Unlock(bg()))
}

// Finding 6: a re-entry that finds the key gone is a fresh acquisition,
// and the earlier hold's loss is signalled.
func TestReentryAfterLossSignalsTheLoss(t *testing.T) {
	c := newClient(t, lock.Config{})
	other := newClient(t, lock.Config{})
	rc := raw(t)
	n := name(t)
	outer, err := c.Mutex(n).Lock(bg())
	must(t, err)
	do(t, rc, "DEL", n)
	h, err := other.Mutex(n).Lock(bg())
	must(t, err)
	must(t, h.Unlock(bg()))
	// The re-entry learns the outer hold was lost: its context (the
	// outer's) ends with the loss, and so does the Lock.
	if inner, err := c.Mutex(n).Lock(outer.Context()); !errors.Is(err, lock.ErrLockLost) {
		if err == nil {
			t.Fatalf("re-entry under a lost hold acquired (reentrant=%v)", inner.Reentrant())
		}
		t.Fatalf("re-entry under a lost hold = %v, want ErrLockLost", err)
	}
	if !lostCause(outer) {
		t.Fatalf("outer cause %v, want ErrLockLost", context.Cause(outer.Context()))
	}
	if !errors.Is(outer.Unlock(bg()), lock.ErrLockLost) {
		t.Fatal("Unlock of the lost outer hold must say so")
	}
	// A new owner takes it afresh; nothing of the lost holds remains.
	h2, err := c.Mutex(n).Lock(bg())
	must(t, err)
	must(t, h2.Unlock(bg()))
	if exists(t, rc, n) {
		t.Fatal("lock left after the last Unlock")
	}
}

// Finding 7: an inner Unlock that keeps retrying must not hide the outer
// hold's loss: the watchdog still judges the lease.
func TestUnlockInFlightDoesNotHideALoss(t *testing.T) {
	srv := integrationRedis(t)
	lease := time.Second
	c := newClient(t, lock.Config{WatchdogTimeout: lease, RenewInterval: 300 * time.Millisecond, CommandTimeout: 200 * time.Millisecond}, srv)
	n := name(t)
	outer, err := c.Mutex(n).Lock(bg())
	must(t, err)
	inner, err := c.Mutex(n).Lock(outer.Context())
	must(t, err)
	must(t, srv.Partition(bg()))
	t.Cleanup(func() { _ = srv.Heal(bg()) })
	unlocked := make(chan error, 1)
	go func() { unlocked <- inner.Unlock(bg()) }()
	select {
	case <-outer.Done():
	case <-time.After(3 * lease):
		t.Fatal("outer hold not told of its loss 3 leases into a partition while an inner Unlock retried")
	}
	if !lostCause(outer) {
		t.Fatalf("outer cause %v, want ErrLockLost", context.Cause(outer.Context()))
	}
	if err := <-unlocked; !errors.Is(err, lock.ErrLockLost) && !errors.Is(err, lock.ErrUnavailable) {
		t.Fatalf("inner Unlock = %v, want the loss or ErrUnavailable", err)
	}
}

// Finding 9: a re-called Unlock never sends its old request again, so an
// expired latch cannot turn it into a second decrement.
func TestRecalledUnlockNeverDecrementsTwice(t *testing.T) {
	srv := integrationRedis(t)
	c := newClient(t, lock.Config{CommandTimeout: 100 * time.Millisecond}, srv)
	rc := raw(t, srv)
	n := name(t)
	outer, err := c.Mutex(n).Lock(bg())
	must(t, err)
	inner, err := c.Mutex(n).Lock(outer.Context())
	must(t, err)
	field := reentrant.Field(c.ID(), outer.Owner())
	must(t, srv.Pause(bg()))
	uctx, cancel := context.WithTimeout(bg(), 250*time.Millisecond)
	err = inner.Unlock(uctx)
	cancel()
	if !errors.Is(err, lock.ErrUnavailable) {
		t.Fatalf("Unlock on a paused server = %v", err)
	}
	must(t, srv.Resume(bg()))
	for hgetInt(t, rc, n, field) != 1 { // the queued release ran
		time.Sleep(5 * time.Millisecond)
	}
	// Its latch expires (here: is deleted) before Unlock is called again.
	for _, k := range keys(t, rc, n) {
		if k != n {
			do(t, rc, "DEL", k)
		}
	}
	if err := inner.Unlock(bg()); err != nil && !errors.Is(err, lock.ErrLockLost) {
		t.Fatalf("re-called Unlock = %v", err)
	}
	got := hgetInt(t, rc, n, field)
	switch {
	case got == 1 && alive(outer):
	case lostCause(outer): // outcome unknown: signalled as a loss, never silent
	default:
		t.Fatalf("count %d, outer alive=%v cause=%v: a second decrement", got, alive(outer), context.Cause(outer.Context()))
	}
}

// Finding 10: the Held's context outlives the Lock ctx, and a later loss
// is still seen through context.Cause.
func TestHeldOutlivesTheWaitContext(t *testing.T) {
	c := newClient(t, lock.Config{WatchdogTimeout: time.Second, RenewInterval: 200 * time.Millisecond})
	rc := raw(t)
	n := name(t)
	lctx, cancel := context.WithTimeout(bg(), 100*time.Millisecond)
	h, err := c.Mutex(n).Lock(lctx)
	must(t, err)
	<-lctx.Done()
	cancel()
	if !alive(h) {
		t.Fatalf("the hold ended with the wait's ctx: %v", context.Cause(h.Context()))
	}
	do(t, rc, "DEL", n)
	<-h.Done()
	if !lostCause(h) {
		t.Fatalf("cause %v after the key was deleted, want ErrLockLost", context.Cause(h.Context()))
	}
}

// Finding 12: a lease that runs out is signalled before the key expires
// in Redis, i.e. before anyone else can be granted the lock.
func TestLossSignalledBeforeTheKeyExpires(t *testing.T) {
	c := newClient(t, lock.Config{})
	n := name(t)
	lease := 3 * time.Second
	h, err := c.Mutex(n).Lock(bg(), lock.Lease(lease))
	must(t, err)
	<-h.Done()
	at := time.Now()
	var lost *lock.LostError
	if !errors.As(context.Cause(h.Context()), &lost) || lost.Kind != observe.LossLeaseExpired {
		t.Fatalf("cause %v, want a lease_expired LostError", context.Cause(h.Context()))
	}
	if end := h.AcquiredAt().Add(lease); !at.Before(end) {
		t.Fatalf("loss seen %v after the lease's end (sent + lease)", at.Sub(end))
	}
}

// Finding 13: Unlock and Close with context.Background() return against a
// dead master, once the lease must have run out.
func TestUnlockAndCloseAreBoundedOnADeadMaster(t *testing.T) {
	for _, viaClose := range []bool{false, true} {
		t.Run(fmt.Sprintf("close=%v", viaClose), func(t *testing.T) {
			srv := integrationRedis(t)
			lease := time.Second
			c := newClient(t, lock.Config{WatchdogTimeout: lease, RenewInterval: 300 * time.Millisecond, CommandTimeout: 200 * time.Millisecond}, srv)
			h, err := c.Mutex(name(t)).Lock(bg())
			must(t, err)
			must(t, srv.Kill(bg()))
			done := make(chan error, 1)
			go func() {
				if viaClose {
					done <- c.Close(bg())
				} else {
					done <- h.Unlock(bg())
				}
			}()
			select {
			case err := <-done:
				if viaClose && err == nil {
					t.Fatal("Close on a dead master = nil, want the locks it could not release")
				}
				if !viaClose && !errors.Is(err, lock.ErrLockLost) && !errors.Is(err, lock.ErrUnavailable) {
					t.Fatalf("Unlock on a dead master = %v", err)
				}
			case <-time.After(5 * lease):
				t.Fatal("still blocked 5 leases after the master died")
			}
		})
	}
}

// Finding 14b: a last Unlock that fails stops renewal and is completed in
// the background: the lock is gone once the master is back, though Unlock
// is not called again, and the hold's context ends.
func TestFailedLastUnlockIsNotRenewedForEver(t *testing.T) {
	srv := integrationRedis(t)
	lease := time.Second
	c := newClient(t, lock.Config{WatchdogTimeout: lease, RenewInterval: 300 * time.Millisecond, CommandTimeout: 200 * time.Millisecond}, srv)
	other := newClient(t, lock.Config{}, srv)
	n := name(t)
	h, err := c.Mutex(n).Lock(bg())
	must(t, err)
	must(t, srv.Partition(bg()))
	uctx, cancel := context.WithTimeout(bg(), 300*time.Millisecond)
	err = h.Unlock(uctx)
	cancel()
	must(t, srv.Heal(bg()))
	if err == nil {
		t.Fatal("Unlock through a partition = nil")
	}
	select {
	case <-h.Done(): // completed in the background (or lost), not renewed for ever
	case <-time.After(4 * lease):
		t.Fatal("the hold is still alive 4 leases after its last Unlock failed and the partition healed")
	}
	g, err := other.Mutex(n).TryLock(bg(), lock.Wait(4*lease))
	if err != nil {
		t.Fatalf("the lock was never freed: %v", err)
	}
	must(t, g.Unlock(bg()))
}

// Misuse P2-21: Lock calls cut by their deadline mid-acquire leave no
// stray locks behind once every Client has closed.
func TestDeadlineCutLocksLeaveNothing(t *testing.T) {
	rc := raw(t)
	prefix := name(t)
	var cs []*lock.Client
	for range 4 {
		cs = append(cs, newClient(t, lock.Config{}))
	}
	stop := time.Now().Add(2 * time.Second)
	var wg sync.WaitGroup
	for g := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				ctx, cancel := context.WithTimeout(bg(), time.Duration(1+rand.IntN(20))*time.Millisecond)
				if h, err := cs[g%4].Mutex(fmt.Sprintf("%s:%d", prefix, rand.IntN(5))).Lock(ctx); err == nil {
					_ = h.Unlock(bg())
				}
				cancel()
			}
		}()
	}
	wg.Wait()
	for _, c := range cs {
		if err := c.Close(bg()); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		if n := fmt.Sprintf("%s:%d", prefix, i); exists(t, rc, n) {
			t.Fatalf("stray lock %s left after every Client closed", n)
		}
	}
}

// The fenced acquire of a lock held by another owner whose key has no
// TTL (Redisson's clearExpire) is "busy", never "acquired".
func TestFencedAcquireOfANoTTLLockIsBusy(t *testing.T) {
	c := newClient(t, lock.Config{})
	rc := raw(t)
	n := name(t)
	do(t, rc, "HSET", n, "someone-else:1", "1") // held, no expiry
	_, err := c.Mutex(n).TryLock(bg(), lock.Fenced())
	var conflict *lock.ConflictError
	if !errors.As(err, &conflict) || conflict.TTL >= 0 {
		t.Fatalf("fenced TryLock of a no-TTL lock held by another = %v, want a ConflictError without TTL", err)
	}
	if got := hgetInt(t, rc, n, "someone-else:1"); got != 1 {
		t.Fatalf("the holder's count changed to %d", got)
	}
	do(t, rc, "DEL", n)
}

// Finding 20 (sticky renewal): an outer hold taken with an explicit Lease
// is not renewed for good because a watchdog re-entry came and went.
func TestExplicitLeaseNotRenewedAfterAWatchdogReentry(t *testing.T) {
	c := newClient(t, lock.Config{WatchdogTimeout: time.Second, RenewInterval: 200 * time.Millisecond})
	n := name(t)
	outer, err := c.Mutex(n).Lock(bg(), lock.Lease(time.Second))
	must(t, err)
	inner, err := c.Mutex(n).Lock(outer.Context()) // renewed by the watchdog
	must(t, err)
	must(t, inner.Unlock(bg()))
	select {
	case <-outer.Done():
		var lost *lock.LostError
		if !errors.As(context.Cause(outer.Context()), &lost) {
			t.Fatalf("outer cause %v, want a LostError", context.Cause(outer.Context()))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the explicit lease is still renewed 5 leases later")
	}
}

// Found by the fault suite (seed 807561229) in the hold itself: a Lock
// that waits out a paused master must not end with Redis counting its
// first, settled attempt as an extra hold: the count is the live Helds.
func TestLockAfterAPauseCountsOneHold(t *testing.T) {
	srv := integrationRedis(t)
	c := newClient(t, lock.Config{WatchdogTimeout: 400 * time.Millisecond, CommandTimeout: 200 * time.Millisecond}, srv)
	rc := raw(t, srv)
	for round := 0; round < 3; round++ {
		n := name(t)
		must(t, srv.Pause(bg()))
		type result struct {
			h   *lock.Held
			err error
		}
		got := make(chan result, 1)
		go func() {
			ctx, cancel := context.WithTimeout(bg(), 10*time.Second)
			defer cancel()
			h, err := c.Mutex(n).Lock(ctx)
			got <- result{h, err}
		}()
		time.Sleep(700 * time.Millisecond) // the fault's length: the first attempt outlives its retries
		must(t, srv.Resume(bg()))
		r := <-got
		must(t, r.err)
		if r.h.Reentrant() {
			t.Fatalf("round %d: a first hold reported as a re-entry", round)
		}
		if n := hgetInt(t, rc, n, reentrant.Field(c.ID(), r.h.Owner())); n != 1 {
			t.Fatalf("round %d: Redis counts %d holds for 1 Held", round, n)
		}
		must(t, r.h.Unlock(bg()))
	}
}
