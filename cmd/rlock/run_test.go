package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/lock"
)

// trapTERM is a shell command that prints "started", then waits until
// SIGTERM (or SIGINT) makes it print "got TERM" (or "got INT") and exit
// with status 7 (or 8). Its sleep is killed with it, so that nothing
// outlives the test: it starts before "started", so that $! is set
// whenever a signal can come, and it gets SIGKILL, which also ends it
// between fork and exec (where a SIGTERM would be lost).
const trapTERM = `trap 'echo "got TERM"; kill -KILL $! 2>/dev/null; exit 7' TERM
trap 'echo "got INT"; kill -KILL $! 2>/dev/null; exit 8' INT
sleep 60 &
echo started
wait`

// ignoreTERM prints "started", then ignores SIGTERM (saying so) until
// SIGKILL.
const ignoreTERM = `trap 'echo "ignoring TERM"' TERM
echo started
while :; do sleep 0.05; done`

func TestRunPassesThrough(t *testing.T) {
	srv := newServer(t, integration.Options{})
	c := newClient(t, srv.Addr(), lock.Config{})
	name := lockName(t)
	run := func(t *testing.T, args ...string) result {
		t.Helper()
		return runRlock(t, append([]string{"run", "--addr", srv.Addr(), "--name", name, "--"}, args...)...)
	}

	t.Run("exit status", func(t *testing.T) {
		for _, code := range []int{0, 3, 125} {
			r := run(t, "sh", "-c", fmt.Sprintf("exit %d", code))
			if r.code != code {
				t.Fatalf("exit %d, want %d; stderr: %s", r.code, code, r.stderr)
			}
			if r.stderr != "" {
				t.Fatalf("stderr %q, want none", r.stderr)
			}
		}
	})
	t.Run("stdout and environment", func(t *testing.T) {
		r := run(t, "sh", "-c", `echo "name=$RLOCK_NAME fence=$RLOCK_FENCE"`)
		if r.code != 0 {
			t.Fatalf("exit %d; stderr: %s", r.code, r.stderr)
		}
		var gotName string
		var fence uint64
		if _, err := fmt.Sscanf(r.stdout, "name=%s fence=%d\n", &gotName, &fence); err != nil {
			t.Fatalf("stdout %q: %v", r.stdout, err)
		}
		if gotName != name || fence == 0 {
			t.Fatalf("RLOCK_NAME=%q RLOCK_FENCE=%d, want %q and a token", gotName, fence, name)
		}
		// The next acquisition gets a greater token.
		r = run(t, "sh", "-c", `echo "$RLOCK_FENCE"`)
		if next, err := strconv.ParseUint(strings.TrimSpace(r.stdout), 10, 64); err != nil || next <= fence {
			t.Fatalf("second RLOCK_FENCE %q (%v), want more than %d", r.stdout, err, fence)
		}
	})
	t.Run("stdin", func(t *testing.T) {
		cmd := rlockCmd(t, nil, "run", "--addr", srv.Addr(), "--name", name, "--", "cat")
		cmd.Stdin = strings.NewReader("through the lock\n")
		out, err := cmd.Output()
		if code := exitCode(t, cmd, err); code != 0 || string(out) != "through the lock\n" {
			t.Fatalf("exit %d, stdout %q", code, out)
		}
	})
	t.Run("killed by a signal", func(t *testing.T) {
		r := run(t, "sh", "-c", "kill -KILL $$")
		if want := 128 + int(syscall.SIGKILL); r.code != want {
			t.Fatalf("exit %d, want %d", r.code, want)
		}
	})
	t.Run("command not found", func(t *testing.T) {
		if r := run(t, "rlock-test-no-such-command"); r.code != exitNotFound {
			t.Fatalf("exit %d, want %d; stderr: %s", r.code, exitNotFound, r.stderr)
		}
	})
	t.Run("released after exit", func(t *testing.T) {
		if r := run(t, "true"); r.code != 0 {
			t.Fatalf("exit %d; stderr: %s", r.code, r.stderr)
		}
		if exists(t, c, name) {
			t.Fatal("the lock key remains after rlock run exited")
		}
	})
}

