package main

import (
	"context"
	"strings"
	"testing"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/lock"
)

// TestMessages: the texts newcomer-2's table found rough (issue 28),
// each against a real server.
func TestMessages(t *testing.T) {
	const pw = "msg-pw"
	srv := newServer(t, integration.Options{Password: pw})
	c := newClient(t, srv.Addr(), lock.Config{Password: pw})
	rc := c.Redis()
	ctx := context.Background()
	env := []string{envPassword + "=" + pw}

	t.Run("row 13: NOAUTH says what to do, in run and inspect alike", func(t *testing.T) {
		run := runRlock(t, "run", "--addr", srv.Addr(), "--name", lockName(t), "--", "true")
		insp := runRlock(t, "inspect", "--addr", srv.Addr(), lockName(t))
		for _, r := range []result{run, insp} {
			if r.code != exitAuth || !strings.Contains(r.stderr, "the server needs a password: set $RLOCK_PASSWORD (or --password)") ||
				strings.Contains(r.stderr, "HELLO AUTH") {
				t.Errorf("exit %d; stderr: %s", r.code, r.stderr)
			}
		}
		want := func(s string) string { s, _, _ = strings.Cut(s, ": NOAUTH"); return s }
		if want(run.stderr) != want(insp.stderr) {
			t.Errorf("run and inspect word it differently:\n%s%s", run.stderr, insp.stderr)
		}
	})

	t.Run("row 14: no script SHA or line in errors", func(t *testing.T) {
		name := lockName(t)
		if err := rc.Do(ctx, rc.B().Set().Key(name).Value("x").Build()).Error(); err != nil {
			t.Fatal(err)
		}
		r := runRlockEnv(t, env, "run", "--addr", srv.Addr(), "--name", name, "--", "true")
		if r.code != exitDataErr || !strings.Contains(r.stderr, "WRONGTYPE") || strings.Contains(r.stderr, "@user_script") || strings.Contains(r.stderr, "script: ") {
			t.Errorf("exit %d; stderr: %s", r.code, r.stderr)
		}
	})

	t.Run("row 15: --cluster on a plain server is one line, in flag words", func(t *testing.T) {
		r := runRlockEnv(t, env, "run", "--cluster", "--addr", srv.Addr(), "--name", lockName(t), "--", "true")
		if r.code != exitUsage || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "--cluster given, but") || strings.Contains(r.stderr, "usage:") {
			t.Errorf("exit %d; stderr: %s", r.code, r.stderr)
		}
	})

	t.Run("row 17: inspect checks names as run does, and echoes them clipped", func(t *testing.T) {
		for _, name := range []string{"a\xffb", strings.Repeat("n", 9000)} {
			for _, args := range [][]string{{"inspect", "--addr", srv.Addr(), name}, {"run", "--addr", srv.Addr(), "--name", name, "--", "true"}} {
				r := runRlockEnv(t, env, args...)
				if r.code != exitUsage || len(r.stderr) > 400 || strings.Contains(r.stderr, "waiting:") {
					t.Errorf("%s of a %d-byte name: exit %d, want %d and a short message; stderr (%d bytes): %.400s", args[0], len(name), r.code, exitUsage, len(r.stderr), r.stderr)
				}
			}
		}
	})

	t.Run("row 9: TLS mismatch hints", func(t *testing.T) {
		files := integration.NewTLSFiles(t, "redis.test")
		tlsSrv := newServer(t, integration.Options{TLS: files.Options(false)})
		// A plain client on the TLS port, and TLS on a plain port.
		r := runRlock(t, "run", "--addr", tlsSrv.TLSAddr(), "--name", lockName(t), "--", "true")
		if r.code != exitUnavailable || !strings.Contains(r.stderr, "the server may expect TLS") {
			t.Errorf("plain to TLS: exit %d; stderr: %s", r.code, r.stderr)
		}
		r = runRlockEnv(t, env, "run", "--tls", "--addr", srv.Addr(), "--name", lockName(t), "--", "true")
		if r.code != exitUnavailable || !strings.Contains(r.stderr, "the server may not speak TLS") {
			t.Errorf("TLS to plain: exit %d; stderr: %s", r.code, r.stderr)
		}
		// The CA given, but the certificate names another host: the hint
		// does not ask for the flag given.
		r = runRlock(t, "run", "--tls-ca", files.CAFile, "--addr", "rediss://"+tlsSrv.TLSAddr(), "--name", lockName(t), "--", "true")
		if r.code != exitUnavailable || !strings.Contains(r.stderr, "--tls-server-name") || strings.Contains(r.stderr, "with --tls-ca") {
			t.Errorf("--tls-ca given: exit %d; stderr: %s", r.code, r.stderr)
		}
	})
}
