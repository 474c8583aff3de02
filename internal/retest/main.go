// Command retest runs go test and runs a failed test again only when the
// machine was seen to stall while it ran.
//
//	retest [-tries 3] [-stall 100ms] -- [go test flags] [packages]
//
// Many tests here bound how long something takes: a call past its ctx's
// end, a renewal within a lease, a waiter woken within a wait. A virtual
// machine whose host deschedules it (session 23's VM and stop 41's CI
// machine froze their processes for 100–600 ms about twice a second)
// fails such tests whatever the library does. retest runs the stall meter
// of package integration in its own process for the whole run, and runs
// go test with -json, printing what plain go test prints (the output of
// failed tests and the package lines). A top-level test that failed is
// run again, alone (-run '^Name$', the same flags), when and only when:
//
//   - some CPU was seen stalled for at least -stall while it ran, or the
//     test logged a stall of a process it started (a line with
//     integration.StallMark: a sentinel's TILT, which the CPU meter does
//     not see when the sentinel waited on its disk); on a machine that
//     does not stall, every failure is final;
//   - its output has no data race, panic or timeout (those are final too:
//     a panic ends the package's other tests unrun);
//   - its package failed of failed tests alone (a leak check or a build
//     failure is final).
//
// It must then pass within -tries runs in all, each failed run again
// showing a stall; otherwise retest fails. Every run again is reported,
// with the stall that allowed it, so that a test that needs them often
// is seen. retest exits 0 when every test passed in the end.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/rlock-go/rlock/integration"
)

// longestStall is integration.LongestStall (a variable for the tests).
var longestStall = integration.LongestStall

// event is one line of go test -json (cmd/test2json).
type event struct {
	Time    time.Time
	Action  string
	Package string
	Test    string
	Output  string
}

// failure is a top-level test that failed in one run.
type failure struct {
	pkg, test string
	stall     time.Duration // the longest stall of any CPU while it ran
	final     string        // why it may not be run again ("" when it may)
	seen      string        // the stall that lets it run again, as "while ..."
}

// result is what one go test run left to decide.
type result struct {
	failures []failure
	passed   []string // top-level tests that passed
	final    []string // package-level reasons the run cannot pass
	ok       bool     // go test exited 0
}

func main() {
	tries := flag.Int("tries", 3, "runs of a failed test in all, the first included")
	minStall := flag.Duration("stall", integration.TryStall, "the stall of one CPU, seen while a test ran, that lets it run again")
	flag.Parse()
	args := flag.Args()
	if len(args) == 0 || *tries < 1 {
		fmt.Fprintln(os.Stderr, "usage: retest [-tries n] [-stall d] -- [go test flags] [packages]")
		os.Exit(2)
	}
	integration.WatchStalls()
	code := run(args, *tries, *minStall)
	integration.StopStalls()
	os.Exit(code)
}

// run runs go test with args, then each failed test again as allowed, and
// returns the exit code.
func run(args []string, tries int, minStall time.Duration) int {
	flags, err := goFlags(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "retest:", err)
		return 2
	}
	r := goTest(args, minStall)
	if r.ok {
		return 0
	}
	if len(r.final) > 0 {
		for _, why := range r.final {
			fmt.Printf("retest: %s: not run again\n", why)
		}
		return 1
	}
	if len(r.failures) == 0 {
		fmt.Println("retest: go test failed with no failed test to run again")
		return 1
	}
	code, passed := 0, 0
	for _, f := range r.failures {
		if !again(f, flags, tries, minStall) {
			code = 1
			continue
		}
		passed++
	}
	fmt.Printf("retest: %d of %d failed tests passed when run again\n", passed, len(r.failures))
	return code
}

// boolFlags are the go test flags that take no value.
var boolFlags = []string{"-race", "-v", "-short", "-failfast", "-cover", "-json", "-benchmem", "-fullpath", "-x", "-n", "-a", "-trimpath"}

