package redissonstandin_test

import (
	"context"
	"errors"
	"testing"
	"time"

	rs "github.com/rlock-go/rlock/internal/redissonstandin"
)

// The spin lock uses the plain lock's hash and field, re-enters, and
// publishes nothing on release or force unlock; a spinning waiter gets the
// lock once it is released.
func TestSpinLockPublishesNothing(t *testing.T) {
	rc := raw(t)
	a, b := newClient(rc, rs.V4_7_0, nil), newClient(rc, rs.V4_7_0, nil)
	n := name()
	sa, sb := a.SpinLock(n), b.SpinLock(n)
	s := psubscribe(t, "*"+n+"*")

	for i := 0; i < 2; i++ {
		if r, err := sa.TryAcquire(bg(), 1, 20*time.Second); err != nil || !r.Acquired {
			t.Fatalf("acquire %d: %+v, %v", i, r, err)
		}
	}
	equalMap(t, "hash", hash(t, rc, n), map[string]string{a.Field(1): "2"})
	if r, err := sb.TryAcquire(bg(), 1, 0); err != nil || r.Acquired {
		t.Fatalf("other service: %+v, %v", r, err)
	} else {
		between(t, "TTL", r.TTL, 19000, 20000)
	}
	if r, err := sa.Unlock(bg(), 1); err != nil || r != rs.StillHeld {
		t.Fatalf("inner unlock = %v, %v", r, err)
	}
	between(t, "PTTL after an inner unlock (the last lease sent)", pttl(t, rc, n), 19000, 20000)

	locked := make(chan error, 1)
	ctx, cancel := context.WithTimeout(bg(), 10*time.Second)
	defer cancel()
	go func() { locked <- sb.Lock(ctx, 1, 0, rs.ExponentialBackoff{}.Policy(nil)) }()
	if r, err := sa.Unlock(bg(), 1); err != nil || r != rs.Released {
		t.Fatalf("unlock = %v, %v", r, err)
	}
	must(t, <-locked)
	equalMap(t, "hash", hash(t, rc, n), map[string]string{b.Field(1): "1"})
	if ok, err := sa.ForceUnlock(bg()); err != nil || !ok {
		t.Fatalf("force unlock = %v, %v", ok, err)
	}
	if exists(t, rc, n) {
		t.Fatal("force unlock left the hash")
	}
	s.marker(t, rc, "marker:"+n) // nothing before the marker
}

// The non-reentrant lock: a re-acquire by the holder is an error and
// changes nothing; others get the PTTL; release is the plain lock's, with
// "0" on redisson_lock__channel. 3.52.0 has no such lock.
func TestNonReentrantLockRefusesReacquire(t *testing.T) {
	rc := raw(t)
	a, b := newClient(rc, rs.V4_7_0, nil), newClient(rc, rs.V4_7_0, nil)
	n := name()
	la, lb := a.NonReentrantLock(n), b.NonReentrantLock(n)
	s := psubscribe(t, "*"+n+"*")

	if r, err := la.TryAcquire(bg(), 1, 20*time.Second); err != nil || !r.Acquired {
		t.Fatalf("acquire: %+v, %v", r, err)
	}
	if _, err := la.TryAcquire(bg(), 1, 40*time.Second); !errors.Is(err, rs.ErrReacquire) {
		t.Fatalf("re-acquire = %v, want ErrReacquire", err)
	}
	equalMap(t, "hash after a refused re-acquire", hash(t, rc, n), map[string]string{a.Field(1): "1"})
	between(t, "PTTL unchanged by the refusal", pttl(t, rc, n), 19000, 20000)
	if r, err := la.TryAcquire(bg(), 2, 0); err != nil || r.Acquired {
		t.Fatalf("same service, other thread: %+v, %v; want refused", r, err)
	}
	if r, err := lb.TryAcquire(bg(), 1, 0); err != nil || r.Acquired || r.TTL <= 0 {
		t.Fatalf("other service: %+v, %v; want the PTTL", r, err)
	}
	if r, err := la.Unlock(bg(), 1); err != nil || r != rs.Released {
		t.Fatalf("unlock = %v, %v", r, err)
	}
	s.expect(t, la.Channel(), rs.UnlockMessage)
	if r, err := lb.TryAcquire(bg(), 1, 0); err != nil || !r.Acquired {
		t.Fatalf("after release: %+v, %v", r, err)
	}
	if _, err := newClient(rc, rs.V3_52_0, nil).NonReentrantLock(n).TryAcquire(bg(), 1, 0); !errors.Is(err, rs.ErrNotInVersion) {
		t.Fatalf("3.52.0 non-reentrant lock = %v, want ErrNotInVersion", err)
	}
}

// The plain lock, for the base the others share: layout, renewal, latch.
func TestPlainLockLayout(t *testing.T) {
	rc := raw(t)
	a := newClient(rc, rs.V4_7_0, nil)
	n := name()
	l := a.Lock(n)
	s := psubscribe(t, "*"+n+"*")
	if len(a.ID()) != 36 || a.Field(7) != a.ID()+":7" {
		t.Fatalf("id %q, field %q", a.ID(), a.Field(7))
	}
	if got, want := l.Channel(), "redisson_lock__channel:{"+n+"}"; got != want {
		t.Fatalf("channel %q, want %q", got, want)
	}
	if r, err := l.TryAcquire(bg(), 7, 2*time.Second); err != nil || !r.Acquired {
		t.Fatalf("acquire: %+v, %v", r, err)
	}
	if ok, err := l.Renew(bg(), 7); err != nil || !ok {
		t.Fatalf("renew = %v, %v", ok, err)
	}
	between(t, "PTTL after renewal", pttl(t, rc, n), 29000, 30000)
	if ok, err := l.Renew(bg(), 8); err != nil || ok {
		t.Fatalf("renew of a non-holder = %v, %v", ok, err)
	}
	if r, err := l.Unlock(bg(), 8); err != nil || r != rs.NotHeld {
		t.Fatalf("unlock by a non-holder = %v, %v", r, err)
	}
	if r, err := l.Unlock(bg(), 7); err != nil || r != rs.Released {
		t.Fatalf("unlock = %v, %v", r, err)
	}
	s.expect(t, l.Channel(), rs.UnlockMessage)
	if ks, err := do(t, rc, "KEYS", "*"+n+"*").AsStrSlice(); err != nil || len(ks) != 0 {
		t.Fatalf("keys left %q, %v (the latch is deleted after the answer)", ks, err)
	}
}
