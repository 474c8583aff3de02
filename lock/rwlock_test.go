package lock_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	rs "github.com/rlock-go/rlock/internal/redissonstandin"
	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/observe"
)

// rwKeys are the keys of a read-write lock's layout, written out from
// Redisson's source (RedissonReadLock.getReadWriteTimeoutNamePrefix:
// suffixName(name, field) + ":rwlock_timeout"; RedissonObject.suffixName:
// "{name}:suffix", or "name:suffix" when the name has a '{';
// getChannelName: prefixName("redisson_rwlock", name);
// RedissonWriteLock.getLockName: field + ":write"), not from rlock's code.
func rwTimeoutKey(name, field string, n int) string {
	base := "{" + name + "}"
	if containsBrace(name) {
		base = name
	}
	return base + ":" + field + ":rwlock_timeout:" + itoa(uint64(n))
}

func rwChannel(name string) string {
	if containsBrace(name) {
		return "redisson_rwlock:" + name
	}
	return "redisson_rwlock:{" + name + "}"
}

// lockKeys lists the keys of the lock name but unlock latches (the
// Client's cleaner deletes them in the background, or they expire).
func lockKeys(t testing.TB, rc rueidis.Client, name string) []string {
	t.Helper()
	var out []string
	for _, k := range keys(t, rc, name) {
		if !strings.HasPrefix(k, "redisson_unlock_latch:") {
			out = append(out, k)
		}
	}
	return out
}

func containsBrace(s string) bool {
	for _, r := range s {
		if r == '{' {
			return true
		}
	}
	return false
}

// The layout, messages and TTLs of reads and writes, as Redisson's.
func TestRWLayout(t *testing.T) {
	for _, tc := range []struct{ label, suffix string }{{"plain", ""}, {"braces", "{tag}"}} {
		t.Run(tc.label, func(t *testing.T) {
			c := newClient(t, lock.Config{})
			rc := raw(t)
			n := name(t) + tc.suffix
			rw := c.ReadWriteMutex(n)
			msgs := subscribe(t, rwChannel(n))

			r1, err := rw.ReadLock().Lock(bg())
			must(t, err)
			field := c.ID() + ":" + itoa(r1.Owner())
			r2, err := rw.ReadLock().Lock(r1.Context())
			must(t, err)
			if !r2.Reentrant() {
				t.Fatal("second read of one owner is not a re-entry")
			}
			h := hgetall(t, rc, n)
			if len(h) != 2 || h["mode"] != "read" || h[field] != "2" {
				t.Fatalf("hash %v, want mode=read and %s=2", h, field)
			}
			for i := 1; i <= 2; i++ {
				k := rwTimeoutKey(n, field, i)
				if v, err := do(t, rc, "GET", k).ToString(); err != nil || v != "1" {
					t.Fatalf("timeout key %s = %q, %v; want \"1\"", k, v, err)
				}
				if p := pttl(t, rc, k); p <= 0 || p > 30*time.Second {
					t.Fatalf("PTTL %s = %d, want the 30 s lease", k, p)
				}
			}
			if n2, err := rw.ReadLock().HoldCount(r1.Context()); err != nil || n2 != 2 {
				t.Fatalf("HoldCount = %d, %v; want 2", n2, err)
			}
			must(t, r2.Unlock(bg()))
			if exists(t, rc, rwTimeoutKey(n, field, 2)) || !exists(t, rc, rwTimeoutKey(n, field, 1)) {
				t.Fatal("a read release did not delete its own hold's timeout key (and only it)")
			}
			must(t, r1.Unlock(bg()))
			if len(lockKeys(t, rc, n)) != 0 {
				t.Fatalf("keys left after the reads: %v", lockKeys(t, rc, n))
			}
			if m := <-msgs; m.Message != "0" {
				t.Fatalf("the last read release published %q, want \"0\"", m.Message)
			}

			w1, err := rw.WriteLock().Lock(bg())
			must(t, err)
			wfield := c.ID() + ":" + itoa(w1.Owner()) + ":write"
			w2, err := rw.WriteLock().Lock(w1.Context())
			must(t, err)
			if h := hgetall(t, rc, n); len(h) != 2 || h["mode"] != "write" || h[wfield] != "2" {
				t.Fatalf("hash %v, want mode=write and %s=2", h, wfield)
			}
			// Redisson's write re-entry adds the lease to the time left.
			if p := pttl(t, rc, n); p <= 30*time.Second {
				t.Fatalf("PTTL after a write re-entry %d, want more than one lease", p)
			}
			must(t, w2.Unlock(bg()))
			must(t, w1.Unlock(bg()))
			if m := <-msgs; m.Message != "1" {
				t.Fatalf("the write release published %q, want \"1\"", m.Message)
			}
			if exists(t, rc, n) {
				t.Fatal("the hash is left after the write release")
			}
		})
	}
}