func TestRunConflict(t *testing.T) {
	srv := newServer(t, integration.Options{})
	c := newClient(t, srv.Addr(), lock.Config{})
	name := lockName(t)
	h, err := c.Mutex(name).TryLock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer h.Unlock(context.Background())

	for _, tc := range []struct {
		flags []string
		want  int
	}{
		{nil, exitConflict},
		{[]string{"--conflict-exit-code", "9"}, 9},
		{[]string{"--wait", "100ms"}, exitConflict},
	} {
		t.Run(strings.Join(append([]string{"flags"}, tc.flags...), " "), func(t *testing.T) {
			args := append([]string{"run", "--addr", srv.Addr(), "--name", name}, tc.flags...)
			r := runRlock(t, append(args, "--", "echo", "ran")...)
			if r.code != tc.want {
				t.Fatalf("exit %d, want %d; stderr: %s", r.code, tc.want, r.stderr)
			}
			if r.stdout != "" {
				t.Fatalf("the command ran: %q", r.stdout)
			}
			// The holder is named, and its TTL is not presented as the
			// time left.
			field := c.ID() + ":" + strconv.FormatUint(h.Owner(), 10)
			if !strings.HasPrefix(r.stderr, "rlock: ") || !strings.Contains(r.stderr, "is held by "+field) ||
				strings.Contains(r.stderr, "more") || !strings.Contains(r.stderr, "renew") {
				t.Fatalf("stderr %q", r.stderr)
			}
		})
	}
}

func TestRunWaitsForRelease(t *testing.T) {
	srv := newServer(t, integration.Options{})
	c := newClient(t, srv.Addr(), lock.Config{})
	name := lockName(t)
	h, err := c.Mutex(name).TryLock(context.Background(), lock.Fenced())
	if err != nil {
		t.Fatal(err)
	}
	s := startRlock(t, "run", "--addr", srv.Addr(), "--name", name, "--wait", "30s",
		"--", "sh", "-c", `echo "acquired $RLOCK_FENCE"`)
	// rlock subscribes to the unlock channel once its first attempt
	// failed: then it is waiting.
	waitFor(t, "rlock to wait on the unlock channel", func() bool { return subscribers(t, c, name) == 1 })
	if err := h.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.expectLine(fmt.Sprintf("acquired %d", h.Fence()+1))
	if r := s.wait(); r.code != 0 {
		t.Fatalf("exit %d; stderr: %s", r.code, r.stderr)
	}
	if exists(t, c, name) {
		t.Fatal("the lock key remains after rlock run exited")
	}
}

