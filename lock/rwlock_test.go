package lock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/integration"
	rs "github.com/rlock-go/rlock/internal/redissonstandin"
	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/observe"
	"github.com/rlock-go/rlock/reentrant"
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
			// rlock's write re-entry keeps the expiry at one lease (R3-11;
			// Redisson's adds the lease to the time left).
			if p := pttl(t, rc, n); p > 30*time.Second || p < 29*time.Second {
				t.Fatalf("PTTL after a write re-entry %v, want one lease (30s)", p)
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

// The watchdog renews read holds with their timeout keys, in the same
// single round trip as write and plain holds, and a read hold whose field
// is gone is lost, not silently dropped.
func TestRWWatchdogRenewsReadTimeoutKeys(t *testing.T) {
	obs, tk := ticks()
	c := newClient(t, lock.Config{WatchdogTimeout: keepLease, RenewInterval: shortInterval, Observer: obs})
	rc := raw(t)
	n := name(t)
	rw := c.ReadWriteMutex(n)
	r1, err := rw.ReadLock().Lock(bg())
	must(t, err)
	r2, err := rw.ReadLock().Lock(r1.Context())
	must(t, err)
	w, err := c.ReadWriteMutex(n + ":w").WriteLock().Lock(bg())
	must(t, err)
	p, err := c.Mutex(n + ":p").Lock(bg())
	must(t, err)
	field := c.ID() + ":" + itoa(r1.Owner())
	skipped := 0
	for i := 0; i < 30; i++ { // two leases' worth
		e := keptTick(t, tk, &skipped)
		if e.RoundTrips != 1 || e.Commands != 2 || e.Renewed != 3 || e.Lost != 0 {
			t.Fatalf("tick %d: %+v; want one round trip of two commands (a read renewal, a plain one) renewing three locks", i, e)
		}
	}
	for i := 1; i <= 2; i++ {
		if k := rwTimeoutKey(n, field, i); pttl(t, rc, k) <= 0 {
			t.Fatalf("timeout key %s not renewed: PTTL %v", k, pttl(t, rc, k))
		}
	}
	for _, h := range []*lock.Held{r1, r2, w, p} {
		select {
		case <-h.Done():
			t.Fatalf("lost: %v", context.Cause(h.Context()))
		default:
		}
	}
	must(t, r2.Unlock(bg()))
	// The field goes (as a force unlock elsewhere, or a flush, would
	// take it): the read hold is lost at the next renewal.
	must(t, do(t, rc, "HDEL", n, field).Error())
	<-r1.Done()
	if cause := context.Cause(r1.Context()); !errors.Is(cause, lock.ErrLockLost) {
		t.Fatalf("cause %v, want ErrLockLost", cause)
	}
	must(t, w.Unlock(bg()))
	must(t, p.Unlock(bg()))
}

// A Redisson reader's renewal leaves rlock's read holds in place (4.7.0
// touches only its own timeout keys; 3.52.0 extends every reader's), and
// rlock's watchdog never extends a Redisson reader's timeout keys.
func TestRWRenewalsLeaveTheOtherSideAlone(t *testing.T) {
	for _, v := range []rs.Version{rs.V4_7_0, rs.V3_52_0} {
		t.Run(v.String(), func(t *testing.T) {
			obs, tk := ticks()
			c := newClient(t, lock.Config{WatchdogTimeout: time.Second, RenewInterval: shortInterval, Observer: obs})
			rc := raw(t)
			java := rs.New(rc, rs.Options{Version: v, WatchdogTimeout: 60 * time.Second})
			n := name(t)
			jr := java.ReadLock(n)
			if a, err := jr.TryAcquire(bg(), 1, 5*time.Second); err != nil || !a.Acquired {
				t.Fatalf("Java read = %+v, %v", a, err)
			}
			h, err := c.ReadWriteMutex(n).ReadLock().Lock(bg())
			must(t, err)
			field := c.ID() + ":" + itoa(h.Owner())
			jkey := rwTimeoutKey(n, java.Field(1), 1)
			before := pttl(t, rc, jkey)
			for range 5 {
				nextTick(t, tk)
			}
			if after := pttl(t, rc, jkey); after > before || after <= 0 {
				t.Fatalf("Java's timeout key PTTL %v, then %v after rlock's renewals", before, after)
			}
			ok, err := jr.Renew(bg(), 1)
			if err != nil || !ok {
				t.Fatalf("Java renew = %v, %v", ok, err)
			}
			mine := rwTimeoutKey(n, field, 1)
			if got := hgetInt(t, rc, n, field); got != 1 {
				t.Fatalf("rlock's count %d after Java's renewal", got)
			}
			got := pttl(t, rc, mine)
			if v == rs.V4_7_0 && got > time.Second {
				t.Fatalf("4.7.0's renewal extended rlock's timeout key to %v", got)
			}
			if got <= 0 {
				t.Fatalf("rlock's timeout key gone: %v", got)
			}
			if v == rs.V3_52_0 && got <= time.Second {
				t.Fatalf("3.52.0's renewal should extend every reader's timeout key: %v", got)
			}
			must(t, h.Unlock(bg()))
			if rel, err := jr.Unlock(bg(), 1); err != nil || rel != rs.Released {
				t.Fatalf("Java read unlock = %v, %v", rel, err)
			}
		})
	}
}

// Bad input and misuse get ErrInvalid, without a panic and without
// leaving anything in Redis.
func TestRWMisuse(t *testing.T) {
	c := newClient(t, lock.Config{})
	rc := raw(t)
	n := name(t)
	var nilRW *lock.ReadWriteMutex
	for label, m := range map[string]*lock.Mutex{
		"nil read": nilRW.ReadLock(), "nil write": nilRW.WriteLock(),
		"empty name read": c.ReadWriteMutex("").ReadLock(), "empty name write": c.ReadWriteMutex("").WriteLock(),
		"nil Client": (*lock.Client)(nil).ReadWriteMutex(n).ReadLock(), "zero Client": (&lock.Client{}).ReadWriteMutex(n).WriteLock(),
	} {
		if _, err := m.Lock(bg()); !errors.Is(err, lock.ErrInvalid) {
			t.Fatalf("%s: Lock = %v", label, err)
		}
		if _, err := m.ForceUnlock(bg()); !errors.Is(err, lock.ErrInvalid) {
			t.Fatalf("%s: ForceUnlock = %v", label, err)
		}
		if _, err := m.IsLocked(bg()); !errors.Is(err, lock.ErrInvalid) {
			t.Fatalf("%s: IsLocked = %v", label, err)
		}
	}
	if _, err := nilRW.ForceUnlock(bg()); !errors.Is(err, lock.ErrInvalid) {
		t.Fatalf("nil ForceUnlock = %v", err)
	}
	if nilRW.Name() != "" {
		t.Fatal("nil Name")
	}
	rw := c.ReadWriteMutex(n)
	for _, m := range []*lock.Mutex{rw.ReadLock(), rw.WriteLock()} {
		if _, err := m.TryLock(bg(), lock.Fenced()); !errors.Is(err, lock.ErrInvalid) {
			t.Fatalf("Fenced = %v", err)
		}
	}
	// A reader cannot upgrade: refused at once, not a wait for ever.
	r, err := rw.ReadLock().Lock(bg())
	must(t, err)
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	_, err = rw.WriteLock().Lock(ctx)
	if !errors.Is(err, lock.ErrInvalid) || !errors.Is(err, lock.ErrNotAcquired) || ctx.Err() != nil {
		t.Fatalf("upgrade = %v (ctx %v), want ErrInvalid and ErrNotAcquired at once", err, ctx.Err())
	}
	must(t, r.Unlock(bg()))
	if ks := lockKeys(t, rc, n); len(ks) != 0 {
		t.Fatalf("keys left: %v", ks)
	}
	// A plain lock's hash is not a read-write lock: both halves find it
	// busy, and neither turns it into one.
	p, err := c.Mutex(n).Lock(bg())
	must(t, err)
	for _, m := range []*lock.Mutex{rw.ReadLock(), rw.WriteLock()} {
		if _, err := m.TryLock(bg()); !errors.Is(err, lock.ErrNotAcquired) {
			t.Fatalf("a half on a plain lock's hash = %v", err)
		}
	}
	if h := hgetall(t, rc, n); len(h) != 1 {
		t.Fatalf("the plain lock's hash changed: %v", h)
	}
	must(t, p.Unlock(bg()))
}

// ForceUnlock: each half's only in its own mode, as Redisson's; the
// ReadWriteMutex's in either, waking every waiter.
func TestRWForceUnlock(t *testing.T) {
	c := newClient(t, lock.Config{})
	rc := raw(t)
	n := name(t)
	rw := c.ReadWriteMutex(n)
	msgs := subscribe(t, rwChannel(n))
	w, err := rw.WriteLock().Lock(bg())
	must(t, err)
	if ok, err := rw.ReadLock().ForceUnlock(bg()); err != nil || ok {
		t.Fatalf("the read half's ForceUnlock in mode write = %v, %v", ok, err)
	}
	select {
	case <-w.Done():
		t.Fatal("a force unlock that deleted nothing ended the write hold")
	default:
	}
	if ok, err := rw.WriteLock().ForceUnlock(bg()); err != nil || !ok {
		t.Fatalf("the write half's ForceUnlock = %v, %v", ok, err)
	}
	<-w.Done()
	if m := <-msgs; m.Message != "1" {
		t.Fatalf("published %q", m.Message)
	}
	r, err := rw.ReadLock().Lock(bg())
	must(t, err)
	if ok, err := rw.WriteLock().ForceUnlock(bg()); err != nil || ok {
		t.Fatalf("the write half's ForceUnlock in mode read = %v, %v", ok, err)
	}
	if ok, err := rw.ForceUnlock(bg()); err != nil || !ok {
		t.Fatalf("ReadWriteMutex.ForceUnlock = %v, %v", ok, err)
	}
	<-r.Done()
	if !errors.Is(context.Cause(r.Context()), lock.ErrLockLost) {
		t.Fatalf("cause %v", context.Cause(r.Context()))
	}
	if m := <-msgs; m.Message != "1" {
		t.Fatalf("published %q", m.Message)
	}
	if exists(t, rc, n) {
		t.Fatal("hash left")
	}
}

// isScript matches one EVALSHA of script on the lock called name.
func isScript(s *reentrant.Script, name string) integration.MatchFunc {
	return func(cmd []string) bool {
		return len(cmd) > 3 && strings.EqualFold(cmd[0], "EVALSHA") && cmd[1] == s.SHA1() && slices.Contains(cmd, name)
	}
}

// firstOf matches the first command m matches, and no other.
func firstOf(m integration.MatchFunc) integration.MatchFunc {
	var done atomic.Bool
	return func(cmd []string) bool { return m(cmd) && done.CompareAndSwap(false, true) }
}

// A read acquire or release whose reply is lost is asked again and
// answered, never applied twice: one hold, one timeout key, and a read
// lock that another writer gets after the one Unlock.
func TestRWLostReplies(t *testing.T) {
	srv := integrationRedis(t)
	c := newClient(t, lock.Config{CommandTimeout: 100 * time.Millisecond}, srv)
	other := newClient(t, lock.Config{}, srv)
	rc := raw(t, srv)
	for _, kind := range []string{"read", "write"} {
		t.Run(kind, func(t *testing.T) {
			n := name(t)
			rw := c.ReadWriteMutex(n)
			m, acq, rel := rw.ReadLock(), reentrant.AcquireReadScript, reentrant.ReleaseReadScript
			if kind == "write" {
				m, acq, rel = rw.WriteLock(), reentrant.AcquireWriteScript, reentrant.ReleaseWriteScript
			}
			lost := inject(t, srv, integration.Rule{Match: firstOf(isScript(acq, n)), Action: integration.DropReply})
			h, err := m.Lock(bg())
			must(t, err)
			if lost.Hits() != 1 {
				t.Fatalf("the acquire's reply was lost %d times, want 1", lost.Hits())
			}
			f := c.ID() + ":" + itoa(h.Owner())
			if kind == "write" {
				f += ":write"
			}
			if got := hgetInt(t, rc, n, f); got != 1 {
				t.Fatalf("Redis counts %d holds after one Lock whose reply was lost (HGETALL %v)", got, hgetall(t, rc, n))
			}
			if kind == "read" && exists(t, rc, rwTimeoutKey(n, f, 2)) {
				t.Fatal("a second timeout key for one hold")
			}
			inner, err := m.Lock(h.Context())
			must(t, err)
			lost = inject(t, srv, integration.Rule{Match: firstOf(isScript(rel, n)), Action: integration.DropReply})
			must(t, inner.Unlock(bg()))
			if lost.Hits() != 1 {
				t.Fatalf("the release's reply was lost %d times, want 1", lost.Hits())
			}
			if got := hgetInt(t, rc, n, f); got != 1 {
				t.Fatalf("Redis counts %d holds after an Unlock whose reply was lost, want 1", got)
			}
			select {
			case <-h.Done():
				t.Fatalf("outer hold ended: %v", context.Cause(h.Context()))
			default:
			}
			must(t, h.Unlock(bg()))
			w, err := other.ReadWriteMutex(n).WriteLock().TryLock(bg())
			must(t, err)
			must(t, w.Unlock(bg()))
			if ks := lockKeys(t, rc, n); len(ks) != 0 {
				t.Fatalf("keys left: %v", ks)
			}
		})
	}
}

// Goroutines sharing one owner take and release the read lock at once:
// the hold orders their requests, and the count Redis keeps matches.
func TestRWSharedOwnerReads(t *testing.T) {
	c := newClient(t, lock.Config{})
	other := newClient(t, lock.Config{})
	rc := raw(t)
	n := name(t)
	rw := c.ReadWriteMutex(n)
	first, err := rw.ReadLock().Lock(bg())
	must(t, err)
	ctx := first.Context()
	const workers, rounds = 8, 20
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				h, err := rw.ReadLock().Lock(ctx)
				if err == nil {
					err = h.Unlock(bg())
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	f := c.ID() + ":" + itoa(first.Owner())
	if got := hgetInt(t, rc, n, f); got != 1 {
		t.Fatalf("Redis counts %d holds, want 1 (HGETALL %v)", got, hgetall(t, rc, n))
	}
	if ks := lockKeys(t, rc, n); len(ks) != 2 { // the hash and timeout key 1
		t.Fatalf("keys %v, want the hash and one timeout key", ks)
	}
	must(t, first.Unlock(bg()))
	w, err := other.ReadWriteMutex(n).WriteLock().TryLock(bg())
	must(t, err)
	must(t, w.Unlock(bg()))
}

// An owner holding the write lock and reads re-enters the write lock:
// only a reader without the write lock is refused an upgrade.
func TestRWWriterWithReadsReentersWrite(t *testing.T) {
	c := newClient(t, lock.Config{})
	rw := c.ReadWriteMutex(name(t))
	w, err := rw.WriteLock().Lock(bg())
	must(t, err)
	r, err := rw.ReadLock().Lock(w.Context())
	must(t, err)
	w2, err := rw.WriteLock().TryLock(r.Context())
	must(t, err)
	for _, h := range []*lock.Held{w2, r, w} {
		must(t, h.Unlock(bg()))
	}
}

// A partial read release never shortens the lease of the holds left:
// releasing a short hold under a long one leaves the hash (and the long
// hold's timeout) for the long lease, where Redisson's arithmetic (the
// hash's expiry becomes the longest remaining timeout key, and the key
// deleted is the top hold's) would leave the short one's.
func TestRWPartialReadReleaseKeepsTheLongerLease(t *testing.T) {
	c := newClient(t, lock.Config{})
	rc := raw(t)
	n := name(t)
	m := c.ReadWriteMutex(n).ReadLock()
	short, err := m.Lock(bg(), lock.Lease(2*time.Second))
	must(t, err)
	long, err := m.Lock(short.Context(), lock.Lease(60*time.Second))
	must(t, err)
	must(t, short.Unlock(bg()))
	if p := pttl(t, rc, n); p < 50*time.Second {
		t.Fatalf("hash PTTL %v after releasing the short hold, want the long hold's 60 s", p)
	}
	must(t, long.Unlock(bg()))
}

// IsLocked of each half answers as Redisson's isLocked() of that half.
func TestRWIsLocked(t *testing.T) {
	c := newClient(t, lock.Config{})
	rw := c.ReadWriteMutex(name(t))
	check := func(step string, read, write bool) {
		t.Helper()
		r, err := rw.ReadLock().IsLocked(bg())
		must(t, err)
		w, err := rw.WriteLock().IsLocked(bg())
		must(t, err)
		if r != read || w != write {
			t.Fatalf("%s: read IsLocked %v, write %v; want %v, %v", step, r, w, read, write)
		}
	}
	check("free", false, false)
	r, err := rw.ReadLock().Lock(bg())
	must(t, err)
	check("read", true, false)
	must(t, r.Unlock(bg()))
	w, err := rw.WriteLock().Lock(bg())
	must(t, err)
	check("write", false, true)
	wr, err := rw.ReadLock().Lock(w.Context())
	must(t, err)
	check("write and its read", true, true)
	must(t, w.Unlock(bg()))
	check("the writer's read left", true, false)
	must(t, wr.Unlock(bg()))
	check("free again", false, false)
}

// More wake-ups: an rlock writer behind a Redisson reader wakes on its
// release ("0"); rlock readers behind an rlock writer that keeps a read
// wake when it releases the write lock (rlock publishes "1" there).
func TestRWWakeUpsOnReadRelease(t *testing.T) {
	rc := raw(t)
	java := rs.New(rc, rs.Options{})
	wc := newWakeCounter()
	c := newClient(t, lock.Config{Observer: wc.observer()})
	holder := newClient(t, lock.Config{})
	n := name(t)
	rw := c.ReadWriteMutex(n)

	if a, err := java.ReadLock(n).TryAcquire(bg(), 1, 0); err != nil || !a.Acquired {
		t.Fatalf("Java read = %+v, %v", a, err)
	}
	got := make(chan error, 2)
	go func() {
		h, err := rw.WriteLock().Lock(bg())
		if err == nil {
			err = h.Unlock(bg())
		}
		got <- err
	}()
	<-wc.waiting
	if rel, err := java.ReadLock(n).Unlock(bg(), 1); err != nil || rel != rs.Released {
		t.Fatalf("Java read unlock = %v, %v", rel, err)
	}
	must(t, <-got)

	// Another Client's writer holds the write lock and a read.
	w, err := holder.ReadWriteMutex(n).WriteLock().Lock(bg())
	must(t, err)
	wr, err := holder.ReadWriteMutex(n).ReadLock().Lock(w.Context())
	must(t, err)
	go func() {
		h, err := rw.ReadLock().Lock(bg())
		if err == nil {
			err = h.Unlock(bg())
		}
		got <- err
	}()
	<-wc.waiting
	must(t, w.Unlock(bg())) // mode read: the reader may share with wr
	must(t, <-got)
	must(t, wr.Unlock(bg()))
	if wc.count(observe.WakeTimeout) != 0 {
		t.Fatal("a waiter woke at the lease")
	}
}

// A reader whose ctx ends while it waits returns at once, leaves its
// subscription, and leaves nothing in Redis.
func TestRWCancelledReaderLeavesNothing(t *testing.T) {
	wc := newWakeCounter()
	c := newClient(t, lock.Config{Observer: wc.observer()})
	rc := raw(t)
	n := name(t)
	rw := c.ReadWriteMutex(n)
	w, err := newClient(t, lock.Config{}).ReadWriteMutex(n).WriteLock().Lock(bg())
	must(t, err)
	ctx, cancel := context.WithCancel(bg())
	got := make(chan error, 1)
	go func() {
		_, err := rw.ReadLock().Lock(ctx)
		got <- err
	}()
	<-wc.waiting
	cancel()
	if err := <-got; !errors.Is(err, lock.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled read Lock = %v", err)
	}
	waitUnsubscribed(t, func() int64 { return numsub(t, rc, rwChannel(n)) }, "the reader's subscription")
	must(t, w.Unlock(bg()))
	if ks := lockKeys(t, rc, n); len(ks) != 0 {
		t.Fatalf("keys left: %v", ks)
	}
}

// Readers and writers of two Clients contend for a while: a writer holds
// alone, readers only beside readers, every waiter gets the lock, and
// nothing is left in Redis. Holds are counted before Unlock is called
// and after Lock returns, so an overlap is a double grant.
func TestRWContention(t *testing.T) {
	n := name(t)
	rc := raw(t)
	cs := []*lock.Client{newClient(t, lock.Config{}), newClient(t, lock.Config{})}
	var readers, writers atomic.Int32
	var reads, writes atomic.Int64
	ctx, stop := context.WithTimeout(bg(), 2*time.Second)
	defer stop()
	var wg sync.WaitGroup
	fail := make(chan string, 64)
	for i := range 10 {
		c := cs[i%2]
		write := i%5 == 0 || i%5 == 1
		wg.Go(func() {
			rw := c.ReadWriteMutex(n)
			for ctx.Err() == nil {
				m := rw.ReadLock()
				if write {
					m = rw.WriteLock()
				}
				lctx, cancel := context.WithTimeout(bg(), 20*time.Second)
				h, err := m.Lock(lctx)
				cancel()
				if err != nil {
					fail <- err.Error()
					return
				}
				if write {
					if w, r := writers.Add(1), readers.Load(); w != 1 || r != 0 {
						fail <- fmt.Sprintf("a writer granted beside %d writers and %d readers", w-1, r)
					}
					writes.Add(1)
					// The writer reads too, sometimes.
					if i%2 == 0 {
						r, err := rw.ReadLock().Lock(h.Context())
						if err != nil {
							fail <- "the writer's read: " + err.Error()
						} else if err := r.Unlock(bg()); err != nil {
							fail <- err.Error()
						}
					}
					writers.Add(-1)
				} else {
					if w := writers.Load(); w != 0 {
						fail <- fmt.Sprintf("a reader granted beside %d writers", w)
					}
					readers.Add(1)
					reads.Add(1)
					time.Sleep(time.Millisecond) // a hold's work, not synchronisation
					readers.Add(-1)
				}
				if err := h.Unlock(bg()); err != nil {
					fail <- err.Error()
					return
				}
			}
		})
	}
	wg.Wait()
	close(fail)
	for f := range fail {
		t.Error(f)
	}
	if reads.Load() == 0 || writes.Load() == 0 {
		t.Fatalf("%d reads, %d writes: a side starved for the whole run", reads.Load(), writes.Load())
	}
	t.Logf("%d reads, %d writes", reads.Load(), writes.Load())
	if ks := lockKeys(t, rc, n); len(ks) != 0 {
		t.Fatalf("keys left: %v", ks)
	}
}
