package main

import (
	"strings"
	"testing"

	"github.com/rlock-go/rlock/integration"
)

// TestRunRedissonConfigProblems: what rlock says of a Redisson config it
// cannot use. An unset ${VAR} is an error naming its line, never sent as
// the password; the library's text is kept whole ("not supported by
// rlock: use ..."), only a leading "rlock: " is dropped; several problems
// are one line each.
func TestRunRedissonConfigProblems(t *testing.T) {
	const pw = "config-pw"
	srv := newServer(t, integration.Options{Password: pw})

	t.Run("unset variable", func(t *testing.T) {
		file := writeFile(t, "env.yaml", "singleServerConfig:\n  address: \"redis://"+srv.Addr()+"\"\n  password: \"${RC_CLI_TEST_UNSET_PW}\"\n")
		r := runRlock(t, "run", "--redisson-config", file, "--name", lockName(t), "--", "echo", "ran")
		if r.code != exitUsage || r.stdout != "" || !strings.Contains(r.stderr, "line 3") || !strings.Contains(r.stderr, "RC_CLI_TEST_UNSET_PW is not set") || strings.Contains(r.stderr, "WRONGPASS") {
			t.Fatalf("exit %d, want %d naming line 3 and the variable; stdout %q; stderr: %s", r.code, exitUsage, r.stdout, r.stderr)
		}
	})

	t.Run("library text kept", func(t *testing.T) {
		file := writeFile(t, "repl.yaml", "replicatedServersConfig:\n  nodeAddresses: [\"redis://"+srv.Addr()+"\"]\n")
		r := runRlock(t, "run", "--redisson-config", file, "--name", lockName(t), "--", "true")
		if r.code != exitUsage || !strings.Contains(r.stderr, "not supported by rlock: use") || !strings.HasPrefix(r.stderr, "rlock: ") || strings.Contains(r.stderr, "rlock: rlock: ") {
			t.Fatalf("exit %d; stderr: %s", r.code, r.stderr)
		}
	})

	t.Run("warnings that differ from Redisson first", func(t *testing.T) {
		file := writeFile(t, "warn.yaml", "threads: 16\nsingleServerConfig:\n  address: \"redis://:"+pw+"@"+srv.Addr()+"\"\n  readMode: SLAVE\n")
		r := runRlock(t, "run", "--verbose", "--redisson-config", file, "--name", lockName(t), "--", "true")
		d, u := strings.Index(r.stderr, "readMode: differs from Redisson"), strings.Index(r.stderr, "threads")
		if r.code != 0 || d < 0 || u < 0 || d > u {
			t.Fatalf("exit %d; want readMode's warning, marked, before threads'; stderr: %s", r.code, r.stderr)
		}
	})

	t.Run("one line per problem", func(t *testing.T) {
		file := writeFile(t, "two.yaml", "singleServerConfig:\n  address: \"redis://"+srv.Addr()+"\"\n  timeout: 7000\nlockWatchdogTimeout: 10000\nslavesSyncTimeout: 0\n")
		r := runRlock(t, "run", "--redisson-config", file, "--name", lockName(t), "--", "true")
		lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
		var l3, l5 int
		for i, l := range lines {
			switch {
			case strings.Contains(l, "line 3: "):
				l3 = i
			case strings.Contains(l, "line 5: "):
				l5 = i
			}
		}
		if r.code != exitUsage || l3 == 0 || l5 != l3+1 || strings.Contains(r.stderr, "3.333333333s") {
			t.Fatalf("exit %d, want %d with lines 3 and 5 on lines of their own, durations rounded; stderr:\n%s", r.code, exitUsage, r.stderr)
		}
	})
}
