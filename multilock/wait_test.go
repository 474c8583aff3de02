package multilock_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/multilock"
	"github.com/rlock-go/rlock/observe"
)

func TestWaiterWakesOnUnlockMessage(t *testing.T) {
	n := name(t)
	// Default watchdog: the holder's lease is renewed for 30s, so only an
	// unlock message can end the waiter's sleep before then.
	hl := multilock.NewRedLock(mutexes(clients(t, shared, lock.Config{}), n)...)
	holder, err := hl.Lock(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	// Held on every master (Lock returned once a quorum granted): the
	// waiter's first rounds are refused everywhere.
	multilock.WaitBackground(hl)
	l := multilock.NewRedLock(mutexes(clients(t, shared, lock.Config{}), n)...)

	var (
		mu     sync.Mutex
		rounds []observe.Round
		wakes  []observe.WakeUp
	)
	sleeping := make(chan struct{})
	obs := &observe.Observer{
		Round: func(_ context.Context, e observe.Round) {
			mu.Lock()
			rounds = append(rounds, e)
			mu.Unlock()
			if e.Attempt == 2 && !e.Acquired {
				close(sleeping) // subscribed, failed again: it goes to sleep
			}
		},
		WakeUp: func(_ context.Context, e observe.WakeUp) {
			mu.Lock()
			wakes = append(wakes, e)
			mu.Unlock()
		},
	}
	type result struct {
		h   *multilock.Held
		err error
	}
	got := make(chan result, 1)
	go func() {
		h, err := l.TryLock(bg(t), lock.Wait(20*time.Second), multilock.Observe(obs))
		got <- result{h, err}
	}()
	<-sleeping
	if err := holder.Unlock(bg(t)); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("waiter: %v", r.err)
	}
	defer r.h.Unlock(context.Background())

	mu.Lock()
	defer mu.Unlock()
	// The first sleep, on a lock renewed for 30s, can only have ended
	// with an unlock message. (The holder releases the masters one by one:
	// a round started by the first message may find others still held,
	// and sleep again, until the next message or a short random delay.)
	// A (re)subscription confirmed while the waiter slept wakes it too
	// (an extra attempt, so that no release is missed): skip those.
	// Only re-subscriptions is also right when the holder had released
	// every master before one of them woke the waiter: the round it set
	// off acquired, and no message was needed (CI saw this once).
	first := slices.IndexFunc(wakes, func(w observe.WakeUp) bool { return w.Reason != observe.WakeReconnect })
	switch {
	case len(wakes) == 0:
		t.Errorf("no wake-up: the waiter acquired without being woken")
	case first >= 0 && (wakes[first].Reason != observe.WakeMessage || wakes[first].Addr == ""):
		t.Errorf("wake-ups %+v: want the first but re-subscriptions by an unlock message from a master", wakes)
	}
	for _, w := range wakes {
		if w.Reason == observe.WakeTimeout {
			t.Errorf("wake-up %+v: the waiter slept until the holder's lease ran out", w)
		}
	}
	if len(rounds) < 3 || !rounds[len(rounds)-1].Acquired {
		t.Errorf("rounds %+v: want fail, subscribe and fail, woken and acquire", rounds)
	}
	for _, e := range rounds[:2] {
		if e.Refused < 3 || e.Granted != 0 {
			t.Errorf("round %+v: want the holder's refusals to decide it", e)
		}
	}
}
