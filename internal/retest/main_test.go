package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rlock-go/rlock/integration"
)

// lines is go test -json output: a passed test, a failed one with a
// failed subtest, and the package's lines.
func lines(failedOutput string, pkgFailed bool) string {
	const p = `"Package":"example.com/p"`
	var b strings.Builder
	b.WriteString(`{"Time":"2026-11-30T10:00:00Z","Action":"run",` + p + `,"Test":"TestOK"}` + "\n")
	b.WriteString(`{"Time":"2026-11-30T10:00:00Z","Action":"output",` + p + `,"Test":"TestOK","Output":"quiet\n"}` + "\n")
	b.WriteString(`{"Time":"2026-11-30T10:00:01Z","Action":"pass",` + p + `,"Test":"TestOK"}` + "\n")
	if failedOutput != "" {
		b.WriteString(`{"Time":"2026-11-30T10:00:01Z","Action":"run",` + p + `,"Test":"TestSlow"}` + "\n")
		b.WriteString(`{"Time":"2026-11-30T10:00:01Z","Action":"run",` + p + `,"Test":"TestSlow/sub"}` + "\n")
		b.WriteString(`{"Time":"2026-11-30T10:00:01Z","Action":"output",` + p + `,"Test":"TestSlow/sub","Output":` + failedOutput + `}` + "\n")
		b.WriteString(`{"Time":"2026-11-30T10:00:02Z","Action":"fail",` + p + `,"Test":"TestSlow/sub"}` + "\n")
		b.WriteString(`{"Time":"2026-11-30T10:00:02Z","Action":"fail",` + p + `,"Test":"TestSlow"}` + "\n")
	}
	if pkgFailed {
		b.WriteString(`{"Time":"2026-11-30T10:00:03Z","Action":"output",` + p + `,"Output":"FAIL\texample.com/p\t3s\n"}` + "\n")
		b.WriteString(`{"Time":"2026-11-30T10:00:03Z","Action":"fail",` + p + `}` + "\n")
	}
	return b.String()
}

// stalled makes longestStall answer d for the test.
func stalled(t *testing.T, d time.Duration) {
	saved := longestStall
	longestStall = func(time.Time, time.Time) time.Duration { return d }
	t.Cleanup(func() { longestStall = saved })
}

func TestAFailureWithAStallMayRunAgain(t *testing.T) {
	stalled(t, 300*time.Millisecond)
	var w strings.Builder
	r := read(strings.NewReader(lines(`"bound_test.go:9: returned 400ms late\n"`, true)), &w, 100*time.Millisecond)
	if len(r.final) != 0 || len(r.failures) != 1 {
		t.Fatalf("final %q, failures %+v: want one failure to run again", r.final, r.failures)
	}
	if f := r.failures[0]; f.test != "TestSlow" || f.pkg != "example.com/p" || f.final != "" || f.stall != 300*time.Millisecond {
		t.Fatalf("failure %+v, want TestSlow of example.com/p, a 300ms stall, not final", f)
	}
	if out := w.String(); !strings.Contains(out, "returned 400ms late") || strings.Contains(out, "quiet") || !strings.Contains(out, "FAIL\texample.com/p") {
		t.Fatalf("printed %q: want the failed test's output and the package's, not the passed test's", out)
	}
}

func TestAFailureWithoutAStallIsFinal(t *testing.T) {
	stalled(t, 99*time.Millisecond)
	r := read(strings.NewReader(lines(`"returned 400ms late\n"`, true)), &strings.Builder{}, 100*time.Millisecond)
	if len(r.failures) != 1 || !strings.Contains(r.failures[0].final, "no CPU was seen stalled") {
		t.Fatalf("failures %+v: want one, final for want of a stall", r.failures)
	}
}