// Readers share, a writer excludes, across rlock and Redisson.
func TestRWWithRedisson(t *testing.T) {
	c := newClient(t, lock.Config{})
	rc := raw(t)
	java := rs.New(rc, rs.Options{})
	n := name(t)
	rw := c.ReadWriteMutex(n)
	jr, jw := java.ReadLock(n), java.WriteLock(n)

	// Readers share across sides.
	if a, err := jr.TryAcquire(bg(), 1, 0); err != nil || !a.Acquired {
		t.Fatalf("Java read = %+v, %v", a, err)
	}
	r, err := rw.ReadLock().TryLock(bg())
	must(t, err)
	// Neither side's writer gets in.
	if _, err := rw.WriteLock().TryLock(bg()); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("rlock write with readers = %v", err)
	}
	if a, err := jw.TryAcquire(bg(), 2, 0); err != nil || a.Acquired {
		t.Fatalf("Java write with readers = %+v, %v", a, err)
	}
	must(t, r.Unlock(bg()))
	if rel, err := jr.Unlock(bg(), 1); err != nil || rel != rs.Released {
		t.Fatalf("Java read unlock = %v, %v", rel, err)
	}
	if exists(t, rc, n) {
		t.Fatal("hash left after both reads")
	}

	// An rlock writer excludes Java's readers and writers; it may read.
	w, err := rw.WriteLock().TryLock(bg())
	must(t, err)
	if a, err := jr.TryAcquire(bg(), 1, 0); err != nil || a.Acquired {
		t.Fatalf("Java read under an rlock writer = %+v, %v", a, err)
	}
	if a, err := jw.TryAcquire(bg(), 2, 0); err != nil || a.Acquired {
		t.Fatalf("Java write under an rlock writer = %+v, %v", a, err)
	}
	wr, err := rw.ReadLock().TryLock(w.Context())
	must(t, err)
	must(t, w.Unlock(bg()))
	if h := hgetall(t, rc, n); h["mode"] != "read" {
		t.Fatalf("after the write release with a read left: %v, want mode read", h)
	}
	if a, err := jr.TryAcquire(bg(), 1, 0); err != nil || !a.Acquired {
		t.Fatalf("Java read after the downgrade = %+v, %v", a, err)
	}
	must(t, wr.Unlock(bg()))
	if rel, err := jr.Unlock(bg(), 1); err != nil || rel != rs.Released {
		t.Fatalf("Java read unlock = %v, %v", rel, err)
	}

	// A Java writer excludes rlock's readers and writers; it may read.
	if a, err := jw.TryAcquire(bg(), 3, 0); err != nil || !a.Acquired {
		t.Fatalf("Java write = %+v, %v", a, err)
	}
	if _, err := rw.ReadLock().TryLock(bg()); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("rlock read under a Java writer = %v", err)
	}
	if _, err := rw.WriteLock().TryLock(bg()); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("rlock write under a Java writer = %v", err)
	}
	if a, err := jr.TryAcquire(bg(), 3, 0); err != nil || !a.Acquired {
		t.Fatalf("Java writer's read = %+v, %v", a, err)
	}
	if rel, err := jw.Unlock(bg(), 3); err != nil || rel != rs.Released {
		t.Fatalf("Java write unlock = %v, %v", rel, err)
	}
	r, err = rw.ReadLock().TryLock(bg())
	must(t, err)
	must(t, r.Unlock(bg()))
	if rel, err := jr.Unlock(bg(), 3); err != nil || rel != rs.Released {
		t.Fatalf("Java read unlock = %v, %v", rel, err)
	}
	if ks := lockKeys(t, rc, n); len(ks) != 0 {
		t.Fatalf("keys left: %v", ks)
	}
}

// Waiters on both sides are woken by the other side's release within a
// few round trips, never at the lease.
func TestRWWakeUps(t *testing.T) {
	rc := raw(t)
	java := rs.New(rc, rs.Options{})
	wc := newWakeCounter()
	c := newClient(t, lock.Config{Observer: wc.observer()})
	n := name(t)
	rw := c.ReadWriteMutex(n)
	msgs := subscribe(t, rwChannel(n))

	// rlock readers (several: they do not queue) and a writer wait
	// behind a Java writer; its unlock ("1") wakes them all.
	if a, err := java.WriteLock(n).TryAcquire(bg(), 1, 0); err != nil || !a.Acquired {
		t.Fatalf("Java write = %+v, %v", a, err)
	}
	const readers = 3
	got := make(chan *lock.Held, readers)
	errs := make(chan error, readers+1)
	for range readers {
		go func() {
			h, err := rw.ReadLock().Lock(bg())
			if err != nil {
				errs <- err
				return
			}
			got <- h
		}()
	}
	for range readers {
		<-wc.waiting
	}
	start := time.Now()
	if rel, err := java.WriteLock(n).Unlock(bg(), 1); err != nil || rel != rs.Released {
		t.Fatalf("Java write unlock = %v, %v", rel, err)
	}
	if m := <-msgs; m.Message != "1" {
		t.Fatalf("Java's write unlock published %q", m.Message)
	}
	var held []*lock.Held
	for range readers {
		select {
		case h := <-got:
			held = append(held, h)
		case err := <-errs:
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("readers woke after %v", d)
	}
	if wc.count(observe.WakeTimeout) != 0 {
		t.Fatal("a reader woke at the lease")
	}

	// An rlock writer waits behind the readers; the last read release
	// ("0") wakes it.
	wgot := make(chan *lock.Held, 1)
	go func() {
		h, err := rw.WriteLock().Lock(bg())
		if err != nil {
			errs <- err
			return
		}
		wgot <- h
	}()
	<-wc.waiting
	for _, h := range held {
		must(t, h.Unlock(bg()))
	}
	var w *lock.Held
	select {
	case w = <-wgot:
	case err := <-errs:
		t.Fatal(err)
	}

	// A Java reader's waiter hears the rlock write release: "1".
	for len(msgs) > 0 {
		<-msgs
	}
	must(t, w.Unlock(bg()))
	for m := range msgs {
		if m.Message == "1" {
			break
		}
	}
	if wc.count(observe.WakeTimeout) != 0 {
		t.Fatal("a waiter woke at the lease")
	}
}