// goFlags returns the flags of args (those starting with "-"): each must
// carry its value after "=" unless it takes none, since a value given as
// the next argument would be taken for a package.
func goFlags(args []string) ([]string, error) {
	var flags []string
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			continue
		}
		if !strings.Contains(a, "=") && !slices.Contains(boolFlags, a) {
			return nil, fmt.Errorf("flag %s: give its value as %s=value", a, a)
		}
		flags = append(flags, a)
	}
	return flags, nil
}

// again runs f's test alone until it passes, for at most tries runs in
// all, and reports whether it passed.
func again(f failure, flags []string, tries int, minStall time.Duration) bool {
	for try := 2; ; try++ {
		if f.final != "" {
			fmt.Printf("retest: %s %s failed (run %d): %s: not run again\n", f.pkg, f.test, try-1, f.final)
			return false
		}
		if try > tries {
			fmt.Printf("retest: %s %s failed %d runs of %d, each with a stall seen: failed\n", f.pkg, f.test, tries, tries)
			return false
		}
		fmt.Printf("retest: %s %s failed (run %d) %s: running it again\n", f.pkg, f.test, try-1, f.seen)
		args := append(slices.Clone(flags), "-run=^"+regexp.QuoteMeta(f.test)+"$", f.pkg)
		r := goTest(args, minStall)
		switch {
		case r.ok && slices.Contains(r.passed, f.test):
			fmt.Printf("retest: %s %s passed on run %d\n", f.pkg, f.test, try)
			return true
		case r.ok:
			fmt.Printf("retest: %s %s: run %d passed without running it\n", f.pkg, f.test, try)
			return false
		case len(r.final) > 0:
			fmt.Printf("retest: %s %s: %s: not run again\n", f.pkg, f.test, strings.Join(r.final, "; "))
			return false
		}
		i := slices.IndexFunc(r.failures, func(g failure) bool { return g.test == f.test })
		if i < 0 {
			fmt.Printf("retest: %s %s: the run failed with no failure of it\n", f.pkg, f.test)
			return false
		}
		f = r.failures[i]
	}
}

// goTest runs go test -json with args, prints what plain go test would,
// and returns the failures it saw.
func goTest(args []string, minStall time.Duration) result {
	cmd := exec.Command("go", append([]string{"test", "-json"}, args...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return result{final: []string{err.Error()}}
	}
	if err := cmd.Start(); err != nil {
		return result{final: []string{err.Error()}}
	}
	r := read(out, os.Stdout, minStall)
	err = cmd.Wait()
	r.ok = err == nil
	return r
}

// read reads go test -json from in and writes the text of failed tests
// and of packages to w.
func read(in io.Reader, w io.Writer, minStall time.Duration) result {
	rd := &reader{w: w, minStall: minStall, tests: map[string]*running{}, failedPkg: map[string]bool{}, failedTests: map[string]int{}}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Action == "" {
			fmt.Fprintln(w, sc.Text()) // not an event: go's own message
			continue
		}
		if e.Test == "" {
			rd.pkgEvent(e)
			continue
		}
		rd.testEvent(e)
	}
	if err := sc.Err(); err != nil {
		rd.r.final = append(rd.r.final, "reading go test -json: "+err.Error())
	}
	return rd.finish()
}

// running is a top-level test that started and has not ended.
type running struct {
	start time.Time
	out   strings.Builder // its output and its subtests'
}

// reader is the state of read.
type reader struct {
	w           io.Writer
	minStall    time.Duration
	r           result
	tests       map[string]*running // by package and top-level test
	failedPkg   map[string]bool
	failedTests map[string]int // by package: failed top-level tests
}

// pkgEvent handles an event of a package, not of a test.
func (rd *reader) pkgEvent(e event) {
	if e.Output != "" {
		fmt.Fprint(rd.w, e.Output)
	}
	if strings.Contains(e.Output, "WARNING: DATA RACE") {
		rd.r.final = append(rd.r.final, e.Package+": a data race outside any test")
	}
	if e.Action == "fail" {
		rd.failedPkg[e.Package] = true
	}
}

