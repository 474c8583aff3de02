package multilock_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/multilock"
	"github.com/rlock-go/rlock/reentrant"
)

// A round cut by its caller's ctx gives back the grants it got; those
// releases, and a fence raise still out, are the round's to settle in
// the background, not the caller's to wait for (issue 29, stage 3: a call
// returns within its ctx plus 10 ms). The 504-round fault run measured
// MultiLock Locks returning up to 88.7 ms after their ctx.

// acquireOf matches an acquire script of the lock called name (no
// PUBLISH: a release has one; not a renewal).
func acquireOf(name string) integration.MatchFunc {
	return func(cmd []string) bool {
		return len(cmd) > 3 && strings.EqualFold(cmd[0], "EVALSHA") && cmd[1] != reentrant.RenewScript.SHA1() &&
			slices.Contains(cmd, name) && !slices.Contains(cmd, "PUBLISH") && !slices.Contains(cmd, "SPUBLISH")
	}
}

// releaseOf matches a release script of the lock called name.
func releaseOf(name string) integration.MatchFunc {
	return func(cmd []string) bool {
		return len(cmd) > 3 && strings.EqualFold(cmd[0], "EVALSHA") && slices.Contains(cmd, name) && slices.Contains(cmd, "PUBLISH")
	}
}

func injectRule(t *testing.T, s *integration.Server, r integration.Rule) {
	t.Helper()
	f, err := s.Inject(r)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Remove)
}

// cutSlack is the most a call may return after its ctx ended here: the
// issue's 10 ms p99, with room for a loaded machine; the waits this test
// guards against are 100 ms and more.
const cutSlack = 50 * time.Millisecond

func TestLockCutByItsCtxDoesNotWaitForTheGiveBack(t *testing.T) {
	servers := integration.Masters(t, 2, integration.Options{})
	cs := clients(t, servers, lock.Config{})
	n := name(t)
	// Master 1 answers the acquire only after the caller's ctx; master
	// 0 grants at once, and its give-back is slow.
	injectRule(t, servers[1], integration.Rule{Match: acquireOf(n), Action: integration.DelayRequest(time.Second)})
	injectRule(t, servers[0], integration.Rule{Match: releaseOf(n), Action: integration.DelayRequest(300 * time.Millisecond), Times: math.MaxInt})
	l := multilock.NewMultiLock(mutexes(cs, n)...)

	lockCut(t, l, "the give-back of master 0's grant is slow")
	multilock.WaitBackground(l)
	if on := exists(t, raws(t, servers), n); count(on) != 0 {
		t.Errorf("key left on masters %v once the background settled", on)
	}
}

func TestFencedLockCutByItsCtxDoesNotWaitForTheRaise(t *testing.T) {
	servers := integration.Masters(t, 2, integration.Options{})
	cs := clients(t, servers, lock.Config{})
	rs := raws(t, servers)
	n := name(t)
	// Master 0's counter is far ahead: master 1 must be raised to 101,
	// and that raise is held back past the caller's ctx.
	if err := rs[0].Do(bg(t), rs[0].B().Set().Key(reentrant.TokenName(n)).Value("100").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	injectRule(t, servers[1], integration.Rule{Match: integration.Command("EVALSHA").WithArg(reentrant.TokenName(n)).WithArg("101"),
		Action: integration.DelayRequest(time.Second)})
	l := multilock.NewMultiLock(mutexes(cs, n)...)

	lockCut(t, l, "a fence raise is out", lock.Fenced())
	multilock.WaitBackground(l)
	if on := exists(t, rs, n); count(on) != 0 {
		t.Errorf("key left on masters %v once the background settled", on)
	}
}

// lockCut calls l.Lock with a 100 ms ctx that ends while why holds, and
// checks that it fails with the ctx's error within cutSlack of its end
// (not counting the time the process was stalled: integration.Stalled).
func lockCut(t *testing.T, l *multilock.Lock, why string, opts ...lock.Option) {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg(t), 100*time.Millisecond)
	defer cancel()
	end, _ := ctx.Deadline()
	h, err := l.Lock(ctx, opts...)
	over := time.Since(end)
	if err == nil {
		_ = h.Unlock(bg(t))
		t.Fatalf("Lock acquired although its ctx ended first (%s)", why)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Lock = %v, want its ctx's DeadlineExceeded", err)
	}
	if stalled := integration.Stalled(end, end.Add(over)); over-stalled > cutSlack {
		t.Errorf("Lock returned %v after its ctx ended (%s; the process stalled %v of it), want at most %v", over, why, stalled, cutSlack)
	}
}

// A TryLock whose Wait runs out during a round returns once that round
// decides (at most the per-master timeout) and its give-backs are
// answered (at most the per-master timeout more: a call right after it
// finds them free, TestMultiLockNeedsEveryMaster); slower ones go on in
// the background.
func TestTryLockReturnsWithinTwoPerMasterTimeoutsOfItsWait(t *testing.T) {
	servers := integration.Masters(t, 2, integration.Options{})
	cs := clients(t, servers, lock.Config{})
	n := name(t)
	injectRule(t, servers[1], integration.Rule{Match: acquireOf(n), Action: integration.DelayRequest(2 * time.Second)})
	injectRule(t, servers[0], integration.Rule{Match: releaseOf(n), Action: integration.DelayRequest(time.Second), Times: math.MaxInt})
	l := multilock.NewMultiLock(mutexes(cs, n)...)

	const wait, perMaster = 100 * time.Millisecond, 300 * time.Millisecond
	start := time.Now()
	h, err := l.TryLock(bg(t), lock.Wait(wait), multilock.PerMasterTimeout(perMaster))
	over := time.Since(start.Add(wait))
	if err == nil {
		_ = h.Unlock(bg(t))
		t.Fatal("TryLock acquired with master 1's acquire held back past its Wait")
	}
	if !errors.Is(err, multilock.ErrQuorum) {
		t.Errorf("TryLock = %v, want ErrQuorum", err)
	}
	if stalled := integration.Stalled(start.Add(wait), start.Add(wait+over)); over-stalled > 2*perMaster+cutSlack {
		t.Errorf("TryLock returned %v after its Wait ran out (the give-back of master 0's grant is slow; the process stalled %v of it), want at most two per-master timeouts (%v) and %v", over, stalled, perMaster, cutSlack)
	}
	multilock.WaitBackground(l)
	if on := exists(t, raws(t, servers), n); count(on) != 0 {
		t.Errorf("key left on masters %v once the background settled", on)
	}
}
