package multilock_test

import (
	"testing"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/multilock"
	"github.com/rlock-go/rlock/reentrant"
)

func TestFenceIncreasesAcrossClientsAndRestart(t *testing.T) {
	servers := integration.Masters(t, 5, integration.Options{})
	n := name(t)
	// Two processes, each with its own Clients.
	a := multilock.NewRedLock(mutexes(clients(t, servers, lock.Config{}), n)...)
	b := multilock.NewRedLock(mutexes(clients(t, servers, lock.Config{}), n)...)

	var last uint64
	take := func(l *multilock.Lock, what string) {
		t.Helper()
		h, err := l.Lock(bg(t), lock.Fenced())
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if f := h.Fence(); f <= last {
			t.Errorf("%s: token %d after %d", what, f, last)
		}
		last = h.Fence()
		inner, err := l.Lock(h.Context(), lock.Fenced())
		if err != nil {
			t.Fatalf("%s: re-entry: %v", what, err)
		}
		if f := inner.Fence(); f <= last {
			t.Errorf("%s: re-entry token %d after %d", what, f, last)
		}
		last = inner.Fence()
		if err := inner.Unlock(bg(t)); err != nil {
			t.Fatal(err)
		}
		if err := h.Unlock(bg(t)); err != nil {
			t.Fatal(err)
		}
	}
	for range 5 {
		take(a, "a")
		take(b, "b")
	}
	// Every write-back of the last token has reached its master (raises
	// beyond the quorum finish in the background), and no attempt is out.
	multilock.WaitBackground(a)
	multilock.WaitBackground(b)
	// Master 0 comes back empty: its counter starts again from 0.
	if err := servers[0].Restart(bg(t), integration.RestartOptions{KeepData: false}); err != nil {
		t.Fatalf("restart: %v", err)
	}
	for range 5 {
		take(a, "a after restart")
		take(b, "b after restart")
	}
	multilock.WaitBackground(a)
	multilock.WaitBackground(b)
	// The highest token was written back to every master, the restarted
	// one included. A master may be above it: a grant that came after its
	// round decided incremented its counter (and was released or joined
	// that Held with a token of its own).
	rs := raws(t, servers)
	for i, rc := range rs {
		v, err := rc.Do(bg(t), rc.B().Get().Key(reentrant.TokenName(n)).Build()).AsUint64()
		if err != nil || v < last {
			t.Errorf("master %d: counter %d, %v; want at least %d", i, v, err, last)
		}
	}
}

func TestFenceRaisesLaggingCounters(t *testing.T) {
	cs := clients(t, shared, lock.Config{})
	rs := raws(t, shared)
	n := name(t)
	// Masters 0, 1 and 2's counters are far ahead of the others (those
	// lost writes): every quorum has one of them, whichever masters
	// answer first.
	for _, rc := range rs[:3] {
		if err := rc.Do(bg(t), rc.B().Set().Key(reentrant.TokenName(n)).Value("1000").Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	l := multilock.NewRedLock(mutexes(cs, n)...)
	h, err := l.TryLock(bg(t), lock.Fenced())
	if err != nil {
		t.Fatal(err)
	}
	if h.Fence() != 1001 {
		t.Errorf("token %d, want 1001 (the highest counter of the quorum, incremented)", h.Fence())
	}
	if err := h.Unlock(bg(t)); err != nil {
		t.Fatal(err)
	}
	multilock.WaitBackground(l)
	for i, rc := range rs {
		v, err := rc.Do(bg(t), rc.B().Get().Key(reentrant.TokenName(n)).Build()).AsUint64()
		// Above 1001 where a grant came after the round decided.
		if err != nil || v < 1001 {
			t.Errorf("master %d: counter %d, %v; want at least 1001", i, v, err)
		}
	}
}
