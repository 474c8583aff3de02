package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/observe"
	"github.com/rlock-go/rlock/reentrant"
)

func TestLockUnlock(t *testing.T) {
	c := newClient(t, lock.Config{})
	rc := raw(t)
	n := name(t)
	m := c.Mutex(n)
	h, err := m.Lock(bg())
	must(t, err)
	if locked, err := m.IsLocked(bg()); err != nil || !locked {
		t.Fatalf("IsLocked = %v, %v; want true", locked, err)
	}
	field := reentrant.Field(c.ID(), h.Owner())
	if got := hgetInt(t, rc, n, field); got != 1 {
		t.Fatalf("hold count in redis = %d, want 1", got)
	}
	ttl, err := m.RemainingTTL(bg())
	must(t, err)
	if ttl <= 0 || ttl > lock.DefaultWatchdogTimeout {
		t.Fatalf("TTL %v, want in (0, %v]", ttl, lock.DefaultWatchdogTimeout)
	}
	must(t, h.Unlock(bg()))
	if exists(t, rc, n) {
		t.Fatal("key remains after the last unlock")
	}
	if !errors.Is(context.Cause(h.Context()), context.Canceled) {
		t.Fatalf("cause after unlock = %v, want context.Canceled", context.Cause(h.Context()))
	}
	if ttl, _ := m.RemainingTTL(bg()); ttl != 0 {
		t.Fatalf("TTL of a free lock = %v, want 0", ttl)
	}
}

func TestReentrancy(t *testing.T) {
	c := newClient(t, lock.Config{})
	rc := raw(t)
	n := name(t)
	m := c.Mutex(n)
	h1, err := m.Lock(bg())
	must(t, err)
	h2, err := m.Lock(h1.Context())
	must(t, err)
	if h1.Reentrant() || !h2.Reentrant() {
		t.Fatalf("Reentrant() = %v, %v; want false, true", h1.Reentrant(), h2.Reentrant())
	}
	field := reentrant.Field(c.ID(), h1.Owner())
	if got := hgetInt(t, rc, n, field); got != 2 {
		t.Fatalf("hold count in redis = %d, want 2", got)
	}
	if got, err := m.HoldCount(h2.Context()); err != nil || got != 2 {
		t.Fatalf("HoldCount = %d, %v; want 2", got, err)
	}
	// A context derived from the Held's is the same owner too.
	child, cancel := context.WithCancel(h1.Context())
	defer cancel()
	h3, err := m.TryLock(child)
	must(t, err)
	must(t, h3.Unlock(bg()))

	must(t, h2.Unlock(bg()))
	if got := hgetInt(t, rc, n, field); got != 1 {
		t.Fatalf("hold count after one unlock = %d, want 1", got)
	}
	select {
	case <-h1.Done():
		t.Fatal("the outer hold ended with the inner one")
	default:
	}
	must(t, h1.Unlock(bg()))
	if exists(t, rc, n) {
		t.Fatal("key remains after the last unlock")
	}
}

func TestOtherOwnerExcludedAndCannotUnlock(t *testing.T) {
	c := newClient(t, lock.Config{})
	other := newClient(t, lock.Config{})
	n := name(t)
	h, err := c.Mutex(n).Lock(bg())
	must(t, err)

	// Another owner of the same Client, and another Client, wait.
	for _, cl := range []*lock.Client{c, other} {
		_, err := cl.Mutex(n).TryLock(bg())
		if !errors.Is(err, lock.ErrNotAcquired) {
			t.Fatalf("TryLock by another owner = %v, want ErrNotAcquired", err)
		}
		if n, err := cl.Mutex(n).HoldCount(lock.WithOwner(bg())); err != nil || n != 0 {
			t.Fatalf("HoldCount of another owner = %d, %v, want 0", n, err)
		}
	}
	// Redisson's unlock() is the Held's Unlock.
	must(t, h.Unlock(bg()))
	if err := h.Unlock(bg()); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("second Unlock = %v, want ErrNotHeld", err)
	}
}

func TestExplicitLease(t *testing.T) {
	c := newClient(t, lock.Config{RenewInterval: 50 * time.Millisecond, WatchdogTimeout: time.Second})
	n := name(t)
	m := c.Mutex(n)
	h, err := m.TryLock(bg(), lock.Lease(5*time.Second))
	must(t, err)
	ttl, err := m.RemainingTTL(bg())
	must(t, err)
	if ttl <= 0 || ttl > 5*time.Second {
		t.Fatalf("TTL %v, want in (0, 5s]", ttl)
	}
	must(t, h.Unlock(bg()))

	// A lease that runs out is a loss the holder hears of.
	h, err = m.TryLock(bg(), lock.Lease(lock.MinLease))
	must(t, err)
	<-h.Done()
	var lost *lock.LostError
	if !errors.As(context.Cause(h.Context()), &lost) || !errors.Is(lost, lock.ErrLockLost) || lost.Kind != observe.LossLeaseExpired {
		t.Fatalf("cause = %v, want a *LostError", context.Cause(h.Context()))
	}
	if err := h.Unlock(bg()); !errors.Is(err, lock.ErrLockLost) {
		t.Fatalf("Unlock after the lease ran out = %v, want ErrLockLost", err)
	}
}