func TestRunSignals(t *testing.T) {
	srv := newServer(t, integration.Options{})
	c := newClient(t, srv.Addr(), lock.Config{})

	for _, tc := range []struct {
		sig  syscall.Signal
		line string
		code int
	}{
		{syscall.SIGTERM, "got TERM", 7},
		{syscall.SIGINT, "got INT", 8},
	} {
		t.Run("forwards "+signalName(tc.sig), func(t *testing.T) {
			name := lockName(t)
			s := startRlock(t, "run", "--addr", srv.Addr(), "--name", name, "--", "sh", "-c", trapTERM)
			s.expectLine("started")
			s.signal(tc.sig)
			s.expectLine(tc.line)
			if r := s.wait(); r.code != tc.code {
				t.Fatalf("exit %d, want %d; stderr: %s", r.code, tc.code, r.stderr)
			}
			if exists(t, c, name) {
				t.Fatal("the lock key remains after rlock run exited")
			}
		})
	}

	t.Run("SIGINT while waiting", func(t *testing.T) {
		name := lockName(t)
		h, err := c.Mutex(name).TryLock(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer h.Unlock(context.Background())
		s := startRlock(t, "run", "--addr", srv.Addr(), "--name", name, "--wait", "30s", "--", "echo", "ran")
		waitFor(t, "rlock to wait on the unlock channel", func() bool { return subscribers(t, c, name) == 1 })
		s.signal(syscall.SIGINT)
		r := s.wait()
		if want := 128 + int(syscall.SIGINT); r.code != want {
			t.Fatalf("exit %d, want %d; stderr: %s", r.code, want, r.stderr)
		}
		if r.stdout != "" || !strings.Contains(r.stderr, "interrupted by SIGINT") {
			t.Fatalf("stdout %q, stderr %q", r.stdout, r.stderr)
		}
	})

	t.Run("rlock killed", func(t *testing.T) {
		if runtime.GOOS != "linux" {
			t.Skip("the parent death signal is Linux's")
		}
		name := lockName(t)
		s := startRlock(t, "run", "--addr", srv.Addr(), "--name", name, "--", "sh", "-c", trapTERM)
		s.expectLine("started")
		if err := s.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		// The command shares rlock's stdout: it reports the SIGTERM it got
		// when rlock died.
		s.expectLine("got TERM")
		err := s.cmd.Wait()
		s.done = true
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Exited() {
			t.Fatalf("rlock: %v, want killed", err)
		}
	})
}

func TestRunLockLost(t *testing.T) {
	srv := newServer(t, integration.Options{})
	c := newClient(t, srv.Addr(), lock.Config{})
	rc := c.Redis()

	for _, tc := range []struct {
		name  string
		flags []string
		lose  func(t *testing.T, name string)
	}{
		{"ForceUnlock", nil, func(t *testing.T, name string) {
			if ok, err := c.Mutex(name).ForceUnlock(context.Background()); err != nil || !ok {
				t.Fatalf("ForceUnlock: %v, %v", ok, err)
			}
		}},
		{"DEL", nil, func(t *testing.T, name string) {
			if n, err := rc.Do(context.Background(), rc.B().Del().Key(name).Build()).AsInt64(); err != nil || n != 1 {
				t.Fatalf("DEL: %v, %v", n, err)
			}
		}},
		{"lease ran out", []string{"--lease", "300ms"}, func(*testing.T, string) {}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := lockName(t)
			args := append([]string{"run", "--addr", srv.Addr(), "--name", name, "--watchdog-timeout", "300ms"}, tc.flags...)
			s := startRlock(t, append(args, "--", "sh", "-c", trapTERM)...)
			s.expectLine("started")
			tc.lose(t, name)
			s.expectLine("got TERM")
			r := s.wait()
			if r.code != exitLost {
				t.Fatalf("exit %d, want %d; stderr: %s", r.code, exitLost, r.stderr)
			}
			if !strings.Contains(r.stderr, "rlock: lock") || !strings.Contains(r.stderr, "lost") {
				t.Fatalf("stderr %q does not say the lock was lost", r.stderr)
			}
		})
	}

	t.Run("SIGKILL after grace", func(t *testing.T) {
		name := lockName(t)
		s := startRlock(t, "run", "--addr", srv.Addr(), "--name", name,
			"--watchdog-timeout", "300ms", "--grace", "200ms", "--", "sh", "-c", ignoreTERM)
		s.expectLine("started")
		if _, err := c.Mutex(name).ForceUnlock(context.Background()); err != nil {
			t.Fatal(err)
		}
		s.expectLine("ignoring TERM")
		r := s.wait()
		if r.code != exitLost || !strings.Contains(r.stderr, "SIGKILL") {
			t.Fatalf("exit %d, want %d; stderr: %s", r.code, exitLost, r.stderr)
		}
	})
}

func TestRunRedisProblems(t *testing.T) {
	t.Run("unreachable", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close() // a loopback port that refuses connections
		start := time.Now()
		r := runRlock(t, "run", "--addr", addr, "--name", "x", "--", "echo", "ran")
		if r.code != exitUnavailable || r.stdout != "" {
			t.Fatalf("exit %d, want %d; stdout %q, stderr: %s", r.code, exitUnavailable, r.stdout, r.stderr)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("took %v", d)
		}
	})

	t.Run("password", func(t *testing.T) {
		srv := newServer(t, integration.Options{Password: "s3cret"})
		args := []string{"run", "--addr", srv.Addr(), "--name", lockName(t)}
		for _, tc := range []struct {
			name  string
			env   []string
			flags []string
			want  int
		}{
			{"wrong", nil, []string{"--password", "wrong"}, exitAuth},
			{"missing", nil, nil, exitAuth},
			{"flag", nil, []string{"--password", "s3cret"}, 0},
			{"environment", []string{"RLOCK_PASSWORD=s3cret"}, nil, 0},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := runRlockEnv(t, tc.env, append(append(args, tc.flags...), "--", "true")...)
				if r.code != tc.want {
					t.Fatalf("exit %d, want %d; stderr: %s", r.code, tc.want, r.stderr)
				}
			})
		}
	})

	t.Run("partitioned while running", func(t *testing.T) {
		srv := newServer(t, integration.Options{})
		s := startRlock(t, "run", "--addr", srv.Addr(), "--name", lockName(t),
			"--watchdog-timeout", "300ms", "--", "sh", "-c", trapTERM)
		s.expectLine("started")
		if err := srv.Partition(context.Background()); err != nil {
			t.Fatal(err)
		}
		// Renewals fail; the lock counts as lost once its lease must have
		// run out.
		s.expectLine("got TERM")
		if r := s.wait(); r.code != exitLost {
			t.Fatalf("exit %d, want %d; stderr: %s", r.code, exitLost, r.stderr)
		}
	})
}

