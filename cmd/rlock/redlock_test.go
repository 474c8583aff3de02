package main

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/lock"
)

// masters starts n redis-servers for one test.
func masters(t *testing.T, n int) []*integration.Server {
	t.Helper()
	return integration.Masters(t, n, integration.Options{})
}

// addrList is --addr for servers.
func addrList(servers []*integration.Server) string {
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = s.Addr()
	}
	return strings.Join(addrs, ",")
}

// masterClients connects a lock.Client to every server.
func masterClients(t *testing.T, servers []*integration.Server) []*lock.Client {
	t.Helper()
	cs := make([]*lock.Client, len(servers))
	for i, s := range servers {
		cs[i] = newClient(t, s.Addr(), lock.Config{})
	}
	return cs
}

// keyCount returns on how many of the masters the key exists.
func keyCount(t *testing.T, cs []*lock.Client, key string) int {
	t.Helper()
	n := 0
	for _, c := range cs {
		if exists(t, c, key) {
			n++
		}
	}
	return n
}

// pause stops servers in parallel (SIGSTOP) and resumes them when the
// test ends, before the Clients made earlier are closed.
func pause(t *testing.T, servers ...*integration.Server) {
	t.Helper()
	each(t, servers, (*integration.Server).Pause)
	t.Cleanup(func() { each(t, servers, (*integration.Server).Resume) })
}

// each runs f on every server in parallel.
func each(t *testing.T, servers []*integration.Server, f func(*integration.Server, context.Context) error) {
	t.Helper()
	errs := make([]error, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Go(func() { errs[i] = f(s, context.Background()) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// fenceOf parses the "fence=N" line the tests' commands print.
func fenceOf(t *testing.T, r result) uint64 {
	t.Helper()
	f, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(r.stdout), "fence="), 10, 64)
	if err != nil || f == 0 {
		t.Fatalf("stdout %q: want fence=N, N > 0 (%v); stderr: %s", r.stdout, err, r.stderr)
	}
	return f
}

const printFence = `echo "fence=$RLOCK_FENCE"`

func TestRunRedLock(t *testing.T) {
	servers := masters(t, 5)
	cs := masterClients(t, servers)
	addrs := addrList(servers)

	for _, tc := range []struct {
		name  string
		flags []string
	}{
		{"RedLock", nil},
		{"MultiLock", []string{"--all"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := lockName(t)
			args := append([]string{"run", "--addr", addrs, "--name", name}, tc.flags...)
			r := runRlock(t, append(args, "--", "sh", "-c", `echo "$RLOCK_NAME"; `+printFence)...)
			if r.code != 0 || r.stderr != "" {
				t.Fatalf("exit %d; stderr: %s", r.code, r.stderr)
			}
			gotName, fence, _ := strings.Cut(r.stdout, "\n")
			if gotName != name {
				t.Fatalf("RLOCK_NAME=%q, want %q", gotName, name)
			}
			first := fenceOf(t, result{stdout: fence})
			// The token is written back to every master: the next
			// acquisition's is greater.
			r = runRlock(t, append(args, "--", "sh", "-c", printFence)...)
			if next := fenceOf(t, r); next <= first {
				t.Fatalf("second RLOCK_FENCE %d, want more than %d", next, first)
			}
			if n := keyCount(t, cs, name); n != 0 {
				t.Fatalf("the lock key remains on %d masters after rlock run exited", n)
			}
		})
	}

	t.Run("held by another on a majority", func(t *testing.T) {
		name := lockName(t)
		for _, c := range cs[:3] {
			h, err := c.Mutex(name).TryLock(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = h.Unlock(context.Background()) })
		}
		r := runRlock(t, "run", "--addr", addrs, "--name", name, "--", "echo", "ran")
		if r.code != exitConflict || r.stdout != "" {
			t.Fatalf("exit %d, stdout %q; stderr: %s", r.code, r.stdout, r.stderr)
		}
		// The round decides once three refused: 0 to 2 had granted.
		if !strings.Contains(r.stderr, " of 5 masters granted, 3 needed") {
			t.Fatalf("stderr %q does not say the quorum was not had", r.stderr)
		}
		if n := keyCount(t, cs[3:], name); n != 0 {
			t.Fatalf("the grants of the failed round remain on %d masters", n)
		}
	})
}

func TestRunRedLockTwoPaused(t *testing.T) {
	servers := masters(t, 5)
	pause(t, servers[:2]...)
	r := runRlock(t, "run", "--addr", addrList(servers), "--name", lockName(t), "--", "sh", "-c", printFence)
	if r.code != 0 {
		t.Fatalf("exit %d; stderr: %s", r.code, r.stderr)
	}
	fenceOf(t, r)
	// Each unreachable master is named, then how the lock goes on.
	for _, s := range servers[:2] {
		if !strings.Contains(r.stderr, "rlock: unreachable, going on without it: connect on "+s.Addr()) {
			t.Errorf("stderr does not name %s as unreachable", s.Addr())
		}
	}
	if !strings.Contains(r.stderr, "RedLock on 3 of 5 masters: 3 of them must grant it") {
		t.Errorf("stderr does not say the quorum kept")
	}
	if t.Failed() {
		t.Logf("stderr: %s", r.stderr)
	}
}

func TestRunRedLockThreePaused(t *testing.T) {
	// Three of five masters stop answering while rlock waits: the quorum
	// cannot be had, and --wait ends the attempt with exit 75.
	servers := masters(t, 5)
	cs := masterClients(t, servers)
	name := lockName(t)
	// Held by another owner everywhere: rlock connects, fails its first
	// round and waits on every master's unlock channel.
	helds := make([]*lock.Held, len(cs))
	for i, c := range cs {
		h, err := c.Mutex(name).TryLock(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		helds[i] = h
	}
	s := startRlock(t, "run", "--addr", addrList(servers), "--name", name, "--wait", "500ms",
		"--watchdog-timeout", "400ms", "--", "echo", "ran")
	waitFor(t, "rlock to wait on every master's unlock channel", func() bool {
		for _, c := range cs {
			if subscribers(t, c, name) != 1 {
				return false
			}
		}
		return true
	})
	pause(t, servers[2:]...)
	// Released on the two masters left: their messages wake rlock, which
	// gets those two and no answer from the three others.
	for _, h := range helds[:2] {
		if err := h.Unlock(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	r := s.wait()
	if r.code != exitConflict || r.stdout != "" {
		t.Fatalf("exit %d, stdout %q, want %d; stderr: %s", r.code, r.stdout, exitConflict, r.stderr)
	}
	for _, want := range []string{"quorum not reached: 2 of 5 masters granted, 3 needed", "(waited 500ms)"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q", want)
		}
	}
	for _, srv := range servers[2:] {
		if !strings.Contains(r.stderr, "acquire on "+srv.Addr()) {
			t.Errorf("stderr does not name the paused master %s", srv.Addr())
		}
	}
	if t.Failed() {
		t.Logf("stderr: %s", r.stderr)
	}
}

func TestRunMastersKilled(t *testing.T) {
	servers := masters(t, 5)
	addrs := addrList(servers)
	each(t, servers[4:], (*integration.Server).Kill)

	for _, tc := range []struct {
		name   string
		flags  []string
		code   int
		stderr string
	}{
		{"RedLock goes on without one", nil, 0, "RedLock on 4 of 5 masters: 3 of them must grant it"},
		{"MultiLock needs every master", []string{"--all"}, exitUnavailable, "MultiLock on 5 masters needs 5 of them reachable, 4 are"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"run", "--addr", addrs, "--name", lockName(t)}, tc.flags...)
			r := runRlock(t, append(args, "--", "echo", "ran")...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.stderr) {
				t.Fatalf("exit %d, want %d; stderr %q, want %q", r.code, tc.code, r.stderr, tc.stderr)
			}
			if ran := r.stdout == "ran\n"; ran != (tc.code == 0) {
				t.Fatalf("stdout %q", r.stdout)
			}
			if !strings.Contains(r.stderr, servers[4].Addr()) {
				t.Fatalf("stderr %q does not name the killed master", r.stderr)
			}
		})
	}

	t.Run("RedLock without a majority", func(t *testing.T) {
		each(t, servers[2:4], (*integration.Server).Kill)
		r := runRlock(t, "run", "--addr", addrs, "--name", lockName(t), "--", "echo", "ran")
		want := "RedLock on 5 masters needs 3 of them reachable, 2 are"
		if r.code != exitUnavailable || r.stdout != "" || !strings.Contains(r.stderr, want) {
			t.Fatalf("exit %d, want %d; stdout %q; stderr %q, want %q", r.code, exitUnavailable, r.stdout, r.stderr, want)
		}
	})
}

