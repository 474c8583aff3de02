package multilock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/multilock"
	"github.com/rlock-go/rlock/observe"
)

// A RedLock of spin locks (Redisson's getRedLock over getSpinLock
// members): its releases publish nothing, so a waiter polls the masters at
// the spin backoff's pace and gets the lock soon after the holder's
// Unlock, long before the holder's 30 s leases could run out.
func TestRedLockOfSpinLocksPolls(t *testing.T) {
	reasons := redLockWaiterPolls(t,
		func(c *lock.Client, n string) *lock.Mutex { return c.SpinMutex(n, lock.SpinBackoff{}) },
		func(c *lock.Client, n string) *lock.Mutex {
			return c.SpinMutex(n, lock.ConstantSpin(10*time.Millisecond))
		})
	if reasons[observe.WakeMessage] != 0 {
		t.Fatalf("wake-ups %v: want polls only (spin releases publish nothing)", reasons)
	}
}

// redLockWaiterPolls has a RedLock over three masters of the holder's
// Mutexes hold the lock while a RedLock of the waiter's Mutexes waits; it
// checks that the waiter polled, got the lock after the holder's Unlock
// and never slept until a lease ran out, and returns its wake-ups.
func redLockWaiterPolls(t *testing.T, holderMutex, waiterMutex func(*lock.Client, string) *lock.Mutex) map[observe.WakeReason]int {
	t.Helper()
	n := name(t)
	mutexes := func(mk func(*lock.Client, string) *lock.Mutex) []*lock.Mutex {
		cs := clients(t, shared[:3], lock.Config{})
		ms := make([]*lock.Mutex, len(cs))
		for i, c := range cs {
			ms[i] = mk(c, n)
		}
		return ms
	}
	holder := multilock.NewRedLock(mutexes(holderMutex)...)
	h, err := holder.Lock(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	multilock.WaitBackground(holder)

	var (
		mu      sync.Mutex
		reasons = map[observe.WakeReason]int{}
		polled  = make(chan struct{}, 1)
	)
	obs := &observe.Observer{WakeUp: func(_ context.Context, e observe.WakeUp) {
		mu.Lock()
		reasons[e.Reason]++
		mu.Unlock()
		if e.Reason == observe.WakePoll {
			select {
			case polled <- struct{}{}:
			default:
			}
		}
	}}
	waiter := multilock.NewRedLock(mutexes(waiterMutex)...)
	got := make(chan error, 1)
	go func() {
		wh, err := waiter.TryLock(bg(t), lock.Wait(10*time.Second), multilock.Observe(obs))
		if err == nil {
			multilock.WaitBackground(waiter)
			err = wh.Unlock(bg(t))
		}
		got <- err
	}()
	select {
	case <-polled: // the waiter is polling a held lock
	case err := <-got:
		t.Fatalf("the waiter ended (%v) without polling", err)
	}
	if err := h.Unlock(bg(t)); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the waiter = %v, want it to get the lock after the holder's Unlock", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if reasons[observe.WakeTimeout] != 0 {
		t.Fatalf("wake-ups %v: the waiter slept until a lease ran out", reasons)
	}
	return reasons
}
