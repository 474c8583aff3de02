// Package leakcheck finds goroutines a test left running. It does what the
// core module's tests used go.uber.org/goleak for, with the same call shape
// (VerifyTestMain, VerifyNone, Find, IgnoreAnyFunction), on the standard
// library alone: Go's module graph carries a module's test-only
// requirements to its consumers, and a program that imports only lock
// should not find goleak in its go.sum.
//
// A goroutine counts as leaked unless it existed when the check's snapshot
// was taken (VerifyTestMain snapshots before the tests run; IgnoreCurrent
// snapshots when called), it is the goroutine doing the check, it waits in
// the testing package (the main goroutine, parents of running tests),
// every frame of its stack belongs to the runtime, testing or os/signal
// packages, or an ignore option matches it. Goroutines still ending when the check runs
// are given time: the check retries with growing pauses for about
// [Timeout] before it reports them.
package leakcheck

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Timeout is about how long Find waits for goroutines to end before it
// reports them.
const Timeout = 3 * time.Second

// goroutine is one entry of a runtime.Stack dump of all goroutines.
type goroutine struct {
	id    string   // the number after "goroutine"
	funcs []string // functions of its frames, innermost first, without "created by"
	stack string   // the whole entry, for reports
}

// dump parses the stacks of all goroutines.
func dump() []goroutine {
	buf := make([]byte, 64<<10)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []goroutine
	for _, entry := range bytes.Split(buf, []byte("\n\n")) {
		if g, ok := parse(string(entry)); ok {
			out = append(out, g)
		}
	}
	return out
}

// parse reads one entry: "goroutine N [state]:" then per frame a function
// line and a tab-indented file line, maybe ended by "created by F in
// goroutine M" and its file line.
func parse(entry string) (goroutine, bool) {
	lines := strings.Split(strings.TrimSpace(entry), "\n")
	head, ok := strings.CutPrefix(lines[0], "goroutine ")
	if !ok {
		return goroutine{}, false
	}
	id, _, _ := strings.Cut(head, " ")
	g := goroutine{id: id, stack: entry}
	for _, l := range lines[1:] {
		if l == "" || strings.HasPrefix(l, "\t") {
			continue
		}
		if strings.HasPrefix(l, "created by ") {
			break
		}
		g.funcs = append(g.funcs, funcName(l))
	}
	return g, true
}

// funcName strips the argument list from a frame's function line:
// "pkg.(*T).m(0x1, 0x2)" is "pkg.(*T).m".
func funcName(line string) string {
	if i := strings.LastIndexByte(line, '('); i > 0 && strings.HasSuffix(line, ")") {
		return line[:i]
	}
	return line
}

// pkgOf is the import path of a function name: "a/b.(*T).m" is "a/b".
func pkgOf(fn string) string {
	slash := strings.LastIndexByte(fn, '/')
	dot := strings.IndexByte(fn[slash+1:], '.')
	if dot < 0 {
		return fn
	}
	return fn[:slash+1+dot]
}

// standard reports whether g is a goroutine no test started: one waiting
// in the testing package for tests to end (the main goroutine and the
// parents of running tests), or one running only code of the runtime, the
// testing package and signal handling.
func standard(g goroutine) bool {
	if len(g.funcs) > 0 && pkgOf(g.funcs[0]) == "testing" {
		return true
	}
	for _, f := range g.funcs {
		p := pkgOf(f)
		switch {
		case p == "runtime", strings.HasPrefix(p, "runtime/"),
			p == "testing", strings.HasPrefix(p, "testing/"),
			p == "os/signal":
		default:
			return false
		}
	}
	return true
}

// Option changes which goroutines a check ignores.
type Option func(*config)

type config struct {
	ignoreIDs   map[string]bool
	ignoreFuncs map[string]bool
}

// IgnoreAnyFunction ignores goroutines with any of the functions anywhere
// in their stacks, named as in a stack trace:
// "github.com/redis/rueidis.(*clusterClient)._refresh.func2".
func IgnoreAnyFunction(fns ...string) Option {
	return func(c *config) {
		for _, f := range fns {
			c.ignoreFuncs[f] = true
		}
	}
}

// IgnoreCurrent ignores the goroutines running when it is called.
func IgnoreCurrent() Option {
	ids := snapshot()
	return func(c *config) {
		for id := range ids {
			c.ignoreIDs[id] = true
		}
	}
}

func snapshot() map[string]bool {
	ids := map[string]bool{}
	for _, g := range dump() {
		ids[g.id] = true
	}
	return ids
}

// leaked lists the goroutines the options do not ignore, apart from the
// caller's own (the first of the dump).
func leaked(c *config) []goroutine {
	var out []goroutine
	for i, g := range dump() {
		if i == 0 || c.ignoreIDs[g.id] || standard(g) || ignoredFunc(c, g) {
			continue
		}
		out = append(out, g)
	}
	return out
}

func ignoredFunc(c *config, g goroutine) bool {
	for _, f := range g.funcs {
		if c.ignoreFuncs[f] {
			return true
		}
	}
	return false
}

// Find returns an error listing the goroutines still running after about
// Timeout, or nil when none is left but those the options ignore.
func Find(opts ...Option) error {
	c := &config{ignoreIDs: map[string]bool{}, ignoreFuncs: map[string]bool{}}
	for _, o := range opts {
		o(c)
	}
	deadline := time.Now().Add(Timeout)
	pause := time.Millisecond
	for {
		gs := leaked(c)
		if len(gs) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			stacks := make([]string, len(gs))
			for i, g := range gs {
				stacks[i] = g.stack
			}
			return fmt.Errorf("found %d unexpected goroutines:\n%s", len(gs), strings.Join(stacks, "\n\n"))
		}
		time.Sleep(pause)
		pause = min(2*pause, 100*time.Millisecond)
	}
}

// VerifyNone fails t when Find reports goroutines. Call it at the end of a
// test, or defer it.
func VerifyNone(t testing.TB, opts ...Option) {
	t.Helper()
	if err := Find(opts...); err != nil {
		t.Error(err)
	}
}

// TestingM is what VerifyTestMain runs: a *testing.M, or a wrapper around
// one that does set-up and tear-down around its Run.
type TestingM interface{ Run() int }

// VerifyTestMain runs the tests and fails the run, when they passed, if
// goroutines started by them are still running (when a test failed, it
// prints what it found: Report). Goroutines that ran before
// the tests are ignored. Call it from TestMain; it does not return.
func VerifyTestMain(m TestingM, opts ...Option) {
	before := IgnoreCurrent()
	code := m.Run()
	if err := Find(append(opts, before)...); err != nil {
		Report(err, &code)
	}
	os.Exit(code)
}

// Report prints a leak check's finding err: when the tests passed (*code
// 0), it fails the run (*code = 1); when a test failed, what it left
// running may be its own (a test cut short by t.Fatal), so the finding is
// printed but not judged (internal/retest then runs the failed tests
// again alone, with their own leak check).
func Report(err error, code *int) {
	if *code == 0 {
		fmt.Fprintln(os.Stderr, "leakcheck:", err)
		*code = 1
		return
	}
	fmt.Fprintln(os.Stderr, "leakcheck (not judged: a test failed, and what it left running may be its own):", err)
}
