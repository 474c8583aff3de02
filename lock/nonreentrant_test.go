package lock_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	rs "github.com/rlock-go/rlock/internal/redissonstandin"
	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/reentrant"
)

// A non-reentrant lock refuses its own owner's second acquisition at
// once (Lock does not wait for itself), leaves the count at 1 and the
// hold alive, and after Unlock the owner may take it again.
func TestNonReentrantMutexRefusesItsOwner(t *testing.T) {
	c := newClient(t, lock.Config{})
	rc := raw(t)
	n := name(t)
	m := c.NonReentrantMutex(n)
	octx := lock.WithOwner(bg())
	h, err := m.Lock(octx)
	must(t, err)
	field := reentrant.Field(c.ID(), h.Owner())
	for _, try := range []func() error{
		func() error { _, err := m.Lock(h.Context()); return err },
		func() error { _, err := m.TryLock(h.Context()); return err },
		func() error { _, err := m.TryLock(h.Context(), lock.Wait(10e9)); return err },
	} {
		if err := try(); !errors.Is(err, lock.ErrReentered) || !errors.Is(err, lock.ErrNotAcquired) {
			t.Fatalf("re-acquire by the owner = %v, want ErrReentered and ErrNotAcquired", err)
		}
	}
	if got := hgetInt(t, rc, n, field); got != 1 {
		t.Fatalf("hold count %d after refused re-entries, want 1", got)
	}
	if h.Context().Err() != nil {
		t.Fatal("the hold ended")
	}
	must(t, h.Unlock(bg()))
	h2, err := m.Lock(octx)
	must(t, err)
	if h2.Owner() != h.Owner() {
		t.Fatal("another owner")
	}
	must(t, h2.Unlock(bg()))
}

// Goroutines sharing an owner race for a non-reentrant lock: exactly one
// acquires, the others are refused with ErrReentered or wait until
// their context ends; the count is never above 1.
func TestNonReentrantMutexSharedOwner(t *testing.T) {
	c := newClient(t, lock.Config{})
	rc := raw(t)
	n := name(t)
	m := c.NonReentrantMutex(n)
	octx := lock.WithOwner(bg())
	owner, _ := lock.OwnerFrom(octx)
	ctx, cancel := context.WithCancel(octx)
	defer cancel()
	var (
		mu    sync.Mutex
		helds []*lock.Held
		wg    sync.WaitGroup
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, err := m.Lock(ctx)
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				helds = append(helds, h)
				cancel() // the rest need not wait
			} else if !errors.Is(err, lock.ErrReentered) && !errors.Is(err, context.Canceled) {
				t.Errorf("Lock = %v", err)
			}
		}()
	}
	wg.Wait()
	if len(helds) != 1 {
		t.Fatalf("%d goroutines of one owner hold the non-reentrant lock, want 1", len(helds))
	}
	if got := hgetInt(t, rc, n, reentrant.Field(c.ID(), owner)); got != 1 {
		t.Fatalf("hold count %d, want 1", got)
	}
	must(t, helds[0].Unlock(bg()))
}

// Against Redisson's non-reentrant lock (4.4 and later; the stand-in's
// script from Redisson 4.7.0): each excludes the other, and rlock's hold
// has the count Java's own would have.
func TestNonReentrantMutexExcludesRedissons(t *testing.T) {
	c := newClient(t, lock.Config{})
	rc := raw(t)
	java := rs.New(rc, rs.Options{})
	n := name(t)
	jl := java.NonReentrantLock(n)
	a, err := jl.TryAcquire(bg(), 3, 0)
	must(t, err)
	if !a.Acquired {
		t.Fatal("Java could not acquire a free lock")
	}
	if _, err := jl.TryAcquire(bg(), 3, 0); !errors.Is(err, rs.ErrReacquire) {
		t.Fatalf("Java re-acquire = %v, want its NON_REENTRANT_REACQUIRE", err)
	}
	if _, err := c.NonReentrantMutex(n).TryLock(bg()); !errors.Is(err, lock.ErrNotAcquired) || errors.Is(err, lock.ErrReentered) {
		t.Fatalf("rlock TryLock while Java holds = %v, want ErrNotAcquired only", err)
	}
	if r, err := java.Lock(n).Unlock(bg(), 3); err != nil || r != rs.Released {
		t.Fatalf("Java unlock = %v, %v", r, err)
	}
	h, err := c.NonReentrantMutex(n).TryLock(bg())
	must(t, err)
	if got := hgetInt(t, rc, n, reentrant.Field(c.ID(), h.Owner())); got != 1 {
		t.Fatalf("rlock's hold count %d, want 1", got)
	}
	if a, err := jl.TryAcquire(bg(), 4, 0); err != nil || a.Acquired {
		t.Fatalf("Java acquire while rlock holds = %+v, %v; want refused", a, err)
	}
	must(t, h.Unlock(bg()))
	if a, err := jl.TryAcquire(bg(), 4, 0); err != nil || !a.Acquired {
		t.Fatalf("Java acquire after rlock released = %+v, %v", a, err)
	}
}