// quoted is s as a JSON string, for lines.
func quoted(t *testing.T, s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A sentinel's TILT, logged by integration.RedisSentinel with
// integration.StallMark, lets a failure run again with no CPU stall seen;
// the TILT of a sentinel the test paused, logged without the mark, does
// not; nor does the mark excuse a race.
func TestAFailureThatLoggedAStallMayRunAgain(t *testing.T) {
	stalled(t, 0)
	const tilt = "sentinel 127.0.0.1:40823 entered TILT at 03:31:56.236 (in it until 03:32:26.301)"
	out := "    reconnect_test.go:120: rlock: integration: waiting for sentinels agree on a master other than 127.0.0.1:34167\n" +
		"    sentinel.go:248: " + integration.StallMark + tilt + ": its timer ran 2s or more late\n"
	r := read(strings.NewReader(lines(quoted(t, out), true)), &strings.Builder{}, 100*time.Millisecond)
	if len(r.final) != 0 || len(r.failures) != 1 || r.failures[0].final != "" {
		t.Fatalf("final %q, failures %+v: want one failure to run again", r.final, r.failures)
	}
	if want := "while a process it started stalled: " + tilt; r.failures[0].seen != want {
		t.Fatalf("seen %q, want %q", r.failures[0].seen, want)
	}
	for _, out := range []string{
		"    sentinel.go:248: rlock: integration: " + tilt + ", after the test paused it: not a stall\n",
		"WARNING: DATA RACE\n    sentinel.go:248: " + integration.StallMark + tilt + ": its timer ran 2s or more late\n",
	} {
		r := read(strings.NewReader(lines(quoted(t, out), true)), &strings.Builder{}, 100*time.Millisecond)
		if len(r.failures) != 1 || r.failures[0].final == "" {
			t.Errorf("output %q: failures %+v, want one, final", out, r.failures)
		}
	}
}

func TestARaceAPanicOrABrokenExclusionIsFinalWhateverTheStalls(t *testing.T) {
	stalled(t, time.Second)
	for _, out := range []string{`"WARNING: DATA RACE\n"`, `"    testing.go:1490: race detected during execution of test\n"`, `"panic: test timed out after 40m0s\n"`, `"double grant: a writer was granted\n"`, `"3 overlaps on a name\n"`} {
		r := read(strings.NewReader(lines(out, true)), &strings.Builder{}, 100*time.Millisecond)
		if len(r.failures) != 1 || r.failures[0].final == "" {
			t.Errorf("output %s: failures %+v, want one, final", out, r.failures)
		}
	}
}

func TestAPackageFailedWithoutAFailedTestIsFinal(t *testing.T) {
	stalled(t, time.Second)
	r := read(strings.NewReader(lines("", true)), &strings.Builder{}, 100*time.Millisecond)
	if len(r.final) != 1 || !strings.Contains(r.final[0], "no failed test") {
		t.Fatalf("final %q: want the package's failure (a leak check, a build) final", r.final)
	}
}

func TestATestThatNeverEndedIsFinal(t *testing.T) {
	stalled(t, time.Second)
	in := `{"Time":"2026-11-30T10:00:00Z","Action":"run","Package":"example.com/p","Test":"TestHang"}` + "\n"
	r := read(strings.NewReader(in), &strings.Builder{}, 100*time.Millisecond)
	if len(r.final) != 1 || !strings.Contains(r.final[0], "never ended") {
		t.Fatalf("final %q: want TestHang's run final", r.final)
	}
}

func TestPassedTestsAreNamed(t *testing.T) {
	r := read(strings.NewReader(lines("", false)), &strings.Builder{}, 100*time.Millisecond)
	if len(r.passed) != 1 || r.passed[0] != "TestOK" || len(r.failures) != 0 || len(r.final) != 0 {
		t.Fatalf("result %+v: want TestOK passed, nothing else", r)
	}
}

// End to end, with the go command, on a module of its own: with -stall 0
// every failure may run again; a test that fails its first run only
// passes on its second, one that always fails fails retest.
func TestRunAgainWithTheGoCommand(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(t.TempDir(), "ran")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/flaky\n\ngo 1.26\n"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "flaky_test.go"), []byte(`package flaky

import (
	"os"
	"testing"
)

func TestSteady(t *testing.T) {}

func TestOnce(t *testing.T) {
	if _, err := os.Stat(os.Getenv("RETEST_MARKER")); err != nil {
		_ = os.WriteFile(os.Getenv("RETEST_MARKER"), nil, 0o644)
		t.Fatal("first run")
	}
}

func TestAlways(t *testing.T) {
	if os.Getenv("RETEST_ALWAYS") != "" {
		t.Fatal("always")
	}
}
`), 0o644))
	t.Chdir(dir)
	t.Setenv("GOWORK", "off")
	t.Setenv("GOFLAGS", "")
	t.Setenv("RETEST_MARKER", marker)
	if code := run([]string{"-count=1", "./..."}, 3, 0); code != 0 {
		t.Fatalf("retest = %d, want 0: TestOnce passes on its second run", code)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("TestOnce never ran: %v", err)
	}
	t.Setenv("RETEST_ALWAYS", "1")
	if code := run([]string{"-count=1", "./..."}, 2, 0); code != 1 {
		t.Fatalf("retest = %d, want 1: TestAlways fails every run", code)
	}
}

func TestARaceOutsideAnyTestIsFinal(t *testing.T) {
	stalled(t, time.Second)
	in := lines(`"returned 400ms late\n"`, false) + `{"Action":"output","Package":"example.com/p","Output":"WARNING: DATA RACE\n"}` + "\n"
	r := read(strings.NewReader(in), &strings.Builder{}, 100*time.Millisecond)
	if len(r.final) != 1 || !strings.Contains(r.final[0], "data race") {
		t.Fatalf("final %q: want the race final", r.final)
	}
}

func TestAFlagsValueMustFollowAnEqualsSign(t *testing.T) {
	if _, err := goFlags([]string{"-race", "-timeout", "40m", "./..."}); err == nil {
		t.Fatal("-timeout 40m accepted: 40m would be taken for a package")
	}
	flags, err := goFlags([]string{"-race", "-count=1", "-timeout=40m", "./..."})
	if err != nil || strings.Join(flags, " ") != "-race -count=1 -timeout=40m" {
		t.Fatalf("flags %q, %v", flags, err)
	}
}

func TestOnlyABrokenExclusionIsMatched(t *testing.T) {
	for out, want := range map[string]bool{
		"double grant: a writer was granted":                            true,
		"2 double grants inside the assumptions":                        true,
		"1 losses never signalled on the holder's context":              true,
		"3 overlaps on a name":                                          true,
		"timeouts 0, overlaps 2; want 0, 0":                             true,
		"sync=true: 8 failovers: 0 double grants, 8 losses told before": false,
		"=== RUN   TestMultiLocksOverlappingNamesOppositeOrders":        false,
		"overlaps: 0":             false,
		"0 stale writes accepted": false,
	} {
		if got := exclusion(out); got != want {
			t.Errorf("exclusion(%q) = %v, want %v", out, got, want)
		}
	}
}
