package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/lock"
)

// TestRunFlockOptions: flock(1)'s short options with flock's meanings.
// -n and -w make a conflict exit 1, as flock does, unless -E (or
// --conflict-exit-code) says otherwise; -s and -x take the read and write
// halves of the read-write lock; -c runs its argument with sh -c. The
// long options keep rlock's meanings (a busy lock is 75).
func TestRunFlockOptions(t *testing.T) {
	srv := newServer(t, integration.Options{})
	c := newClient(t, srv.Addr(), lock.Config{})
	bg := context.Background()
	run := func(t *testing.T, name string, args ...string) result {
		t.Helper()
		return runRlock(t, append([]string{"run", "--addr", srv.Addr(), "--name", name}, args...)...)
	}

	t.Run("busy", func(t *testing.T) {
		name := lockName(t)
		hold(t, c, name)
		for _, tc := range []struct {
			args []string
			code int
		}{
			{[]string{"-n", "--", "echo", "ran"}, 1},
			{[]string{"-n", "-E", "9", "--", "echo", "ran"}, 9},
			{[]string{"-n", "--conflict-exit-code", "9", "--", "echo", "ran"}, 9},
			{[]string{"-w", "0.2", "--", "echo", "ran"}, 1},
			{[]string{"-w", "0.2", "-E", "0", "--", "echo", "ran"}, 0},
			{[]string{"-E", "3", "--", "echo", "ran"}, 3},
			{[]string{"--", "echo", "ran"}, exitConflict}, // rlock's meaning
			{[]string{"--wait", "0.2", "--", "echo", "ran"}, exitConflict},
			{[]string{"-n", "-c", "echo ran"}, 1},
		} {
			start := time.Now()
			r := run(t, name, tc.args...)
			if r.code != tc.code || r.stdout != "" {
				t.Errorf("%q: exit %d, stdout %q, want exit %d and no output; stderr: %s", tc.args, r.code, r.stdout, tc.code, r.stderr)
			}
			if tc.args[0] == "-w" && time.Since(start) < 200*time.Millisecond {
				t.Errorf("%q: gave up after %v, before -w 0.2", tc.args, time.Since(start))
			}
		}
	})

	t.Run("-c runs sh -c", func(t *testing.T) {
		r := run(t, lockName(t), "-c", `echo "$RLOCK_NAME" | tr a-z A-Z; exit 4`)
		if r.code != 4 || r.stdout != strings.ToUpper(lockName(t))+"\n" {
			t.Fatalf("exit %d, stdout %q; stderr: %s", r.code, r.stdout, r.stderr)
		}
	})

	t.Run("-s and -x", func(t *testing.T) {
		name := lockName(t)
		rd, err := c.ReadWriteMutex(name).ReadLock().TryLock(bg)
		if err != nil {
			t.Fatal(err)
		}
		defer rd.Unlock(bg)
		if r := run(t, name, "-s", "--", "echo", "reading"); r.code != 0 || r.stdout != "reading\n" {
			t.Fatalf("-s beside a reader: exit %d, stdout %q; stderr: %s", r.code, r.stdout, r.stderr)
		}
		if r := run(t, name, "-x", "-n", "--", "echo", "writing"); r.code != 1 {
			t.Fatalf("-x -n beside a reader: exit %d, want 1; stderr: %s", r.code, r.stderr)
		}
		if r := run(t, name, "-e", "-E", "7", "--", "echo", "writing"); r.code != 7 {
			t.Fatalf("-e -E 7 beside a reader: exit %d, want 7; stderr: %s", r.code, r.stderr)
		}
	})

	t.Run("bad usage", func(t *testing.T) {
		for _, args := range [][]string{
			{"-n", "-w", "1", "--", "true"},
			{"-n", "--wait", "1", "--", "true"},
			{"-w", "1", "--wait", "2", "--", "true"},
			{"-E", "1", "--conflict-exit-code", "2", "--", "true"},
			{"-c", "true", "--", "true"},
			{"-c", ""},
			{"-s", "-x", "--", "true"},
			{"-w", "soon", "--", "true"},
		} {
			if r := run(t, lockName(t), args...); r.code != exitUsage || !strings.HasPrefix(r.stderr, "rlock: ") {
				t.Errorf("%q: exit %d, want %d; stderr: %s", args, r.code, exitUsage, r.stderr)
			}
		}
	})

	t.Run("help shows both spellings", func(t *testing.T) {
		r := runRlock(t, "help", "run")
		for _, want := range []string{"-s, --shared", "-x, -e, --exclusive", "-E, --conflict-exit-code", "\n  -n\n", "\n  -w SECS\n", "\n  -c CMD\n", "\n  --addr "} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("help run has no %q", want)
			}
		}
		if strings.Contains(r.stdout, "\n  -addr") {
			t.Errorf("help run spells --addr -addr:\n%s", r.stdout)
		}
	})
}
