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

// spinMutexes is mutexes with every master's Mutex a spin lock.
func spinMutexes(cs []*lock.Client, name string, b lock.SpinBackoff) []*lock.Mutex {
	ms := make([]*lock.Mutex, len(cs))
	for i, c := range cs {
		ms[i] = c.SpinMutex(name, b)
	}
	return ms
}

// A RedLock of spin locks (Redisson's getRedLock over getSpinLock
// members): its releases publish nothing, so a waiter polls the masters at
// the spin backoff's pace and gets the lock soon after the holder's
// Unlock, long before the holder's 30 s leases could run out.
func TestRedLockOfSpinLocksPolls(t *testing.T) {
	n := name(t)
	holder := multilock.NewRedLock(spinMutexes(clients(t, shared[:3], lock.Config{}), n, lock.SpinBackoff{})...)
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
	waiter := multilock.NewRedLock(spinMutexes(clients(t, shared[:3], lock.Config{}), n, lock.ConstantSpin(10*time.Millisecond))...)
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
	if reasons[observe.WakeMessage] != 0 || reasons[observe.WakeTimeout] != 0 {
		t.Fatalf("wake-ups %v: want polls only (spin releases publish nothing, the leases did not run out)", reasons)
	}
}
