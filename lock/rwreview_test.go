package lock_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/rlock-go/rlock/integration"
	rs "github.com/rlock-go/rlock/internal/redissonstandin"
	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/reentrant"
)

// Review R1: one reader owner holds a short read hold and, re-entered, a
// long one. Releasing the long one (the top hold) makes release_read set
// the hash's expiry to the longest timeout key left (the short hold's),
// but the watchdog entry keeps the long hold's deadline (Extend never
// moves it earlier). The short hold's context then stays live after the
// hash expired, and another client's writer is granted beside it.
func TestReviewRWReleasingTheLongReadLeavesNoLiveShortHoldPastTheHash(t *testing.T) {
	c := newClient(t, lock.Config{})
	other := newClient(t, lock.Config{})
	rc := raw(t)
	n := name(t)
	m := c.ReadWriteMutex(n).ReadLock()
	short, err := m.Lock(bg(), lock.Lease(time.Second))
	must(t, err)
	long, err := m.Lock(short.Context(), lock.Lease(30*time.Second))
	must(t, err)
	must(t, long.Unlock(bg()))
	t.Logf("after releasing the long hold: hash PTTL %v", pttl(t, rc, n))
	w, err := other.ReadWriteMutex(n).WriteLock().TryLock(bg(), lock.Wait(2*time.Second))
	if errors.Is(err, lock.ErrNotAcquired) {
		return // the hash keeps the lease the watchdog believes in
	}
	must(t, err)
	defer func() { _ = w.Unlock(bg()) }()
	select {
	case <-short.Done():
	default:
		t.Fatalf("a writer of another client was granted %v after the release while the remaining read hold's context is live (HGETALL %v)",
			time.Since(long.AcquiredAt()), hgetall(t, rc, n))
	}
}

// Review R2: a Redisson reader's renewal (ReadLockTask, both versions)
// PEXPIREs the shared hash to its own lockWatchdogTimeout unconditionally,
// and 3.52.0's also every count-1 reader's timeout key 1: an rlock read
// hold whose lease is longer is cut to it, and another owner's writer can
// then be granted while it is live. rlock's scripts cannot prevent what a
// Java client's script does; docs/redisson.md states the constraint: on
// read-write locks shared with Redisson, rlock's read leases (Lease, and
// WatchdogTimeout) must not exceed the Java services' lockWatchdogTimeout.
// Within it (here Java's 30 s default against a 20 s Lease), the Java
// renewal leaves the hash at least the rlock reader's lease, and no
// writer gets in, whether the Java reader then stops (4.7.0) or releases
// (3.52.0).
func TestReviewRWJavaReadRenewalWithinTheConstraint(t *testing.T) {
	for _, v := range []rs.Version{rs.V4_7_0, rs.V3_52_0} {
		t.Run(v.Tag(), func(t *testing.T) {
			c := newClient(t, lock.Config{})
			other := newClient(t, lock.Config{})
			rc := raw(t)
			java := rs.New(rc, rs.Options{Version: v})
			n := name(t)
			jr := java.ReadLock(n)
			if a, err := jr.TryAcquire(bg(), 1, 0); err != nil || !a.Acquired {
				t.Fatalf("Java read = %+v, %v", a, err)
			}
			r, err := c.ReadWriteMutex(n).ReadLock().Lock(bg(), lock.Lease(20*time.Second))
			must(t, err)
			if _, err := jr.Renew(bg(), 1); err != nil {
				t.Fatalf("Java renew: %v", err)
			}
			if v == rs.V3_52_0 {
				if rel, err := jr.Unlock(bg(), 1); err != nil || rel != rs.StillHeld {
					t.Fatalf("Java read unlock = %v, %v", rel, err)
				}
			}
			if got := pttl(t, rc, n); got < 19*time.Second {
				t.Fatalf("hash PTTL %v after the Java reader's renewal: below the rlock reader's 20 s lease", got)
			}
			if w, err := other.ReadWriteMutex(n).WriteLock().TryLock(bg()); err == nil {
				_ = w.Unlock(bg())
				t.Fatal("another client's writer granted while the rlock read hold is live")
			}
			must(t, r.Unlock(bg()))
		})
	}
}

// Review R1, with the watchdog: a renewed read hold under a re-entry with
// a long Lease. Releasing the long hold cuts the hash to the watchdog's
// lease; when the renewals then fail, the entry is judged at the long
// hold's deadline, long after the hash expired and a writer got in.
func TestReviewRWReleasingTheLongReadThenRenewalsFail(t *testing.T) {
	srv := integrationRedis(t)
	c := newClient(t, lock.Config{WatchdogTimeout: 900 * time.Millisecond, CommandTimeout: 100 * time.Millisecond}, srv)
	other := newClient(t, lock.Config{}, srv)
	rc := raw(t, srv)
	n := name(t)
	m := c.ReadWriteMutex(n).ReadLock()
	renewed, err := m.Lock(bg())
	must(t, err)
	long, err := m.Lock(renewed.Context(), lock.Lease(30*time.Second))
	must(t, err)
	must(t, long.Unlock(bg()))
	inject(t, srv, integration.Rule{Match: isScript(reentrant.RenewReadScript, n), Action: integration.DropRequest, Times: math.MaxInt})
	w, err := other.ReadWriteMutex(n).WriteLock().TryLock(bg(), lock.Wait(2*time.Second))
	if errors.Is(err, lock.ErrNotAcquired) {
		return // the hash keeps the lease the watchdog judges by
	}
	must(t, err)
	defer func() { _ = w.Unlock(bg()) }()
	select {
	case <-renewed.Done():
	default:
		t.Fatalf("a writer of another client was granted %v after the release while the renewed read hold's context is live (HGETALL %v)", time.Since(long.AcquiredAt()), hgetall(t, rc, n))
	}
}

