package multilock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/multilock"
)

// rwHalves is each master's read-write lock name, its read or its write
// half.
func rwHalves(cs []*lock.Client, name string, write bool) []*lock.Mutex {
	ms := make([]*lock.Mutex, len(cs))
	for i, c := range cs {
		rw := c.ReadWriteMutex(name)
		ms[i] = rw.ReadLock()
		if write {
			ms[i] = rw.WriteLock()
		}
	}
	return ms
}

// RedLocks of read-write locks' halves (Redisson's getRedLock over
// readLock()/writeLock() members): readers share across the masters, a
// writer excludes them, and a waiting writer gets the lock once the
// readers release, woken on the read-write lock's channel.
func TestRedLockOfReadWriteLocks(t *testing.T) {
	n := name(t)
	reader1 := multilock.NewRedLock(rwHalves(clients(t, shared[:3], lock.Config{}), n, false)...)
	r1, err := reader1.Lock(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	multilock.WaitBackground(reader1)
	reader2 := multilock.NewRedLock(rwHalves(clients(t, shared[:3], lock.Config{}), n, false)...)
	r2, err := reader2.TryLock(bg(t))
	if err != nil {
		t.Fatalf("a second reader: %v", err)
	}
	multilock.WaitBackground(reader2)
	writer := multilock.NewRedLock(rwHalves(clients(t, shared[:3], lock.Config{}), n, true)...)
	if _, err := writer.TryLock(bg(t)); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("a writer beside readers = %v", err)
	}
	multilock.WaitBackground(writer) // the failed round's give-backs
	got := make(chan error, 1)
	start := time.Now()
	go func() {
		w, err := writer.TryLock(bg(t), lock.Wait(20*time.Second))
		if err == nil {
			multilock.WaitBackground(writer)
			err = w.Unlock(bg(t))
		}
		got <- err
	}()
	for _, h := range []*multilock.Held{r1, r2} {
		if err := h.Unlock(bg(t)); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-got; err != nil {
		t.Fatalf("the writer = %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("the writer got the lock after %v: woken by the leases, not the releases", d)
	}
}

// Two read RedLocks of one process, on the same Clients and name, share
// the lock as two processes' readers do (safety review 3, R3-4): the
// second is granted while the first is held. Before the local queue knew
// the kind, the second waited in it for the first's Unlock and ended
// with its ctx.
func TestReadRedLocksOfOneProcessShare(t *testing.T) {
	n := name(t)
	cs := clients(t, shared[:3], lock.Config{})
	first := multilock.NewRedLock(rwHalves(cs, n, false)...)
	r1, err := first.Lock(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	multilock.WaitBackground(first)
	second := multilock.NewRedLock(rwHalves(cs, n, false)...)
	ctx, cancel := context.WithTimeout(bg(t), 5*time.Second)
	defer cancel()
	r2, err := second.Lock(ctx)
	if err != nil {
		t.Fatalf("a second reader of this process while the first holds: %v", err)
	}
	multilock.WaitBackground(second)
	// A writer of this process still waits for both.
	writer := multilock.NewRedLock(rwHalves(cs, n, true)...)
	if _, err := writer.TryLock(bg(t)); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("a writer beside two readers = %v", err)
	}
	multilock.WaitBackground(writer)
	for _, h := range []*multilock.Held{r1, r2} {
		if err := h.Unlock(bg(t)); err != nil {
			t.Fatal(err)
		}
	}
	w, err := writer.TryLock(bg(t), lock.Wait(10*time.Second))
	if err != nil {
		t.Fatalf("the writer after the readers: %v", err)
	}
	multilock.WaitBackground(writer)
	if err := w.Unlock(bg(t)); err != nil {
		t.Fatal(err)
	}
}