func TestForceUnlock(t *testing.T) {
	c := newClient(t, lock.Config{})
	rc := raw(t)
	n := name(t)
	m := c.Mutex(n)
	h, err := m.Lock(bg())
	must(t, err)
	ok, err := m.ForceUnlock(bg())
	if err != nil || !ok {
		t.Fatalf("ForceUnlock = %v, %v; want true", ok, err)
	}
	<-h.Done()
	var lost *lock.LostError
	if !errors.As(context.Cause(h.Context()), &lost) || lost.Kind != observe.LossForceUnlocked {
		t.Fatalf("cause = %v, want a force-unlock loss", context.Cause(h.Context()))
	}
	if exists(t, rc, n) {
		t.Fatal("key remains after ForceUnlock")
	}
	if err := h.Unlock(bg()); !errors.Is(err, lock.ErrLockLost) {
		t.Fatalf("Unlock after ForceUnlock = %v, want ErrLockLost", err)
	}
	ok, err = m.ForceUnlock(bg())
	if err != nil || ok {
		t.Fatalf("ForceUnlock of a free lock = %v, %v; want false", ok, err)
	}
}

func TestCloseReleasesWhatIsHeld(t *testing.T) {
	c := newClient(t, lock.Config{})
	rc := raw(t)
	n1, n2 := name(t), name(t)
	h1, err := c.Mutex(n1).Lock(bg())
	must(t, err)
	h1b, err := c.Mutex(n1).Lock(h1.Context()) // re-entered: count 2
	must(t, err)
	h2, err := c.Mutex(n2).TryLock(bg(), lock.Lease(time.Minute))
	must(t, err)

	// A waiter in flight ends with ErrClosed.
	waiting := make(chan struct{}, 1)
	waitErr := make(chan error, 1)
	wc := newClient(t, lock.Config{Observer: &observe.Observer{Waiting: func(context.Context, observe.Waiting) {
		select {
		case waiting <- struct{}{}:
		default:
		}
	}}})
	go func() {
		_, err := wc.Mutex(n1).Lock(bg())
		waitErr <- err
	}()
	<-waiting

	must(t, c.Close(bg()))
	if exists(t, rc, n2) {
		t.Fatal("a lock with an explicit lease is still there after Close")
	}
	if got := hgetInt(t, rc, n1, reentrant.Field(c.ID(), h1.Owner())); got != 0 {
		t.Fatalf("the closed Client still holds %d holds", got)
	}
	for _, h := range []*lock.Held{h1, h1b, h2} {
		if !errors.Is(context.Cause(h.Context()), lock.ErrClosed) {
			t.Fatalf("cause = %v, want ErrClosed", context.Cause(h.Context()))
		}
	}
	// The other client's waiter gets the lock Close released.
	if err := <-waitErr; err != nil {
		t.Fatalf("waiter: %v", err)
	}
	must(t, wc.Close(bg()))
	if _, err := wc.Mutex(n1).Lock(bg()); !errors.Is(err, lock.ErrClosed) {
		t.Fatalf("Lock after Close = %v, want ErrClosed", err)
	}
	if exists(t, rc, n1) {
		t.Fatal("the waiter's lock remains after its Client closed")
	}
}

// Redis counting more holds than there are Helds (a re-entry whose reply
// was lost) must not leave the lock held and renewed after the last Unlock.
func TestLastUnlockGivesBackUncountedHolds(t *testing.T) {
	c := newClient(t, lock.Config{})
	rc := raw(t)
	n := name(t)
	h, err := c.Mutex(n).Lock(bg())
	must(t, err)
	do(t, rc, "HINCRBY", n, reentrant.Field(c.ID(), h.Owner()), "2") // two holds nobody here knows of
	must(t, h.Unlock(bg()))
	if exists(t, rc, n) {
		t.Fatal("the lock is still held after its last local hold was released")
	}
}

func TestConflictErrorCarriesTheHoldersTTL(t *testing.T) {
	c := newClient(t, lock.Config{})
	n := name(t)
	h, err := c.Mutex(n).Lock(bg())
	must(t, err)
	_, err = c.Mutex(n).TryLock(bg())
	var conflict *lock.ConflictError
	if !errors.As(err, &conflict) || !errors.Is(err, lock.ErrNotAcquired) || conflict.TTL <= 0 || conflict.Name != n {
		t.Fatalf("TryLock on a held lock = %v, want a *ConflictError with the TTL", err)
	}
	must(t, h.Unlock(bg()))
}