func TestRunBadUsage(t *testing.T) {
	// None of these reaches Redis: the address is never dialled.
	addr := "127.0.0.1:9"
	for _, tc := range []struct {
		name string
		args []string
		err  string
	}{
		{"no name", []string{"--addr", addr, "--", "true"}, "--name is required"},
		{"empty name", []string{"--addr", addr, "--name", "", "--", "true"}, "--name is required"},
		{"no command", []string{"--addr", addr, "--name", "x"}, "no command"},
		{"no command after --", []string{"--addr", addr, "--name", "x", "--"}, "no command"},
		{"bad duration", []string{"--addr", addr, "--name", "x", "--wait", "5x", "--", "true"}, "want a duration (30s, 2m), seconds (5, 0.5) or \"forever\""},
		{"verbose and quiet", []string{"--addr", addr, "--name", "x", "--verbose", "--quiet", "--", "true"}, "exclude each other"},
		{"negative wait", []string{"--addr", addr, "--name", "x", "--wait", "-1s", "--", "true"}, "negative"},
		{"tiny lease", []string{"--addr", addr, "--name", "x", "--lease", "1ms", "--", "true"}, "--lease"},
		{"tiny watchdog", []string{"--addr", addr, "--name", "x", "--watchdog-timeout", "1ms", "--", "true"}, "--watchdog-timeout"},
		{"conflict code", []string{"--addr", addr, "--name", "x", "--conflict-exit-code", "300", "--", "true"}, "--conflict-exit-code"},
		{"unknown flag", []string{"--addr", addr, "--name", "x", "--bogus", "--", "true"}, "-bogus"},
		{"bad address", []string{"--addr", "localhost", "--name", "x", "--", "true"}, "host:port"},
		{"address twice", []string{"--addr", addr + ",127.0.0.1:10, " + addr, "--name", "x", "--", "true"}, "twice"},
		{"bad --trace", []string{"--addr", addr, "--name", "x", "--trace", "otlp", "--", "true"}, "--trace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runRlock(t, append([]string{"run"}, tc.args...)...)
			if r.code != exitUsage {
				t.Fatalf("exit %d, want %d; stderr: %s", r.code, exitUsage, r.stderr)
			}
			if !strings.HasPrefix(r.stderr, "rlock: ") || !strings.Contains(r.stderr, tc.err) || !strings.Contains(r.stderr, "usage: rlock run") {
				t.Fatalf("stderr %q, want %q and the usage", r.stderr, tc.err)
			}
		})
	}
}