// testEvent handles an event of a test or subtest.
func (rd *reader) testEvent(e event) {
	top, _, sub := strings.Cut(e.Test, "/")
	key := e.Package + " " + top
	t := rd.tests[key]
	if t == nil {
		t = &running{start: e.Time}
		rd.tests[key] = t
	}
	t.out.WriteString(e.Output)
	if sub || (e.Action != "pass" && e.Action != "fail" && e.Action != "skip") {
		return
	}
	delete(rd.tests, key)
	switch e.Action {
	case "pass":
		rd.r.passed = append(rd.r.passed, top)
	case "fail":
		fmt.Fprint(rd.w, t.out.String())
		rd.failedTests[e.Package]++
		rd.r.failures = append(rd.r.failures, rd.failed(e.Package, top, t, e.Time))
	}
}

// failed is the failure of test top of pkg, which ran as t until end.
func (rd *reader) failed(pkg, top string, t *running, end time.Time) failure {
	f := failure{pkg: pkg, test: top, stall: longestStall(t.start, end)}
	out := t.out.String()
	logged := loggedStall(out)
	switch {
	case strings.Contains(out, "WARNING: DATA RACE") || strings.Contains(out, "race detected during execution of test"):
		f.final = "a data race"
	case strings.Contains(out, "panic: "):
		f.final = "a panic"
	case exclusion(out):
		f.final = "an exclusion check (double grant, overlap)"
	case f.stall >= rd.minStall:
		f.seen = fmt.Sprintf("while a CPU was seen stalled %v", f.stall.Round(time.Millisecond))
	case logged != "":
		f.seen = "while a process it started stalled: " + logged
	default:
		f.final = fmt.Sprintf("no CPU was seen stalled %v or more while it ran (longest: %v), and it logged no stall", rd.minStall, f.stall.Round(time.Millisecond))
	}
	return f
}

// loggedStall returns what the first line of out that tells of a stall
// (integration.StallMark, then "what: detail") says after the mark, up to
// its detail, or "" when there is none.
func loggedStall(out string) string {
	_, line, ok := strings.Cut(out, integration.StallMark)
	if !ok {
		return ""
	}
	line, _, _ = strings.Cut(line, "\n")
	what, _, _ := strings.Cut(line, ": ")
	return strings.TrimSpace(what)
}

// brokenExclusion matches what the tests say when an exclusion broke in
// a way a stalled process cannot explain: a lock test's "double grant:"
// (replication, a cut, a known outcome), the fault suite's counts judged
// against its assumptions (which allow for pauses), and a count of
// overlapping holds under leases no stall outlives. A failure that says
// one never runs again, stall or not. (A Held still live while another
// Client is granted, in a test of one process on a short lease, is not
// here: a freeze past the lease does that to any lease-based lock.)
var brokenExclusion = regexp.MustCompile(`(?i)double grant:|[1-9][0-9]* double grants inside the assumptions|[1-9][0-9]* losses never signalled|[1-9][0-9]* stale writes accepted|[1-9][0-9]* overlap|overlaps [1-9]`)

// exclusion reports whether out tells of a broken exclusion
// (brokenExclusion).
func exclusion(out string) bool { return brokenExclusion.MatchString(out) }

// finish adds what never ended, and packages that failed without a
// failed test, to the result's final reasons.
func (rd *reader) finish() result {
	for key, t := range rd.tests {
		fmt.Fprint(rd.w, t.out.String())
		rd.r.final = append(rd.r.final, key+" never ended (a panic or a timeout)")
	}
	for pkg := range rd.failedPkg {
		if rd.failedTests[pkg] == 0 {
			rd.r.final = append(rd.r.final, pkg+" failed with no failed test (its build, TestMain or leak check)")
		}
	}
	slices.Sort(rd.r.final)
	return rd.r
}
