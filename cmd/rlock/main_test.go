package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/reentrant"
	"go.uber.org/goleak"
)

// rlockBin is the rlock binary under test, built once by TestMain (with
// the race detector when the tests run with it).
var rlockBin string

// binDir holds the binaries the tests build.
var binDir string

// otlpBin returns rlock built with -tags otlp (the OTLP/HTTP exporter),
// built once, by the first test that asks.
var otlpBin = sync.OnceValues(func() (string, error) {
	bin := filepath.Join(binDir, "rlock-otlp")
	args := []string{"build", "-tags", "otlp", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build -tags otlp: %v\n%s", err, out)
	}
	return bin, nil
})

// runTimeout bounds every rlock the tests start: a hang fails the test
// instead of the whole run.
const runTimeout = 60 * time.Second

func TestMain(m *testing.M) {
	if sig := os.Getenv(envCountSignal); sig != "" {
		os.Exit(countSignals(sig))
	}
	dir, err := os.MkdirTemp("", "rlock-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	binDir = dir
	rlockBin = filepath.Join(dir, "rlock")
	args := []string{"build", "-o", rlockBin}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, ".")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building rlock:", err)
		os.RemoveAll(dir)
		os.Exit(2)
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		os.RemoveAll(dir)
		os.Exit(code)
	}))
}

// envCountSignal makes the test binary the command countSignals instead
// of running tests: "INT" or "TERM".
const envCountSignal = "RLOCK_TEST_COUNT_SIGNAL"

// countSignals prints "started", waits up to 10s for a first SIGINT or
// SIGTERM (as sig says), gives a second one a second to come, and prints
// "SIGINTs: N" (N is 0 when none came). Unlike a shell's trap, which runs once for signals that
// came together, it counts every delivery the kernel makes.
func countSignals(sig string) int {
	s := syscall.SIGINT
	if sig == "TERM" {
		s = syscall.SIGTERM
	}
	c := make(chan os.Signal, 16)
	signal.Notify(c, s)
	fmt.Printf("started (pid %d)\n", os.Getpid())
	n := 0
	select {
	case <-c:
		n = 1
	case <-time.After(10 * time.Second):
		// None came: say so, rather than hang until the test's timeout.
		fmt.Printf("SIG%ss: 0\n", sig)
		return 0
	}
	t := time.After(time.Second)
	for {
		select {
		case <-c:
			n++
			continue
		case <-t:
		}
		break
	}
	fmt.Printf("SIG%ss: %d\n", sig, n)
	return 0
}

// countSignalsCmd is the command line of countSignals, and the variable
// that makes the test binary run it.
func countSignalsCmd(t *testing.T, sig string) (argv []string, env string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return []string{exe}, envCountSignal + "=" + sig
}

// result is how an rlock run ended.
type result struct {
	code   int
	stdout string
	stderr string
}

// rlockCmd returns the rlock command with args, its environment cleared
// of RLOCK_* variables (plus env), bounded by runTimeout.
func rlockCmd(t *testing.T, env []string, args ...string) *exec.Cmd {
	t.Helper()
	return binCmd(t, rlockBin, env, args...)
}

// binCmd is rlockCmd for the rlock binary bin.
func binCmd(t *testing.T, bin string, env []string, args ...string) *exec.Cmd {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "RLOCK_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if raceEnabled && os.Getenv("GORACE") == "" {
		// The race runtime sleeps 1s at exit by default, to let other
		// goroutines report; rlock has joined them all by then.
		cmd.Env = append(cmd.Env, "GORACE=atexit_sleep_ms=50")
	}
	cmd.Env = append(cmd.Env, env...)
	cmd.WaitDelay = 5 * time.Second
	// Its own process group: were the tests run at a terminal, a signal
	// a test sends to rlock alone must not look like the terminal's
	// (see alreadyDelivered).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// runRlock runs rlock to the end.
func runRlock(t *testing.T, args ...string) result {
	t.Helper()
	return runRlockEnv(t, nil, args...)
}

func runRlockEnv(t *testing.T, env []string, args ...string) result {
	t.Helper()
	return runBinEnv(t, rlockBin, env, args...)
}

// runBinEnv is runRlockEnv for the rlock binary bin.
func runBinEnv(t *testing.T, bin string, env []string, args ...string) result {
	t.Helper()
	cmd := binCmd(t, bin, env, args...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return result{code: exitCode(t, cmd, err), stdout: out.String(), stderr: errb.String()}
}

// exitCode returns the status of a finished rlock, failing the test if it
// could not run or was killed by the timeout.
func exitCode(t *testing.T, cmd *exec.Cmd, err error) int {
	t.Helper()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee) && ee.Exited():
		return ee.ExitCode()
	}
	t.Fatalf("rlock %q: %v", cmd.Args[1:], err)
	return -1
}

