package redissonstandin_test

import (
	"errors"
	"testing"
	"time"

	rs "github.com/rlock-go/rlock/internal/redissonstandin"
)

// Two services share a read lock; a writer is kept out until the last
// reader leaves, and the last read unlock publishes "0" on the rwlock
// channel.
func TestReadLocksSharedWriterExcluded(t *testing.T) {
	rc := raw(t)
	a, b := newClient(rc, rs.V4_7_0, nil), newClient(rc, rs.V4_7_0, nil)
	n := name()
	ra, rb, wb := a.ReadLock(n), b.ReadLock(n), b.WriteLock(n)
	s := psubscribe(t, "*"+n+"*")

	if got, want := ra.Channel(), "redisson_rwlock:{"+n+"}"; got != want {
		t.Fatalf("channel %q, want %q", got, want)
	}
	if got, want := ra.TimeoutKey(1, 1), "{"+n+"}:"+a.ID()+":1:rwlock_timeout:1"; got != want {
		t.Fatalf("timeout key %q, want %q", got, want)
	}

	if r, err := ra.TryAcquire(bg(), 1, 20*time.Second); err != nil || !r.Acquired {
		t.Fatalf("first reader: %+v, %v", r, err)
	}
	between(t, "hash PTTL after a first read", pttl(t, rc, n), 19000, 20000)
	if r, err := rb.TryAcquire(bg(), 1, 40*time.Second); err != nil || !r.Acquired {
		t.Fatalf("second reader: %+v, %v", r, err)
	}
	between(t, "hash PTTL = max(PTTL, lease)", pttl(t, rc, n), 39000, 40000)
	// a re-enters with a shorter lease: the hash keeps its longer PTTL.
	if r, err := ra.TryAcquire(bg(), 1, 5*time.Second); err != nil || !r.Acquired {
		t.Fatalf("re-entry: %+v, %v", r, err)
	}
	between(t, "hash PTTL after a shorter re-entry", pttl(t, rc, n), 38000, 40000)
	equalMap(t, "hash", hash(t, rc, n), map[string]string{rs.ModeField: rs.ModeRead, a.Field(1): "2", b.Field(1): "1"})
	between(t, "a's hold 1", pttl(t, rc, ra.TimeoutKey(1, 1)), 18000, 20000)
	between(t, "a's hold 2", pttl(t, rc, ra.TimeoutKey(1, 2)), 4000, 5000)
	between(t, "b's hold 1", pttl(t, rc, rb.TimeoutKey(1, 1)), 38000, 40000)
	if v, err := do(t, rc, "GET", ra.TimeoutKey(1, 1)).ToString(); err != nil || v != "1" {
		t.Fatalf("timeout key value %q, %v; want \"1\"", v, err)
	}
	if ok, err := ra.IsLocked(bg()); err != nil || !ok {
		t.Fatalf("isLocked = %v, %v", ok, err)
	}

	// A writer is refused with the hash's PTTL, even the thread of a reader.
	if r, err := wb.TryAcquire(bg(), 1, 0); err != nil || r.Acquired {
		t.Fatalf("writer while read-locked: %+v, %v", r, err)
	} else {
		between(t, "writer's TTL", r.TTL, 38000, 40000)
	}
	if r, err := a.WriteLock(n).TryAcquire(bg(), 1, 0); err != nil || r.Acquired {
		t.Fatalf("reader's own thread upgrading: %+v, %v; want refused", r, err)
	}

	// b (40 s) leaves: the PTTL becomes the largest remaining timeout key (a's 20 s).
	if r, err := rb.Unlock(bg(), 1); err != nil || r != rs.StillHeld {
		t.Fatalf("b's unlock = %v, %v; want 0", r, err)
	}
	between(t, "hash PTTL = max remaining timeout key", pttl(t, rc, n), 15000, 20000)
	if exists(t, rc, rb.TimeoutKey(1, 1)) {
		t.Fatal("b's timeout key left")
	}
	if r, err := ra.Unlock(bg(), 1); err != nil || r != rs.StillHeld {
		t.Fatalf("a's inner unlock = %v, %v", r, err)
	}
	if exists(t, rc, ra.TimeoutKey(1, 2)) || !exists(t, rc, ra.TimeoutKey(1, 1)) {
		t.Fatal("a read unlock must delete the top hold's key only")
	}
	s.marker(t, rc, "marker:"+n)
	if r, err := ra.Unlock(bg(), 1); err != nil || r != rs.Released {
		t.Fatalf("last read unlock = %v, %v; want 1", r, err)
	}
	s.expect(t, ra.Channel(), rs.UnlockMessage)
	if exists(t, rc, n) || exists(t, rc, ra.TimeoutKey(1, 1)) {
		t.Fatal("keys left after the last reader")
	}
	if r, err := wb.TryAcquire(bg(), 1, 0); err != nil || !r.Acquired {
		t.Fatalf("writer after the readers: %+v, %v", r, err)
	}
	// Unlock of a reader that never held, with a writer in: nil, nothing published.
	if r, err := ra.Unlock(bg(), 1); err != nil || r != rs.NotHeld {
		t.Fatalf("non-holder's read unlock = %v, %v; want nil", r, err)
	}
	s.marker(t, rc, "marker:"+n)
}