// TestRunSpin: --spin takes Redisson's spin lock. rlock waits by polling
// (its attempts reach the server while it never subscribes), gets the
// lock after a spin holder's release that published nothing, and with
// several masters takes a RedLock of spin locks.
func TestRunSpin(t *testing.T) {
	srv := newServer(t, integration.Options{})
	c := newClient(t, srv.Addr(), lock.Config{})
	name := lockName(t)
	h, err := c.SpinMutex(name, lock.SpinBackoff{}).TryLock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	evals := func() int64 {
		rc := c.Redis()
		info, err := rc.Do(context.Background(), rc.B().Info().Section("commandstats").Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for _, line := range strings.Split(info, "\r\n") {
			if rest, ok := strings.CutPrefix(line, "cmdstat_evalsha:calls="); ok {
				n, _ = strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
			}
		}
		return n
	}
	before := evals()
	s := startRlock(t, "run", "--addr", srv.Addr(), "--name", name, "--spin", "--no-fence", "--wait", "30s",
		"--", "echo", "acquired")
	waitFor(t, "rlock to poll the lock", func() bool { return evals() >= before+5 })
	if n := subscribers(t, c, name); n != 0 {
		t.Fatalf("%d subscribers of the unlock channel while rlock --spin waits, want 0", n)
	}
	if err := h.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.expectLine("acquired")
	if r := s.wait(); r.code != 0 {
		t.Fatalf("exit %d; stderr: %s", r.code, r.stderr)
	}
	if exists(t, c, name) {
		t.Fatal("the lock key remains after rlock run exited")
	}
	// A RedLock of spin locks over three masters: taken and released.
	others := []string{srv.Addr(), newServer(t, integration.Options{}).Addr(), newServer(t, integration.Options{}).Addr()}
	r := runRlock(t, "run", "--addr", strings.Join(others, ","), "--name", name, "--spin", "--no-fence", "--", "echo", "redlock")
	if r.code != 0 || r.stdout != "redlock\n" {
		t.Fatalf("--spin with three masters: exit %d, stdout %q; stderr: %s", r.code, r.stdout, r.stderr)
	}
}

// TestRunFair: --fair takes Redisson's fair lock. Two runs that start
// waiting one after the other queue in Redis in that order and run their
// commands in that order once the holder releases; --fair with --spin is
// a usage error.
func TestRunFair(t *testing.T) {
	srv := newServer(t, integration.Options{})
	c := newClient(t, srv.Addr(), lock.Config{})
	name := lockName(t)
	rc := c.Redis()
	qlen := func() int64 {
		n, err := rc.Do(context.Background(), rc.B().Llen().Key("redisson_lock_queue:{"+name+"}").Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	h, err := c.FairMutex(name).Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "order")
	run := func(who string) *started {
		return startRlock(t, "run", "--addr", srv.Addr(), "--name", name, "--fair", "--wait", "30s",
			"--", "sh", "-c", "echo "+who+" >> "+out)
	}
	first := run("first")
	waitFor(t, "the first run to queue", func() bool { return qlen() == 1 })
	second := run("second")
	waitFor(t, "the second run to queue", func() bool { return qlen() == 2 })
	if err := h.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*started{first, second} {
		if r := s.wait(); r.code != 0 {
			t.Fatalf("exit %d; stderr: %s", r.code, r.stderr)
		}
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "first\nsecond\n" {
		t.Fatalf("commands ran in the order %q, want the queue's", got)
	}
	if exists(t, c, name) || qlen() != 0 {
		t.Fatal("the lock or its queue remains after both runs exited")
	}
	if r := runRlock(t, "run", "--addr", srv.Addr(), "--name", name, "--fair", "--spin", "--", "true"); r.code != exitUsage {
		t.Fatalf("--fair --spin: exit %d, want the usage error %d; stderr: %s", r.code, exitUsage, r.stderr)
	}
}

// TestRunShared: --shared takes the read lock of the read-write lock NAME
// (flock -s), --exclusive its write lock (flock -x): readers share, a
// writer excludes both, and the two flags exclude each other and --spin.
func TestRunShared(t *testing.T) {
	srv := newServer(t, integration.Options{})
	c := newClient(t, srv.Addr(), lock.Config{})
	name := lockName(t)
	rw := c.ReadWriteMutex(name)
	r, err := rw.ReadLock().TryLock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res := runRlock(t, "run", "--addr", srv.Addr(), "--name", name, "--shared", "--", "echo", "reading"); res.code != 0 || res.stdout != "reading\n" {
		t.Fatalf("--shared beside a reader: exit %d, stdout %q; stderr: %s", res.code, res.stdout, res.stderr)
	}
	if res := runRlock(t, "run", "--addr", srv.Addr(), "--name", name, "--exclusive", "--", "echo", "writing"); res.code != exitConflict {
		t.Fatalf("--exclusive beside a reader: exit %d, want %d; stderr: %s", res.code, exitConflict, res.stderr)
	}
	if err := r.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	w, err := rw.WriteLock().TryLock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res := runRlock(t, "run", "--addr", srv.Addr(), "--name", name, "--shared", "--", "echo", "reading"); res.code != exitConflict {
		t.Fatalf("--shared beside a writer: exit %d, want %d; stderr: %s", res.code, exitConflict, res.stderr)
	}
	if err := w.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	res := runRlock(t, "run", "--addr", srv.Addr(), "--name", name, "--exclusive", "--", "sh", "-c", "echo ${RLOCK_FENCE:-none}")
	if res.code != 0 || res.stdout != "none\n" {
		t.Fatalf("--exclusive alone: exit %d, stdout %q (no fencing token expected); stderr: %s", res.code, res.stdout, res.stderr)
	}
	if exists(t, c, name) {
		t.Fatal("the lock key remains after rlock run exited")
	}
	for _, args := range [][]string{{"--shared", "--exclusive"}, {"--spin", "--shared"}} {
		res := runRlock(t, append([]string{"run", "--addr", srv.Addr(), "--name", name}, append(args, "--", "true")...)...)
		if res.code != exitUsage {
			t.Fatalf("%v: exit %d, want %d (usage)", args, res.code, exitUsage)
		}
	}
}
