package multilock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/multilock"
	"github.com/rlock-go/rlock/observe"
)

// When a round decides: as soon as a quorum granted, or can no longer
// grant; the attempts still out then are dealt with by whoever receives
// their answer. Each test bounds the call well below its per-master
// timeout: before this behaviour, the round waited for every master (or
// for that timeout) and the call ended with its context instead.

// longWait is a per-master timeout the tests' calls never reach, and
// callBound the context that bounds them.
const (
	longWait  = 20 * time.Second
	callBound = 5 * time.Second
)

func TestRoundReturnsOnceAQuorumGranted(t *testing.T) {
	for _, tc := range []struct {
		name         string
		unlockBefore bool // Unlock before the paused master answers
	}{{"late grant released after Unlock", true}, {"late grant joins the Held", false}} {
		t.Run(tc.name, func(t *testing.T) {
			servers := integration.Masters(t, 5, integration.Options{})
			// A CommandTimeout longer than the pause: the paused
			// master's answer, when it comes, is a grant.
			cs := clients(t, servers, lock.Config{CommandTimeout: 15 * time.Second})
			n := name(t)
			l := multilock.NewRedLock(mutexes(cs, n)...)
			resume := pause(t, servers[4])

			ctx, cancel := context.WithTimeout(bg(t), callBound)
			defer cancel()
			h, err := l.TryLock(ctx, multilock.PerMasterTimeout(longWait))
			if err != nil {
				t.Fatalf("TryLock with 4 of 5 masters answering: %v", err)
			}
			if got := h.Masters(); got < 3 || got > 4 {
				t.Errorf("Masters() = %d at return, want 3 or 4 (the paused master cannot have answered)", got)
			}
			select {
			case <-h.Settled():
				t.Fatal("Settled closed while the paused master's attempt is out")
			default:
			}
			if tc.unlockBefore {
				if err := h.Unlock(bg(t)); err != nil {
					t.Fatalf("Unlock: %v", err)
				}
			}
			resume()
			select {
			case <-h.Settled(): // the paused master's attempt has been answered and dealt with
			case <-time.After(callBound):
				t.Fatal("Settled not closed once the paused master answered")
			}
			if !tc.unlockBefore {
				if got := h.Masters(); got != 5 {
					t.Errorf("Masters() = %d once Settled, want 5", got)
				}
				if err := h.Unlock(bg(t)); err != nil {
					t.Fatalf("Unlock: %v", err)
				}
			}
			multilock.WaitBackground(l)
			if on := exists(t, raws(t, servers), n); count(on) != 0 {
				t.Errorf("key left on masters %v", on)
			}
		})
	}
}

func TestRoundGivesUpOnceTheQuorumIsOutOfReach(t *testing.T) {
	servers := integration.Masters(t, 5, integration.Options{})
	n := name(t)
	// Another owner holds masters 0, 1 and 2.
	for _, c := range clients(t, servers[:3], lock.Config{}) {
		h, err := c.Mutex(n).TryLock(bg(t))
		if err != nil {
			t.Fatalf("conflicting hold: %v", err)
		}
		t.Cleanup(func() { _ = h.Unlock(context.Background()) })
	}
	cs := clients(t, servers, lock.Config{CommandTimeout: 15 * time.Second})
	l := multilock.NewRedLock(mutexes(cs, n)...)
	resume := pause(t, servers[4])
	var rounds []observe.Round
	obs := &observe.Observer{Round: func(_ context.Context, e observe.Round) { rounds = append(rounds, e) }}

	ctx, cancel := context.WithTimeout(bg(t), callBound)
	defer cancel()
	_, err := l.TryLock(ctx, multilock.PerMasterTimeout(longWait), multilock.Observe(obs))
	if !errors.Is(err, multilock.ErrQuorum) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("TryLock against a holder of 3 of 5: %v, want ErrQuorum before the call's bound", err)
	}
	if len(rounds) != 1 || rounds[0].Refused != 3 || rounds[0].Granted > 1 {
		t.Errorf("rounds %+v: want one, decided with 3 refused", rounds)
	}
	// The paused master grants once resumed: its sender releases it.
	resume()
	multilock.WaitBackground(l)
	if on := exists(t, raws(t, servers[3:]), n); count(on) != 0 {
		t.Errorf("key left on masters %v of 3 and 4: a grant of the failed round remains", on)
	}
}

// An error reply (here OOM at maxmemory: Redis passes it, lock reports
// ErrUnavailable) is a failed master, not a holder's refusal: the round
// does not count it among the refusals, and asks that master nothing
// more (the holder's lease comes with a refusal's own reply).
func TestUnavailableMasterIsNotARefusal(t *testing.T) {
	servers := []*integration.Server{integration.Redis(t, integration.Options{}), integration.Redis(t, integration.Options{}), integration.Redis(t, integration.Options{})}
	n := name(t)
	other, err := clients(t, servers[:1], lock.Config{})[0].Mutex(n).TryLock(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Unlock(context.Background()) }()
	cs := clients(t, servers, lock.Config{})
	rc := raws(t, servers[2:])[0]
	if err := rc.Do(bg(t), rc.B().ConfigSet().ParameterValue().ParameterValue("maxmemory", "1").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = rc.Do(context.Background(), rc.B().ConfigSet().ParameterValue().ParameterValue("maxmemory", "0").Build()).Error()
	})
	l := multilock.NewRedLock(mutexes(cs, n)...)
	var rounds []observe.Round
	obs := &observe.Observer{Round: func(_ context.Context, e observe.Round) { rounds = append(rounds, e) }}

	_, err = l.TryLock(bg(t), multilock.PerMasterTimeout(longWait), multilock.Observe(obs))
	if !errors.Is(err, multilock.ErrQuorum) || !errors.Is(err, lock.ErrUnavailable) {
		t.Fatalf("TryLock: %v, want ErrQuorum with the OOM master's ErrUnavailable", err)
	}
	if len(rounds) != 1 || rounds[0].Refused != 1 {
		t.Errorf("rounds %+v: want one with 1 refused (master 0's holder), not the OOM master", rounds)
	}
	multilock.WaitBackground(l)
}