// A writer keeps other readers and writers out; its own thread may read
// (mode stays write); its re-entry adds the lease to the PTTL; its last
// unlock with its reads left switches to mode read silently.
func TestWriterExcludesReadersButNotItsOwnThread(t *testing.T) {
	rc := raw(t)
	a, b := newClient(rc, rs.V4_7_0, nil), newClient(rc, rs.V4_7_0, nil)
	n := name()
	wa, ra, rb := a.WriteLock(n), a.ReadLock(n), b.ReadLock(n)
	s := psubscribe(t, "*"+n+"*")

	if r, err := wa.TryAcquire(bg(), 1, 10*time.Second); err != nil || !r.Acquired {
		t.Fatalf("writer: %+v, %v", r, err)
	}
	equalMap(t, "hash", hash(t, rc, n), map[string]string{rs.ModeField: rs.ModeWrite, a.Field(1) + ":write": "1"})
	before := pttl(t, rc, n)
	if r, err := wa.TryAcquire(bg(), 1, 10*time.Second); err != nil || !r.Acquired {
		t.Fatalf("writer re-entry: %+v, %v", r, err)
	}
	between(t, "PTTL after a write re-entry (PTTL + lease)", pttl(t, rc, n), rs.WriteReentryPTTL(before, 10000)-1000, rs.WriteReentryPTTL(before, 10000))
	for _, other := range []struct {
		what string
		try  func() (rs.Acquire, error)
	}{
		{"other service's reader", func() (rs.Acquire, error) { return rb.TryAcquire(bg(), 1, 0) }},
		{"same service, other thread, reader", func() (rs.Acquire, error) { return ra.TryAcquire(bg(), 2, 0) }},
		{"other writer", func() (rs.Acquire, error) { return b.WriteLock(n).TryAcquire(bg(), 1, 0) }},
	} {
		if r, err := other.try(); err != nil || r.Acquired || r.TTL <= 10000 {
			t.Fatalf("%s while write-locked: %+v, %v; want refused with the PTTL", other.what, r, err)
		}
	}
	// The writer's own thread reads: mode stays write.
	if r, err := ra.TryAcquire(bg(), 1, 5*time.Second); err != nil || !r.Acquired {
		t.Fatalf("writer's thread reading: %+v, %v", r, err)
	}
	equalMap(t, "hash", hash(t, rc, n), map[string]string{rs.ModeField: rs.ModeWrite, wa.Field(1): "2", a.Field(1): "1"})
	if ok, err := ra.IsLocked(bg()); err != nil || !ok {
		t.Fatalf("read isLocked with the writer's own read = %v, %v", ok, err)
	}
	// Inner write unlock: PEXPIRE internalLockLeaseTime (the 10 s lease), answer 0.
	if r, err := wa.Unlock(bg(), 1); err != nil || r != rs.StillHeld {
		t.Fatalf("inner write unlock = %v, %v", r, err)
	}
	between(t, "PTTL after an inner write unlock", pttl(t, rc, n), 9000, 10000)
	s.marker(t, rc, "marker:"+n)
	before = pttl(t, rc, n)
	// Last write unlock, the read left: mode read, 1, no message, PTTL untouched.
	if r, err := wa.Unlock(bg(), 1); err != nil || r != rs.Released {
		t.Fatalf("last write unlock = %v, %v", r, err)
	}
	equalMap(t, "hash", hash(t, rc, n), map[string]string{rs.ModeField: rs.ModeRead, a.Field(1): "1"})
	between(t, "PTTL after the write unlock with a reader left", pttl(t, rc, n), before-1000, before)
	s.marker(t, rc, "marker:"+n)
	// Now other readers may join.
	if r, err := rb.TryAcquire(bg(), 1, 0); err != nil || !r.Acquired {
		t.Fatalf("reader after the writer left: %+v, %v", r, err)
	}
}

