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
	single, redlock, ok := strings.Cut(r.stdout, "\n== RedLock on 5 masters")
	if !ok {
		t.Fatalf("no RedLock section; stdout:\n%s", r.stdout)
	}

	t.Run("one master", func(t *testing.T) {
		for _, want := range []string{
			"== one master",
			"overlaps: 0",
			"fencing tokens: 12 taken, strictly increasing",
			"acquisitions: 6, re-entries: 6 (hold count 2: 6)",
			"re-entered through held.Context(): hold count 2",
		} {
			if !strings.Contains(single, want) {
				t.Errorf("output lacks %q", want)
			}
		}
		checkWorkers(t, single, 3, 2)
		// The timeline: time since start, worker, event.
		if !regexp.MustCompile(`(?m)^ +\+[0-9]+\.[0-9]ms  worker 1   acquired [0-9.]+[µm]?s after asking`).MatchString(single) {
			t.Errorf("no timeline line for worker 1")
		}
	})

	t.Run("RedLock", func(t *testing.T) {
		for _, want := range []string{
			"a RedLock needs 3 of them",
			"overlaps: 0",
			"fencing tokens: 6 taken, strictly increasing",
			"acquisitions: 6\n",
			"masters: 5, quorum 3",
			"during acquisition 3 of 6; the 3 after it were held on",
		} {
			if !strings.Contains(redlock, want) {
				t.Errorf("output lacks %q", want)
			}
		}
		checkWorkers(t, redlock, 3, 2)
		// The kill, while holding, keeping a majority; the acquisitions
		// after it on at most the four masters left.
		kill := regexp.MustCompile(`worker \d +killed master \d \(127\.0\.0\.1:\d+\), (not )?one of its own, while holding the lock: still held on [345], a majority`)
		loc := kill.FindStringIndex(redlock)
		if loc == nil {
			t.Fatalf("no kill in the timeline")
		}
		after := regexp.MustCompile(`acquired .* after asking, .*held on (\d) of 5 masters`).FindAllStringSubmatch(redlock[loc[1]:], -1)
		if len(after) != 3 {
			t.Fatalf("%d acquisitions after the kill, want 3", len(after))
		}
		for _, m := range after {
			if m[1] != "3" && m[1] != "4" {
				t.Errorf("an acquisition after the kill held on %s masters", m[1])
			}
		}
	})
	if t.Failed() {
		t.Logf("stdout:\n%s", r.stdout)
	}
}

// checkWorkers checks the summary's acquisitions per worker.
func checkWorkers(t *testing.T, out string, workers, rounds int) {
	t.Helper()
	for w := 1; w <= workers; w++ {
		if !strings.Contains(out, fmt.Sprintf("worker %-2d %d acquisitions", w, rounds)) {
			t.Errorf("output lacks worker %d's %d acquisitions", w, rounds)
		}
	}
}

func TestDemoTraceStdout(t *testing.T) {
	r := runRlock(t, "demo", "--workers", "1", "--rounds", "1", "--trace", "stdout")
	if r.code != 0 {
		t.Fatalf("exit %d; stderr: %s\nstdout:\n%s", r.code, r.stderr, r.stdout)
	}
	for _, want := range []string{`"Name":"rlock.acquire"`, `"Name":"rlock demo: RedLock on 5 masters`, "overlaps: 0"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

func TestDemoDefaults(t *testing.T) {
	r := runRlock(t, "demo")
	if r.code != 0 || !strings.Contains(r.stdout, "4 workers, 3 rounds each") || strings.Count(r.stdout, "overlaps: 0") != 2 {
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
		{"--trace", "otlp"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			r := runRlock(t, append([]string{"demo"}, args...)...)
			if r.code != exitUsage || !strings.HasPrefix(r.stderr, "rlock: ") {
				t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
			}
		})
	}
}

// TestDemoGrammar: row 24 of newcomer-2's table: counts of one are
// singular, and "by delay" says what it is.
func TestDemoGrammar(t *testing.T) {
	r := runRlock(t, "demo", "--workers", "1", "--rounds", "1", "--seed", "3")
	if r.code != 0 {
		t.Fatalf("exit %d; stderr: %s\nstdout:\n%s", r.code, r.stderr, r.stdout)
	}
	for _, bad := range []string{"1 rounds", "1 acquisitions", "the 1 after it were"} {
		if strings.Contains(r.stdout, bad) {
			t.Errorf("output has %q:\n%s", bad, r.stdout)
		}
	}
	if !strings.Contains(r.stdout, "1 round each") {
		t.Errorf("output lacks \"1 round each\":\n%s", r.stdout)
	}
	if strings.Contains(r.stdout, " by delay") && !strings.Contains(r.stdout, "delay: a retry after a split vote") {
		t.Errorf("\"by delay\" unexplained:\n%s", r.stdout)
	}
}

// TestDemoExplains: row 24 of newcomer-2's table: gaps between the
// fencing tokens are explained where they occur, and an acquisition's
// time is the time since asking, not a wait behind anyone.
func TestDemoExplains(t *testing.T) {
	r := runRlock(t, "demo", "--workers", "3", "--rounds", "2", "--seed", "7")
	if r.code != 0 {
		t.Fatalf("exit %d; stderr: %s\nstdout:\n%s", r.code, r.stderr, r.stdout)
	}
	if strings.Contains(r.stdout, " wait, fence ") || !strings.Contains(r.stdout, " after asking, fence ") {
		t.Errorf("acquisitions not timed \"after asking\":\n%s", r.stdout)
	}
	lines := regexp.MustCompile(`fencing tokens: (\d+) taken, strictly increasing \((\d+) to (\d+)\)(.*)`).FindAllStringSubmatch(r.stdout, -1)
	if len(lines) != 2 {
		t.Fatalf("%d fencing token lines, want 2:\n%s", len(lines), r.stdout)
	}
	for _, m := range lines {
		var n, lo, hi int
		fmt.Sscan(m[1], &n)
		fmt.Sscan(m[2], &lo)
		fmt.Sscan(m[3], &hi)
		if gaps := hi-lo+1 != n; gaps != strings.Contains(m[4], "only their order matters") {
			t.Errorf("%q: gaps %v, explained %v", m[0], gaps, !gaps)
		}
	}
}
