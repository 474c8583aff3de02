package main

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/lock"
)

// TestRunRedissonConfig: run --redisson-config connects as the file
// says (address, password from a ${VAR}, database) and holds the lock
// with its lockWatchdogTimeout; --watchdog-timeout given overrides it;
// the settings it does not use are listed with --verbose only.
func TestRunRedissonConfig(t *testing.T) {
	const pw = "config-pw"
	srv := newServer(t, integration.Options{Password: pw})
	c := newClient(t, srv.Addr(), lock.Config{Password: pw, DB: 3})
	rc := c.Redis()
	name := lockName(t)
	file := writeFile(t, "redisson.yaml", `singleServerConfig:
  address: "redis://`+srv.Addr()+`"
  password: "${RC_CLI_TEST_PW}"
  database: 3
  retryAttempts: 4
lockWatchdogTimeout: 3000
threads: 16
`)
	env := []string{"RC_CLI_TEST_PW=" + pw}

	r := runRlockEnv(t, env, "run", "--redisson-config", file, "--name", name, "--", "true")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit %d, want 0 and nothing on stderr without --verbose; stderr: %s", r.code, r.stderr)
	}
	r = runRlockEnv(t, env, "run", "--redisson-config", file, "--verbose", "--name", name, "--", "true")
	if r.code != 0 || !strings.Contains(r.stderr, "line 5: singleServerConfig.retryAttempts") || !strings.Contains(r.stderr, "line 7: threads") {
		t.Fatalf("--verbose: exit %d; stderr: %s", r.code, r.stderr)
	}
	if r := runRlockEnv(t, []string{"RC_CLI_TEST_PW=wrong"}, "run", "--redisson-config", file, "--name", name, "--", "true"); r.code != exitAuth {
		t.Fatalf("the file's password wrong: exit %d, want %d; stderr: %s", r.code, exitAuth, r.stderr)
	}
	// A flag given wins over the file.
	if r := runRlockEnv(t, env, "run", "--redisson-config", file, "--password", "wrong", "--name", name, "--", "true"); r.code != exitAuth {
		t.Fatalf("--password over the file: exit %d, want %d; stderr: %s", r.code, exitAuth, r.stderr)
	}

	// The lease of the hold is the file's lockWatchdogTimeout, or
	// --watchdog-timeout when given; the key is in the file's database.
	filePW := writeFile(t, "redisson-pw.yaml", strings.Replace(mustRead(t, file), "${RC_CLI_TEST_PW}", pw, 1))
	for _, tc := range []struct {
		args     []string
		min, max time.Duration
	}{
		{nil, time.Millisecond, 3 * time.Second},
		{[]string{"--watchdog-timeout", "20s"}, 3 * time.Second, 20 * time.Second},
	} {
		args := append([]string{"run", "--redisson-config", filePW, "--name", name}, tc.args...)
		s := startRlock(t, append(args, "--", "sh", "-c", trapTERM)...)
		s.expectLine("started")
		ttl, err := rc.Do(context.Background(), rc.B().Pttl().Key(name).Build()).AsInt64()
		if d := time.Duration(ttl) * time.Millisecond; err != nil || d < tc.min || d > tc.max {
			t.Fatalf("%v: PTTL %v (%v) in database 3, want %v to %v", tc.args, d, err, tc.min, tc.max)
		}
		s.signal(syscall.SIGTERM)
		s.expectLine("got TERM")
		if r := s.wait(); r.code != 7 {
			t.Fatalf("%v: exit %d, want the command's 7; stderr: %s", tc.args, r.code, r.stderr)
		}
	}

	// Values rlock refuses are bad usage, with the line and the reason.
	bad := writeFile(t, "bad.yaml", "singleServerConfig:\n  address: 'redis://"+srv.Addr()+"'\nlockWatchdogTimeout: 10\n")
	r = runRlock(t, "run", "--redisson-config", bad, "--name", name, "--", "true")
	if r.code != exitUsage || !strings.Contains(r.stderr, "line 3: lockWatchdogTimeout") || !strings.Contains(r.stderr, "shorter than 50ms") {
		t.Fatalf("a lease rlock refuses: exit %d; stderr: %s", r.code, r.stderr)
	}
	// inspect reads the same file.
	r = runRlockEnv(t, env, "inspect", "--redisson-config", file, "--verbose", name)
	if r.code != 0 || !strings.Contains(r.stdout, "not locked") || !strings.Contains(r.stderr, "retryAttempts") {
		t.Fatalf("inspect: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