// The write unlock that frees the lock publishes "1"; a write unlock or a
// read unlock finding no lock publishes anyway ("1" and "0") and answers
// nil. Force unlocks act only in their own mode.
func TestReadWriteMessagesAndForceUnlock(t *testing.T) {
	rc := raw(t)
	a := newClient(rc, rs.V3_52_0, nil)
	n := name()
	w, r := a.WriteLock(n), a.ReadLock(n)
	s := psubscribe(t, "*"+n+"*")

	if res, err := w.TryAcquire(bg(), 1, 0); err != nil || !res.Acquired {
		t.Fatalf("writer: %+v, %v", res, err)
	}
	between(t, "writer's PTTL with no lease (watchdog)", pttl(t, rc, n), 29000, 30000)
	if res, err := w.Unlock(bg(), 1); err != nil || res != rs.Released {
		t.Fatalf("write unlock = %v, %v", res, err)
	}
	s.expect(t, w.Channel(), rs.ReadUnlockMessage)
	if res, err := w.Unlock(bg(), 1); err != nil || res != rs.NotHeld {
		t.Fatalf("write unlock of nothing = %v, %v", res, err)
	}
	s.expect(t, w.Channel(), rs.ReadUnlockMessage)
	if res, err := r.Unlock(bg(), 1); err != nil || res != rs.NotHeld {
		t.Fatalf("read unlock of nothing = %v, %v", res, err)
	}
	s.expect(t, r.Channel(), rs.UnlockMessage)

	// Force unlocks: each only in its own mode.
	if res, err := r.TryAcquire(bg(), 1, 0); err != nil || !res.Acquired {
		t.Fatalf("reader: %+v, %v", res, err)
	}
	if ok, err := w.ForceUnlock(bg()); err != nil || ok {
		t.Fatalf("write force unlock in mode read = %v, %v; want 0", ok, err)
	}
	if ok, err := r.ForceUnlock(bg()); err != nil || !ok {
		t.Fatalf("read force unlock = %v, %v", ok, err)
	}
	s.expect(t, r.Channel(), rs.UnlockMessage)
	if !exists(t, rc, r.TimeoutKey(1, 1)) {
		t.Fatal("read force unlock is DEL of the hash only; the timeout key should remain")
	}
	if res, err := w.TryAcquire(bg(), 1, 0); err != nil || !res.Acquired {
		t.Fatalf("writer: %+v, %v", res, err)
	}
	if ok, err := r.ForceUnlock(bg()); err != nil || ok {
		t.Fatalf("read force unlock in mode write = %v, %v; want 0", ok, err)
	}
	if ok, err := w.ForceUnlock(bg()); err != nil || !ok {
		t.Fatalf("write force unlock = %v, %v", ok, err)
	}
	s.expect(t, w.Channel(), rs.ReadUnlockMessage)
	s.marker(t, rc, "marker:"+n)
}