func TestRunRedLockLost(t *testing.T) {
	servers := masters(t, 5)
	cs := masterClients(t, servers)
	addrs := addrList(servers)

	t.Run("quorum lost", func(t *testing.T) {
		name := lockName(t)
		s := startRlock(t, "run", "--addr", addrs, "--name", name, "--watchdog-timeout", "300ms",
			"--", "sh", "-c", trapTERM)
		s.expectLine("started")
		// rlock's round returned once three masters granted; the others'
		// grants come later and join the hold. Wait until every master
		// has it, so that no late grant re-creates a key deleted below
		// (rlock is another process: its hold is seen in Redis).
		waitFor(t, "the lock on every master", func() bool { return keyCount(t, cs, name) == len(cs) })
		// Gone from three masters: each one's watchdog finds it at its
		// next renewal, and two of five are no majority.
		for _, c := range cs[:3] {
			rc := c.Redis()
			if n, err := rc.Do(context.Background(), rc.B().Del().Key(name).Build()).AsInt64(); err != nil || n != 1 {
				t.Fatalf("DEL on %s: %v, %v", c.Addr(), n, err)
			}
		}
		s.expectLine("got TERM")
		r := s.wait()
		if r.code != exitLost {
			t.Fatalf("exit %d, want %d; stderr: %s", r.code, exitLost, r.stderr)
		}
		for _, want := range []string{"RedLock held on 2 of 5 masters, 3 needed", "stopping sh: SIGTERM now"} {
			if !strings.Contains(r.stderr, want) {
				t.Fatalf("stderr %q lacks %q", r.stderr, want)
			}
		}
		if n := keyCount(t, cs, name); n != 0 {
			t.Fatalf("the lock key remains on %d masters after rlock run exited", n)
		}
	})

	t.Run("validity of the lease ran out", func(t *testing.T) {
		s := startRlock(t, "run", "--addr", addrs, "--name", lockName(t), "--lease", "300ms",
			"--", "sh", "-c", trapTERM)
		s.expectLine("started")
		s.expectLine("got TERM")
		r := s.wait()
		if r.code != exitLost || !strings.Contains(r.stderr, "its validity (--lease 300ms less the acquisition time and clock drift) ran out") {
			t.Fatalf("exit %d, want %d; stderr: %s", r.code, exitLost, r.stderr)
		}
	})
}
