package main

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestDemo(t *testing.T) {
	start := time.Now()
	r := runRlock(t, "demo", "--workers", "3", "--rounds", "2", "--seed", "7")
	if r.code != 0 {
		t.Fatalf("exit %d; stderr: %s\nstdout:\n%s", r.code, r.stderr, r.stdout)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("the demo took %v", d)
	}
	for _, want := range []string{
		"overlaps: 0",
		"fencing tokens: 12 taken, strictly increasing",
		"acquisitions: 6, re-entries: 6 (hold count 2: 6)",
		"re-entered through held.Context(): hold count 2",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	for w := 1; w <= 3; w++ {
		if !strings.Contains(r.stdout, fmt.Sprintf("worker %-2d %d acquisitions", w, 2)) {
			t.Errorf("output lacks worker %d's 2 acquisitions", w)
		}
	}
	// The timeline: time since start, worker, event.
	if !regexp.MustCompile(`(?m)^ +\+[0-9]+\.[0-9]ms  worker 1   acquired after`).MatchString(r.stdout) {
		t.Errorf("no timeline line for worker 1")
	}
	if t.Failed() {
		t.Logf("stdout:\n%s", r.stdout)
	}
}

func TestDemoDefaults(t *testing.T) {
	r := runRlock(t, "demo")
	if r.code != 0 || !strings.Contains(r.stdout, "4 workers, 3 rounds each") || !strings.Contains(r.stdout, "overlaps: 0") {
		t.Fatalf("exit %d; stderr: %s\nstdout:\n%s", r.code, r.stderr, r.stdout)
	}
}

func TestDemoBadUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--workers", "0"},
		{"--workers", "1000"},
		{"--rounds", "0"},
		{"--seed", "x"},
		{"extra"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			r := runRlock(t, append([]string{"demo"}, args...)...)
			if r.code != exitUsage || !strings.HasPrefix(r.stderr, "rlock: ") {
				t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
			}
		})
	}
}