// ReadLockTask, 4.7.0: the renewal names each of the client's reading
// threads and extends their own timeout keys (every hold) and the hash;
// another service's keys are left alone.
func TestReadRenewal4(t *testing.T) {
	rc := raw(t)
	a, b := newClient(rc, rs.V4_7_0, nil), newClient(rc, rs.V4_7_0, nil)
	n := name()
	ra, rb := a.ReadLock(n), b.ReadLock(n)
	for _, l := range []*rs.ReadLock{ra, ra, rb} {
		if r, err := l.TryAcquire(bg(), 1, 3*time.Second); err != nil || !r.Acquired {
			t.Fatalf("reader: %+v, %v", r, err)
		}
	}
	if ok, err := ra.Renew(bg(), 1); err != nil || !ok {
		t.Fatalf("renew = %v, %v", ok, err)
	}
	between(t, "hash", pttl(t, rc, n), 29000, 30000)
	between(t, "a's hold 1", pttl(t, rc, ra.TimeoutKey(1, 1)), 29000, 30000)
	between(t, "a's hold 2", pttl(t, rc, ra.TimeoutKey(1, 2)), 29000, 30000)
	between(t, "b's hold (not a's to renew)", pttl(t, rc, rb.TimeoutKey(1, 1)), 1, 3000)
	// A thread that holds nothing: not renewed.
	if ok, err := ra.Renew(bg(), 9); err != nil || ok {
		t.Fatalf("renew of a non-holder = %v, %v; want 0", ok, err)
	}
}

// ReadLockTask, 3.52.0: the renewal sends the first thread's field only;
// it renews the hash and then every reader's timeout keys (another
// service's too), but a hold count of 2 or more makes its inner loop index
// KEYS[count+1], nil with one lock: the script fails after renewing the
// hash, and the timeout keys are not renewed.
func TestReadRenewal3(t *testing.T) {
	rc := raw(t)
	a, b := newClient(rc, rs.V3_52_0, nil), newClient(rc, rs.V3_52_0, nil)
	n := name()
	ra, rb := a.ReadLock(n), b.ReadLock(n)
	for _, l := range []*rs.ReadLock{ra, rb} {
		if r, err := l.TryAcquire(bg(), 1, 3*time.Second); err != nil || !r.Acquired {
			t.Fatalf("reader: %+v, %v", r, err)
		}
	}
	if ok, err := ra.Renew(bg(), 1); err != nil || !ok {
		t.Fatalf("renew = %v, %v", ok, err)
	}
	between(t, "hash", pttl(t, rc, n), 29000, 30000)
	between(t, "a's hold", pttl(t, rc, ra.TimeoutKey(1, 1)), 29000, 30000)
	between(t, "b's hold (3.52.0 renews every reader's keys)", pttl(t, rc, rb.TimeoutKey(1, 1)), 29000, 30000)

	m := name()
	rm := a.ReadLock(m)
	for i := 0; i < 2; i++ {
		if r, err := rm.TryAcquire(bg(), 1, 3*time.Second); err != nil || !r.Acquired {
			t.Fatalf("reader: %+v, %v", r, err)
		}
	}
	_, err := rm.Renew(bg(), 1)
	if err == nil {
		t.Fatal("3.52.0 renewal of a read lock held twice succeeded; its loop should index a nil KEYS entry")
	}
	t.Logf("3.52.0 read renewal with a hold count of 2: %v", err)
	between(t, "hash (renewed before the failure)", pttl(t, rc, m), 29000, 30000)
	between(t, "hold 2 (not renewed)", pttl(t, rc, rm.TimeoutKey(1, 2)), 1, 3000)
	between(t, "hold 1 (not renewed)", pttl(t, rc, rm.TimeoutKey(1, 1)), 1, 3000)
	if errors.Is(err, rs.ErrUnexpected) {
		t.Fatal("want Redis's script error")
	}
}