// started is an rlock running in the background, its stdout read line
// by line.
type started struct {
	t      *testing.T
	cmd    *exec.Cmd
	lines  *bufio.Scanner
	stderr *lockedBuilder
	done   bool
}

// startRlock starts rlock in the background.
func startRlock(t *testing.T, args ...string) *started {
	t.Helper()
	cmd := rlockCmd(t, nil, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s := &started{t: t, cmd: cmd, lines: bufio.NewScanner(out), stderr: new(lockedBuilder)}
	cmd.Stderr = s.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !s.done {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return s
}

// expectLine reads the next line of stdout and checks it is want. It
// blocks until the line comes (or rlock's stdout closes): this is how the
// tests learn that the command started, without sleeping.
func (s *started) expectLine(want string) {
	s.t.Helper()
	if !s.lines.Scan() {
		s.t.Fatalf("stdout ended (%v) before %q; stderr: %s", s.lines.Err(), want, s.stderr)
	}
	if got := s.lines.Text(); got != want {
		s.t.Fatalf("stdout line %q, want %q; stderr: %s", got, want, s.stderr)
	}
}

// wait reads the rest of stdout and waits for rlock to exit.
func (s *started) wait() result {
	s.t.Helper()
	var rest strings.Builder
	for s.lines.Scan() {
		rest.WriteString(s.lines.Text() + "\n")
	}
	err := s.cmd.Wait()
	s.done = true
	return result{code: exitCode(s.t, s.cmd, err), stdout: rest.String(), stderr: s.stderr.String()}
}

// signal sends sig to rlock.
func (s *started) signal(sig os.Signal) {
	s.t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatal(err)
	}
}

// newServer starts a redis-server for one test.
func newServer(t *testing.T, opts integration.Options) *integration.Server {
	t.Helper()
	return integration.Redis(t, opts)
}

// newClient connects a lock.Client to srv, closed at cleanup.
func newClient(t *testing.T, addr string, cfg lock.Config) *lock.Client {
	t.Helper()
	cfg.Addrs = []string{addr}
	c, err := lock.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
	return c
}

// hold takes the lock name with c (one attempt), released at cleanup.
func hold(t *testing.T, c *lock.Client, name string, opts ...lock.Option) *lock.Held {
	t.Helper()
	h, err := c.Mutex(name).TryLock(context.Background(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Unlock(context.Background()) })
	return h
}

// lockName is a lock name unique to the test.
func lockName(t *testing.T) string {
	return "rlock-cli-test:" + strings.NewReplacer("/", ":", " ", "_").Replace(t.Name())
}

// exists reports whether key exists on c's master.
func exists(t *testing.T, c *lock.Client, key string) bool {
	t.Helper()
	rc := c.Redis()
	n, err := rc.Do(context.Background(), rc.B().Exists().Key(key).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// waitFor polls cond every 10ms until it holds, for at most 10s. It is for
// states that nothing signals to the test (a process subscribing in
// Redis); the tests use it for nothing else.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// subscribers returns PUBSUB NUMSUB of the lock's channel: how many
// connections wait for it.
func subscribers(t *testing.T, c *lock.Client, name string) int64 {
	t.Helper()
	rc := c.Redis()
	vals, err := rc.Do(context.Background(), rc.B().PubsubNumsub().Channel(reentrant.ChannelName(name)).Build()).ToArray()
	if err != nil || len(vals) != 2 {
		t.Fatalf("PUBSUB NUMSUB: %v", err)
	}
	n, err := vals[1].AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestUsageAndHelp(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
		out  string // in stdout
		err  string // in stderr
	}{
		{"no arguments", nil, exitUsage, "", "Commands:"},
		{"unknown command", []string{"frobnicate"}, exitUsage, "", `rlock: unknown command "frobnicate"`},
		{"help", []string{"help"}, exitOK, "Commands:", ""},
		{"--help", []string{"--help"}, exitOK, "Commands:", ""},
		{"help run", []string{"help", "run"}, exitOK, "--conflict-exit-code", ""},
		{"run -h", []string{"run", "-h"}, exitOK, "Exit codes:", ""},
		{"help unknown", []string{"help", "nope"}, exitUsage, "", `rlock: help: unknown command "nope"`},
		{"version", []string{"version"}, exitOK, "rlock ", ""},
		{"--help names version", []string{"--help"}, exitOK, "  version ", ""},
		{"version extra", []string{"version", "x"}, exitUsage, "", "rlock: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runRlock(t, tc.args...)
			if r.code != tc.code {
				t.Fatalf("exit %d, want %d; stderr: %s", r.code, tc.code, r.stderr)
			}
			if !strings.Contains(r.stdout, tc.out) || !strings.Contains(r.stderr, tc.err) {
				t.Fatalf("stdout %q (want %q), stderr %q (want %q)", r.stdout, tc.out, r.stderr, tc.err)
			}
		})
	}
}

// lockedBuilder is a strings.Builder that the command's stderr copier and
// the test may use at once.
type lockedBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuilder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuilder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
