package redissonstandin_test

import (
	"testing"
	"time"

	rs "github.com/rlock-go/rlock/internal/redissonstandin"
)

// Three waiters from two Java services queue behind a holder in arrival
// order, with timeouts chained by the wait time; each unlock wakes exactly
// the head with "0" on its own channel, and each acquire lowers the
// others' timeouts by the acquirer's wait.
func TestFairLockFIFOOfThreeWaiters(t *testing.T) {
	rc := raw(t)
	clk := newClock()
	a, b := newClient(rc, rs.V4_7_0, clk.Now), newClient(rc, rs.V4_7_0, clk.Now)
	n := name()
	la, lb := a.FairLock(n), b.FairLock(n)
	s := psubscribe(t, "*"+n+"*")
	const wait = 10 * time.Second
	w := wait.Milliseconds()

	if got, want := la.Queue(), "redisson_lock_queue:{"+n+"}"; got != want {
		t.Fatalf("queue %q, want %q", got, want)
	}
	if got, want := la.Timeouts(), "redisson_lock_timeout:{"+n+"}"; got != want {
		t.Fatalf("timeouts %q, want %q", got, want)
	}
	if got, want := lb.WaiterChannel(1), "redisson_lock__channel:{"+n+"}:"+b.ID()+":1"; got != want {
		t.Fatalf("waiter channel %q, want %q", got, want)
	}

	acq, err := la.TryAcquire(bg(), 1, 60*time.Second, wait)
	must(t, err)
	if !acq.Acquired {
		t.Fatal("free fair lock not acquired")
	}
	equalMap(t, "hash", hash(t, rc, n), map[string]string{a.Field(1): "1"})
	if exists(t, rc, la.Queue()) || exists(t, rc, la.Timeouts()) {
		t.Fatal("an uncontended acquire left a queue")
	}

	// b:1, b:2, a:2 queue.
	now := clk.ms()
	first, err := lb.TryAcquire(bg(), 1, 0, wait)
	must(t, err)
	between(t, "first waiter's TTL (the hash's PTTL)", first.TTL, 50000, 60000)
	second, err := lb.TryAcquire(bg(), 2, 0, wait)
	must(t, err)
	third, err := la.TryAcquire(bg(), 2, 0, wait)
	must(t, err)
	if first.Acquired || second.Acquired || third.Acquired {
		t.Fatal("a waiter acquired a held fair lock")
	}
	equalList(t, "queue", list(t, rc, la.Queue()), []string{b.Field(1), b.Field(2), a.Field(2)})
	s1 := score(t, rc, la.Timeouts(), b.Field(1))
	if want := rs.FairWaiterTimeout(first.TTL, w, now); s1 != want {
		t.Fatalf("first waiter's timeout %d, want TTL+wait+now = %d", s1, want)
	}
	if second.TTL != s1-now || third.TTL != s1+w-now {
		t.Fatalf("later waiters' TTLs %d, %d; want %d, %d (the previous waiter's timeout - now)", second.TTL, third.TTL, s1-now, s1+w-now)
	}
	if s2, s3 := score(t, rc, la.Timeouts(), b.Field(2)), score(t, rc, la.Timeouts(), a.Field(2)); s2 != s1+w || s3 != s1+2*w {
		t.Fatalf("timeouts %d, %d; want %d, %d", s2, s3, s1+w, s1+2*w)
	}
	// A waiter already queued asks again: PTTL of the hash, no change.
	again, err := lb.TryAcquire(bg(), 2, 0, wait)
	must(t, err)
	between(t, "queued waiter's TTL", again.TTL, 1, 60000)
	equalList(t, "queue after a re-ask", list(t, rc, la.Queue()), []string{b.Field(1), b.Field(2), a.Field(2)})

	// Holder unlocks: the head (b:1) alone is told.
	if r, err := la.Unlock(bg(), 1); err != nil || r != rs.Released {
		t.Fatalf("unlock = %v, %v", r, err)
	}
	s.expect(t, lb.WaiterChannel(1), rs.UnlockMessage)
	// Not the head: refused even though the lock is free, TTL max(0, PTTL of no key) = 0.
	if r, err := lb.TryAcquire(bg(), 2, 0, wait); err != nil || r.Acquired || r.TTL != 0 {
		t.Fatalf("second waiter on a free lock = %+v, %v; want refused with TTL 0", r, err)
	}
	s.marker(t, rc, "marker:"+n)

	for i, next := range []struct {
		l      *rs.FairLock
		thread uint64
		field  string
		rest   []string
	}{
		{lb, 1, b.Field(1), []string{b.Field(2), a.Field(2)}},
		{lb, 2, b.Field(2), []string{a.Field(2)}},
		{la, 2, a.Field(2), nil},
	} {
		before := map[string]int64{}
		for _, f := range next.rest {
			before[f] = score(t, rc, la.Timeouts(), f)
		}
		if r, err := next.l.TryAcquire(bg(), next.thread, 0, wait); err != nil || !r.Acquired {
			t.Fatalf("head %d: %+v, %v; want acquired", i, r, err)
		}
		equalMap(t, "hash", hash(t, rc, n), map[string]string{next.field: "1"})
		equalList(t, "queue", list(t, rc, la.Queue()), next.rest)
		for _, f := range next.rest {
			if got := score(t, rc, la.Timeouts(), f); got != before[f]-w {
				t.Fatalf("timeout of %s after an acquire = %d, want %d", f, got, before[f]-w)
			}
		}
		if r, err := next.l.Unlock(bg(), next.thread); err != nil || r != rs.Released {
			t.Fatalf("unlock %d = %v, %v", i, r, err)
		}
		if len(next.rest) > 0 {
			s.expect(t, rs.FairWaiterChannel(n, next.rest[0]), rs.UnlockMessage)
		}
	}
	s.marker(t, rc, "marker:"+n)
	if exists(t, rc, la.Queue()) || exists(t, rc, la.Timeouts()) || exists(t, rc, n) {
		t.Fatal("keys left after the last waiter released")
	}
}