// Review R3 (misuse, one name as two kinds): the reader field is the
// plain lock's field, so an owner holding the read lock "re-enters" the
// plain Mutex of the same name (acquire_counted finds its field) while
// another owner reads: an exclusive Held beside a reader. The hold's
// kind then follows that acquisition, and the read hold's Unlock sends
// the plain release, which deletes the whole hash (the other reader's
// hold with it) and publishes on the plain lock's channel.
func TestReviewRWPlainMutexOfAReadLockedName(t *testing.T) {
	c := newClient(t, lock.Config{})
	other := newClient(t, lock.Config{})
	rc := raw(t)
	n := name(t)
	a, err := c.ReadWriteMutex(n).ReadLock().Lock(bg())
	must(t, err)
	b, err := other.ReadWriteMutex(n).ReadLock().Lock(bg())
	must(t, err)
	p, err := c.Mutex(n).TryLock(a.Context())
	if err == nil {
		must(t, p.Unlock(bg()))
	}
	must(t, a.Unlock(bg()))
	if !exists(t, rc, n) {
		t.Errorf("the read hold's Unlock deleted the lock under the other reader (plain TryLock: %v)", err)
	}
	if err == nil {
		t.Errorf("the plain Mutex of a read-locked name was granted to one reader while another reads")
	} else if !errors.Is(err, lock.ErrInvalid) {
		t.Errorf("plain TryLock by an owner holding the read lock = %v, want ErrInvalid (one owner, two kinds of one name)", err)
	}
	_ = b.Unlock(bg())
}

// Soundness check (passes): one owner holds the write lock and a read;
// the reply of one release is lost (the write release that flips the mode
// to read, or the read release under the write hold), the other release
// follows at once on the other hold. Both holds end plainly, nothing is
// left, and another client's writer gets the lock.
func TestReviewRWOwnerWithBothHalvesLostReleaseReplies(t *testing.T) {
	srv := integrationRedis(t)
	c := newClient(t, lock.Config{CommandTimeout: 100 * time.Millisecond}, srv)
	other := newClient(t, lock.Config{}, srv)
	rc := raw(t, srv)
	for _, first := range []string{"write", "read"} {
		t.Run(first, func(t *testing.T) {
			n := name(t)
			rw := c.ReadWriteMutex(n)
			w, err := rw.WriteLock().Lock(bg())
			must(t, err)
			r, err := rw.ReadLock().Lock(w.Context())
			must(t, err)
			a, b, sc := w, r, reentrant.ReleaseWriteScript
			if first == "read" {
				a, b, sc = r, w, reentrant.ReleaseReadScript
			}
			lost := inject(t, srv, integration.Rule{Match: firstOf(isScript(sc, n)), Action: integration.DropReply})
			must(t, a.Unlock(bg()))
			if lost.Hits() != 1 {
				t.Fatalf("lost %d replies, want 1", lost.Hits())
			}
			must(t, b.Unlock(bg()))
			for _, h := range []*lock.Held{a, b} {
				if cause := context.Cause(h.Context()); cause != context.Canceled {
					t.Fatalf("hold ended with %v", cause)
				}
			}
			ow, err := other.ReadWriteMutex(n).WriteLock().TryLock(bg())
			must(t, err)
			must(t, ow.Unlock(bg()))
			if ks := lockKeys(t, rc, n); len(ks) != 0 {
				t.Fatalf("keys left: %v", ks)
			}
		})
	}
}

// Soundness check (passes): a writer's read acquire whose reply is lost
// is answered once: one read hold, one timeout key; released in either
// order, nothing is left.
func TestReviewRWWritersReadLostAcquireReply(t *testing.T) {
	srv := integrationRedis(t)
	c := newClient(t, lock.Config{CommandTimeout: 100 * time.Millisecond}, srv)
	rc := raw(t, srv)
	n := name(t)
	rw := c.ReadWriteMutex(n)
	w, err := rw.WriteLock().Lock(bg())
	must(t, err)
	lost := inject(t, srv, integration.Rule{Match: firstOf(isScript(reentrant.AcquireReadScript, n)), Action: integration.DropReply})
	r, err := rw.ReadLock().Lock(w.Context())
	must(t, err)
	if lost.Hits() != 1 {
		t.Fatalf("lost %d replies, want 1", lost.Hits())
	}
	f := c.ID() + ":" + itoa(r.Owner())
	if got := hgetInt(t, rc, n, f); got != 1 {
		t.Fatalf("read count %d, want 1 (HGETALL %v)", got, hgetall(t, rc, n))
	}
	if exists(t, rc, rwTimeoutKey(n, f, 2)) {
		t.Fatal("a second timeout key")
	}
	must(t, w.Unlock(bg()))
	if h := hgetall(t, rc, n); h["mode"] != "read" {
		t.Fatalf("after the write release: %v", h)
	}
	must(t, r.Unlock(bg()))
	if ks := lockKeys(t, rc, n); len(ks) != 0 {
		t.Fatalf("keys left: %v", ks)
	}
}
