package lock

import (
	"math"
	"testing"
	"time"
)

// The sleeps of Redisson's ExponentialBackOffPolicy: 1 ms, then each the
// previous doubled plus a jitter under one millisecond per failure so
// far, never over Max, and Max for good once reached; ConstantSpin sleeps
// the same every time.
func TestSpinPolicySleeps(t *testing.T) {
	b, err := SpinBackoff{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if b.Initial != time.Millisecond || b.Max != 128*time.Millisecond || b.Multiplier != 2 {
		t.Fatalf("defaults %+v, want Redisson's 1 ms, 128 ms, 2", b)
	}
	p := newSpinPolicy(b)
	prev := time.Duration(0)
	for i := range 40 {
		d := p.sleep()
		switch {
		case i == 0 && d != time.Millisecond:
			t.Fatalf("first sleep %v, want 1ms", d)
		case i > 0 && prev < b.Max && (d < min(2*prev, b.Max) || d > min(2*prev+time.Duration(i)*time.Millisecond, b.Max)):
			t.Fatalf("sleep %d = %v after %v: want twice plus under %d ms, at most Max", i, d, prev, i)
		case prev == b.Max && d != b.Max:
			t.Fatalf("sleep %d = %v after Max", i, d)
		}
		prev = d
	}
	if prev != b.Max {
		t.Fatalf("after 40 sleeps %v, want Max", prev)
	}
	cb, err := ConstantSpin(64 * time.Millisecond).withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	p = newSpinPolicy(cb)
	for range 5 {
		if d := p.sleep(); d != 64*time.Millisecond {
			t.Fatalf("constant sleep %v", d)
		}
	}
}

// A Multiplier so large that the next sleep's product would overflow
// saturates at Max: the sleeps never turn zero or negative (hot polling).
// (An independent review found 18 of 50 sleeps at zero or below.)
func TestSpinPolicyLargeMultiplierSaturates(t *testing.T) {
	b, err := SpinBackoff{Initial: time.Millisecond, Max: 100 * time.Millisecond, Multiplier: math.MaxInt64}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	p := newSpinPolicy(b)
	for i := range 50 {
		d := p.sleep()
		if want := b.Max; i > 0 && d != want || i == 0 && d != b.Initial {
			t.Fatalf("sleep %d = %v, want Initial then Max", i, d)
		}
	}
}