// A waiter whose timeout the client's clock has passed is pruned by the
// next script; the unlock then wakes the waiter behind it.
func TestFairLockPrunesStaleWaiter(t *testing.T) {
	rc := raw(t)
	clk := newClock()
	a, b := newClient(rc, rs.V4_7_0, clk.Now), newClient(rc, rs.V4_7_0, clk.Now)
	n := name()
	la, lb := a.FairLock(n), b.FairLock(n)
	s := psubscribe(t, "*"+n+"*")
	const wait = 5 * time.Second

	if r, err := la.TryAcquire(bg(), 1, 60*time.Second, wait); err != nil || !r.Acquired {
		t.Fatalf("acquire: %+v, %v", r, err)
	}
	for _, th := range []uint64{1, 2} {
		if r, err := lb.TryAcquire(bg(), th, 0, wait); err != nil || r.Acquired {
			t.Fatalf("waiter %d: %+v, %v", th, r, err)
		}
	}
	s1 := score(t, rc, la.Timeouts(), b.Field(1))
	// The clock reaches b:1's timeout (<= now counts as stale), not b:2's.
	clk.Set(time.UnixMilli(s1))
	if r, err := la.Unlock(bg(), 1); err != nil || r != rs.Released {
		t.Fatalf("unlock = %v, %v", r, err)
	}
	s.expect(t, lb.WaiterChannel(2), rs.UnlockMessage)
	equalList(t, "queue after pruning", list(t, rc, la.Queue()), []string{b.Field(2)})
	if _, err := do(t, rc, "ZSCORE", la.Timeouts(), b.Field(1)).AsInt64(); err == nil {
		t.Fatal("the stale waiter's timeout is still in the zset")
	}
	// The pruned waiter asks again: it is queued anew, behind b:2.
	if r, err := lb.TryAcquire(bg(), 1, 0, wait); err != nil || r.Acquired {
		t.Fatalf("pruned waiter: %+v, %v; want queued", r, err)
	}
	equalList(t, "queue", list(t, rc, la.Queue()), []string{b.Field(2), b.Field(1)})
	if r, err := lb.TryAcquire(bg(), 2, 0, wait); err != nil || !r.Acquired {
		t.Fatalf("head: %+v, %v; want acquired", r, err)
	}
}

