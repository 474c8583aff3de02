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

// A RedLock of fair locks: its members' attempts never join the fair
// queues, so no release wakes its waiter; it polls, and gets the lock soon
// after the holder's Unlock, long before the 30 s leases could run out.
func TestRedLockOfFairLocksPolls(t *testing.T) {
	n := name(t)
	fair := func(cs []*lock.Client) []*lock.Mutex {
		ms := make([]*lock.Mutex, len(cs))
		for i, c := range cs {
			ms[i] = c.FairMutex(n)
		}
		return ms
	}
	holder := multilock.NewRedLock(fair(clients(t, shared[:3], lock.Config{}))...)
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
	waiter := multilock.NewRedLock(fair(clients(t, shared[:3], lock.Config{}))...)
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
	case <-polled:
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
}
