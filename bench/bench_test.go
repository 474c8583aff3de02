package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// stallingLocker blocks its first n Lock calls until their context ends,
// like rueidislock's WithContext after a timed-out attempt.
type stallingLocker struct{ stallFirst, calls atomic.Int32 }

func (l *stallingLocker) Lock(ctx context.Context, name string) (func(context.Context) error, error) {
	if l.calls.Add(1) <= l.stallFirst.Load() {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return func(context.Context) error { return nil }, nil
}

func (l *stallingLocker) Close() {}

func TestLockBoundedRetriesAStall(t *testing.T) {
	if testing.Short() {
		t.Skip("waits stallAfter")
	}
	l := &stallingLocker{}
	l.stallFirst.Store(1)
	unlock, stalled, err := lockBounded(context.Background(), l, "k", "test: stalling")
	if err != nil || unlock == nil || !stalled {
		t.Fatalf("lockBounded = %v, %v, %v; want an unlock after one stall", unlock != nil, stalled, err)
	}
	if got := l.calls.Load(); got != 2 {
		t.Fatalf("Lock called %d times, want 2", got)
	}
	stalls.Lock()
	n := stalls.n["test: stalling"]
	stalls.Unlock()
	if n != 1 {
		t.Fatalf("stalls counted %d, want 1", n)
	}
}

func TestLockBoundedPassesThrough(t *testing.T) {
	l := &stallingLocker{}
	_, stalled, err := lockBounded(context.Background(), l, "k", "test: fine")
	if err != nil || stalled {
		t.Fatalf("lockBounded = %v, %v", stalled, err)
	}
}

// The context of a successful Lock lives until its unlock has run, and
// no longer: it is not left among its parent's children.
func TestLockBoundedEndsTheLockContextAfterUnlock(t *testing.T) {
	var held context.Context
	l := ctxLocker{got: &held}
	unlock, _, err := lockBounded(context.Background(), l, "k", "test: ctx")
	if err != nil {
		t.Fatal(err)
	}
	if held.Err() != nil {
		t.Fatal("the lock's context ended before its unlock")
	}
	if err := unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	if held.Err() == nil {
		t.Fatal("the lock's context still lives after its unlock: each cycle would leave it among the run context's children")
	}
}

// ctxLocker records the context of its Lock; its unlock checks that the
// context still lives.
type ctxLocker struct{ got *context.Context }

func (l ctxLocker) Lock(ctx context.Context, name string) (func(context.Context) error, error) {
	*l.got = ctx
	return func(context.Context) error {
		if ctx.Err() != nil {
			return errors.New("the lock's context ended before its unlock ran")
		}
		return nil
	}, nil
}

func (ctxLocker) Close() {}

func TestSpliceKeepsTextOutsideMarkers(t *testing.T) {
	old := "# Title\n\nintro by someone\n\n" + beginMarker + "\nold numbers\n" + endMarker + "\n\nnotes after\n"
	got := string(splice([]byte(old), "new numbers\n"))
	want := "# Title\n\nintro by someone\n\n" + beginMarker + "\nnew numbers\n" + endMarker + "\n\nnotes after\n"
	if got != want {
		t.Fatalf("splice:\n%s\nwant:\n%s", got, want)
	}
	fresh := string(splice(nil, "numbers\n"))
	if !strings.Contains(fresh, beginMarker+"\nnumbers\n"+endMarker) || !strings.HasPrefix(fresh, "# Benchmarks") {
		t.Fatalf("new page: %q", fresh)
	}
	appended := string(splice([]byte("# Mine\n"), "n\n"))
	if !strings.HasPrefix(appended, "# Mine\n\n"+beginMarker) {
		t.Fatalf("page without markers: %q", appended)
	}
}

func TestPercentiles(t *testing.T) {
	s := samples{5, 1, 4, 2, 3, 6, 7, 8, 9, 10}
	if p := s.pct(50); p != 5 {
		t.Fatalf("p50 = %v", p)
	}
	if p := s.pct(99); p != 10 {
		t.Fatalf("p99 = %v", p)
	}
	if p := (samples{}).pct(50); p != 0 {
		t.Fatalf("empty p50 = %v", p)
	}
}

func TestPairedDiff(t *testing.T) {
	a := []time.Duration{10, 20, 30, 40}
	b := []time.Duration{1, 2, 3}
	// Differences of the first three rounds: 9, 18, 27; the median is 18.
	if d := pairedDiff(a, b); d != 18 {
		t.Fatalf("pairedDiff = %v, want 18", d)
	}
	if d := pairedDiff([]time.Duration{5, 1}, []time.Duration{1, 7}); d != -1 { // differences 4 and -6
		t.Fatalf("pairedDiff of an even count = %v, want -1", d)
	}
	if d := pairedDiff(nil, b); d != 0 {
		t.Fatalf("pairedDiff without rounds = %v", d)
	}
}

// overtook counts a grant that came before the grant of a caller more
// than overtakeSlack earlier, and nothing in FIFO order.
func TestOvertook(t *testing.T) {
	t0 := time.Unix(0, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	fifo := []grant{{called: at(0), got: at(10)}, {called: at(2), got: at(20)}, {called: at(4), got: at(30)}}
	if got := overtook(fifo); got != 0 {
		t.Fatalf("FIFO grants: overtook %v, want 0", got)
	}
	// The caller at 4 ms is granted first, before both callers at 0 ms:
	// one of three grants overtook; the two at 0 ms overtook nobody.
	barge := []grant{{called: at(0), got: at(30)}, {called: at(4), got: at(10)}, {called: at(0), got: at(20)}}
	if got := overtook(barge); got != 1.0/3 {
		t.Fatalf("one barging grant of three: overtook %v, want 1/3", got)
	}
}

func TestDescribeIdle(t *testing.T) {
	root := t.TempDir()
	write := func(p, v string) {
		t.Helper()
		p = filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := describeIdle(root); got != "unknown" {
		t.Errorf("no cpuidle: %q, want unknown", got)
	}
	write("/sys/devices/system/cpu/cpuidle/current_driver", "intel_idle")
	write("/sys/devices/system/cpu/cpuidle/current_governor_ro", "menu")
	if got, want := describeIdle(root), "intel_idle (governor menu)"; got != want {
		t.Errorf("bare metal: %q, want %q", got, want)
	}
	// The haltpoll module loaded but not the driver in use (session 29's
	// VM: driver none, governor menu): its guest_halt_poll_ns does
	// nothing, and naming it made the page read as a guest that polls.
	write("/sys/devices/system/cpu/cpuidle/current_driver", "none")
	write("/sys/module/haltpoll/parameters/guest_halt_poll_ns", "200000")
	if got, want := describeIdle(root), "none (governor menu)"; got != want {
		t.Errorf("KVM guest without a cpuidle driver: %q, want %q", got, want)
	}
	write("/sys/devices/system/cpu/cpuidle/current_driver", "haltpoll")
	write("/sys/devices/system/cpu/cpuidle/current_governor", "haltpoll")
	write("/sys/module/haltpoll/parameters/guest_halt_poll_ns", "0")
	if got, want := describeIdle(root), "haltpoll, guest_halt_poll_ns 0"; got != want {
		t.Errorf("KVM guest: %q, want %q", got, want)
	}
}