// acquireFailedAsync: a waiter leaves; those behind it have their timeout
// lowered by the wait given. TryAcquireOnce never queues. The fair unlock
// of a missing hash answers 1 (not nil) and still wakes the head.
func TestFairLockCancelWaitAndOnce(t *testing.T) {
	rc := raw(t)
	clk := newClock()
	a, b := newClient(rc, rs.V3_52_0, clk.Now), newClient(rc, rs.V3_52_0, clk.Now)
	n := name()
	la, lb := a.FairLock(n), b.FairLock(n)
	s := psubscribe(t, "*"+n+"*")
	const wait = 7 * time.Second

	if ok, err := la.TryAcquireOnce(bg(), 1, 0); err != nil || !ok {
		t.Fatalf("tryLock() on a free lock = %v, %v", ok, err)
	}
	between(t, "PTTL with no lease (watchdog)", pttl(t, rc, n), 29000, 30000)
	if ok, err := lb.TryAcquireOnce(bg(), 1, 0); err != nil || ok {
		t.Fatalf("tryLock() on a held lock = %v, %v", ok, err)
	}
	if exists(t, rc, la.Queue()) {
		t.Fatal("tryLock() queued the caller")
	}
	for _, th := range []uint64{1, 2, 3} {
		if r, err := lb.TryAcquire(bg(), th, 0, wait); err != nil || r.Acquired {
			t.Fatalf("waiter %d: %+v, %v", th, r, err)
		}
	}
	s1 := score(t, rc, la.Timeouts(), b.Field(1))
	s3 := score(t, rc, la.Timeouts(), b.Field(3))
	must(t, lb.CancelWait(bg(), 2, wait))
	equalList(t, "queue", list(t, rc, la.Queue()), []string{b.Field(1), b.Field(3)})
	if got := score(t, rc, la.Timeouts(), b.Field(1)); got != s1 {
		t.Fatalf("waiter ahead of the leaver moved: %d, want %d", got, s1)
	}
	if got := score(t, rc, la.Timeouts(), b.Field(3)); got != s3-wait.Milliseconds() {
		t.Fatalf("waiter behind the leaver: %d, want %d", got, s3-wait.Milliseconds())
	}

	// Force unlock: DEL and wake the head.
	if ok, err := la.ForceUnlock(bg()); err != nil || !ok {
		t.Fatalf("force unlock = %v, %v", ok, err)
	}
	s.expect(t, lb.WaiterChannel(1), rs.UnlockMessage)
	// Unlock with no hash: 1, and the head is woken again.
	if r, err := la.Unlock(bg(), 1); err != nil || r != rs.Released {
		t.Fatalf("unlock of a missing fair lock = %v, %v; want released (1)", r, err)
	}
	s.expect(t, lb.WaiterChannel(1), rs.UnlockMessage)
	// Latch: a retried unlock answers as the first and decrements once.
	if r, err := lb.TryAcquire(bg(), 1, 0, wait); err != nil || !r.Acquired {
		t.Fatalf("head: %+v, %v", r, err)
	}
	if r, err := lb.TryAcquire(bg(), 1, 0, wait); err != nil || !r.Acquired {
		t.Fatalf("re-entry: %+v, %v", r, err)
	}
	req := rs.NewRequestID()
	for i := 0; i < 2; i++ {
		if r, err := lb.UnlockInner(bg(), 1, req); err != nil || r != rs.StillHeld {
			t.Fatalf("unlock try %d = %v, %v; want still held", i, r, err)
		}
	}
	equalMap(t, "hash", hash(t, rc, n), map[string]string{b.Field(1): "1"})
	between(t, "latch PTTL", pttl(t, rc, rs.LatchName(n, req)), 1, rs.DefaultLatchTimeout.Milliseconds())
	s.marker(t, rc, "marker:"+n)
}
