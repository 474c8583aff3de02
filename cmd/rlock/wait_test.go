package main

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/lock"
)

func TestWaitValue(t *testing.T) {
	for _, tc := range []struct {
		in      string
		d       time.Duration
		forever bool
		bad     bool
	}{
		{in: "0", d: 0},
		{in: "5", d: 5 * time.Second},
		{in: "0.5", d: 500 * time.Millisecond},
		{in: "90s", d: 90 * time.Second},
		{in: "2m30s", d: 150 * time.Second},
		{in: "forever", forever: true},
		{in: "-1", d: -time.Second}, // parsed; run rejects it as negative
		{in: "5x", bad: true},
		{in: "inf", bad: true},
		{in: "1e30", bad: true},
		{in: "", bad: true},
	} {
		var w waitValue
		err := w.Set(tc.in)
		switch {
		case tc.bad && err == nil:
			t.Errorf("%q: accepted as %v", tc.in, w.String())
		case !tc.bad && err != nil:
			t.Errorf("%q: %v", tc.in, err)
		case !tc.bad && (w.d != tc.d || w.forever != tc.forever):
			t.Errorf("%q: %v forever=%v, want %v forever=%v", tc.in, w.d, w.forever, tc.d, tc.forever)
		}
	}
}

func TestRunWaitFlockStyle(t *testing.T) {
	srv := newServer(t, integration.Options{})
	c := newClient(t, srv.Addr(), lock.Config{})

	t.Run("bare seconds run out", func(t *testing.T) {
		name := lockName(t)
		h, err := c.Mutex(name).TryLock(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer h.Unlock(context.Background())
		start := time.Now()
		r := runRlock(t, "run", "--addr", srv.Addr(), "--name", name, "--wait", "0.3", "--", "echo", "ran")
		if r.code != exitConflict || r.stdout != "" || !strings.Contains(r.stderr, "(waited 300ms)") {
			t.Fatalf("exit %d, stdout %q; stderr: %s", r.code, r.stdout, r.stderr)
		}
		if d := time.Since(start); d < 300*time.Millisecond {
			t.Fatalf("gave up after %v", d)
		}
	})

	for _, wait := range []string{"5", "forever"} {
		t.Run("--wait "+wait+" acquires on release", func(t *testing.T) {
			name := lockName(t)
			h, err := c.Mutex(name).TryLock(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			s := startRlock(t, "run", "--addr", srv.Addr(), "--name", name, "--wait", wait, "--", "echo", "acquired")
			waitFor(t, "rlock to wait on the unlock channel", func() bool { return subscribers(t, c, name) == 1 })
			if err := h.Unlock(context.Background()); err != nil {
				t.Fatal(err)
			}
			s.expectLine("acquired")
			if r := s.wait(); r.code != 0 || r.stderr != "" {
				t.Fatalf("exit %d; stderr: %s", r.code, r.stderr)
			}
		})
	}

	t.Run("forever, server unreachable at start", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		start := time.Now()
		r := runRlock(t, "run", "--addr", addr, "--name", "x", "--wait", "forever", "--", "echo", "ran")
		if r.code != exitUnavailable || r.stdout != "" {
			t.Fatalf("exit %d, want %d; stdout %q, stderr: %s", r.code, exitUnavailable, r.stdout, r.stderr)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("took %v", d)
		}
	})
}

// TestRunBusyMessage: what rlock says (or not) when the lock stays busy.
func TestRunBusyMessage(t *testing.T) {
	srv := newServer(t, integration.Options{})
	// The holder renews every 200ms: a second look sees its TTL go up.
	c := newClient(t, srv.Addr(), lock.Config{WatchdogTimeout: 600 * time.Millisecond})
	name := lockName(t)
	h, err := c.Mutex(name).TryLock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer h.Unlock(context.Background())
	field := fmt.Sprintf("%s:%d", c.ID(), h.Owner())
	run := func(t *testing.T, flags ...string) result {
		t.Helper()
		args := append([]string{"run", "--addr", srv.Addr(), "--name", name}, flags...)
		return runRlock(t, append(args, "--", "echo", "ran")...)
	}

	t.Run("conflict exit code 0 is silent", func(t *testing.T) {
		r := run(t, "--conflict-exit-code", "0")
		if r.code != 0 || r.stdout != "" || r.stderr != "" {
			t.Fatalf("exit %d, stdout %q, stderr %q; want 0 and nothing", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("conflict exit code 0 with --verbose", func(t *testing.T) {
		r := run(t, "--conflict-exit-code", "0", "--verbose")
		if r.code != 0 || !strings.Contains(r.stderr, "is held by "+field) || !strings.Contains(r.stderr, "skipped") {
			t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
		}
	})
	t.Run("quiet", func(t *testing.T) {
		r := run(t, "--quiet", "--wait", "100ms")
		if r.code != exitConflict || r.stdout != "" || r.stderr != "" {
			t.Fatalf("exit %d, stdout %q, stderr %q; want %d and nothing", r.code, r.stdout, r.stderr, exitConflict)
		}
	})
	t.Run("renewed lease", func(t *testing.T) {
		r := run(t, "--wait", "1.5s")
		if r.code != exitConflict || !strings.Contains(r.stderr, "is held by "+field) ||
			!strings.Contains(r.stderr, "its lease is being renewed") || strings.Contains(r.stderr, "more") {
			t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
		}
	})
	t.Run("lease not renewed", func(t *testing.T) {
		// A lock with a lease of its own, not renewed, watched for more
		// than half its TTL: longer than a watchdog's period could be.
		other := lockName(t)
		ho, err := c.Mutex(other).TryLock(context.Background(), lock.Lease(3*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer ho.Unlock(context.Background())
		r := runRlock(t, "run", "--addr", srv.Addr(), "--name", other, "--wait", "2", "--", "true")
		if r.code != exitConflict || !strings.Contains(r.stderr, "was not renewed in the") || !strings.Contains(r.stderr, "unless renewed or released") {
			t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
		}
	})
	t.Run("no TTL", func(t *testing.T) {
		other := lockName(t)
		rc := c.Redis()
		if err := rc.Do(context.Background(), rc.B().Hset().Key(other).FieldValue().FieldValue("someone:1", "1").Build()).Error(); err != nil {
			t.Fatal(err)
		}
		r := runRlock(t, "run", "--addr", srv.Addr(), "--name", other, "--", "true")
		if r.code != exitConflict || !strings.Contains(r.stderr, "held by someone:1") || !strings.Contains(r.stderr, "no TTL") {
			t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
		}
	})
}

// TestRunVerbose: --verbose says who holds the lock when the wait starts
// and every few seconds, and how long acquiring took.
func TestRunVerbose(t *testing.T) {
	srv := newServer(t, integration.Options{})
	c := newClient(t, srv.Addr(), lock.Config{WatchdogTimeout: 600 * time.Millisecond})
	name := lockName(t)
	h, err := c.Mutex(name).TryLock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	field := fmt.Sprintf("%s:%d", c.ID(), h.Owner())
	s := startRlock(t, "run", "--addr", srv.Addr(), "--name", name, "--wait", "1m", "--verbose", "--", "echo", "acquired")
	waitFor(t, "the first progress line", func() bool {
		return strings.Contains(s.stderr.String(), "waiting for lock")
	})
	waitFor(t, "a progress line after "+progressInterval.String(), func() bool {
		return strings.Contains(s.stderr.String(), "still waiting for lock")
	})
	if err := h.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.expectLine("acquired")
	r := s.wait()
	if r.code != 0 {
		t.Fatalf("exit %d; stderr: %s", r.code, r.stderr)
	}
	for _, want := range []string{
		"rlock: client id ",
		`rlock: waiting for lock "` + name + `": held by ` + field,
		`still waiting for lock "` + name + `" after 5`,
		"its lease is being renewed",
		`rlock: acquired lock "` + name + `" after 5`,
		"(fencing token ",
		"rlock: running echo while holding lock",
		"echo (pid ",
		") exited with status 0",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
}
