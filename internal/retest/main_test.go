package main

import (
	"strings"
	"testing"
	"time"
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

func TestARaceOrAPanicIsFinalWhateverTheStalls(t *testing.T) {
	stalled(t, time.Second)
	for _, out := range []string{`"WARNING: DATA RACE\n"`, `"panic: test timed out after 40m0s\n"`} {
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
