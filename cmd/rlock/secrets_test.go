package main

import (
	"context"
	"strings"
	"testing"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/reentrant"
)

// TestRunKeepsSecrets: the password reaches neither the command's
// environment nor any message of rlock's.
func TestRunKeepsSecrets(t *testing.T) {
	const secret = "s3cret-Pa55"
	srv := newServer(t, integration.Options{Password: secret})

	t.Run("environment", func(t *testing.T) {
		r := runRlockEnv(t, []string{"RLOCK_PASSWORD=" + secret, "RLOCK_SENTINEL_PASSWORD=" + secret}, "run", "--addr", srv.Addr(), "--name", lockName(t), "--verbose",
			"--", "sh", "-c", `env; echo "args: $0 $*"`)
		if r.code != 0 {
			t.Fatalf("exit %d; stderr: %s", r.code, r.stderr)
		}
		if strings.Contains(r.stdout, secret) || strings.Contains(r.stdout, "RLOCK_PASSWORD") || strings.Contains(r.stdout, "RLOCK_SENTINEL_PASSWORD") {
			t.Fatalf("the command's environment has the password:\n%s", r.stdout)
		}
		if !strings.Contains(r.stdout, "RLOCK_NAME=") || strings.Contains(r.stderr, secret) {
			t.Fatalf("stdout %s\nstderr %s", r.stdout, r.stderr)
		}
	})
	t.Run("flag", func(t *testing.T) {
		r := runRlock(t, "run", "--addr", srv.Addr(), "--name", lockName(t), "--password", secret, "--verbose",
			"--", "sh", "-c", `env; cat /proc/$$/cmdline`)
		if r.code != 0 || strings.Contains(r.stdout, secret) || strings.Contains(r.stderr, secret) {
			t.Fatalf("exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("wrong password", func(t *testing.T) {
		r := runRlockEnv(t, []string{"RLOCK_PASSWORD=" + secret + "x"}, "run", "--addr", srv.Addr(), "--name", lockName(t), "--verbose", "--", "true")
		if r.code != exitAuth || strings.Contains(r.stderr, secret) {
			t.Fatalf("exit %d; stderr: %s", r.code, r.stderr)
		}
	})
	t.Run("URL with credentials", func(t *testing.T) {
		// Accepted, as Redisson writes it, and kept from the command and
		// from every message.
		addr := "redis://default:" + secret + "@" + srv.Addr()
		r := runRlock(t, "run", "--addr", addr, "--name", lockName(t), "--verbose", "--", "sh", "-c", "env")
		if r.code != 0 || strings.Contains(r.stdout, secret) || strings.Contains(r.stderr, secret) {
			t.Fatalf("exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
		}
		r = runRlockEnv(t, []string{"RLOCK_ADDR=" + addr}, "run", "--name", lockName(t), "--", "sh", "-c", "env")
		if r.code != 0 || strings.Contains(r.stdout, secret) || strings.Contains(r.stdout, "RLOCK_ADDR") || strings.Contains(r.stderr, secret) {
			t.Fatalf("$RLOCK_ADDR: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
		}
		r = runRlock(t, "inspect", "--addr", "redis://"+secret+"@"+srv.Addr(), lockName(t))
		if r.code != 0 || strings.Contains(r.stdout, secret) || strings.Contains(r.stderr, secret) {
			t.Fatalf("inspect: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
		}
		r = runRlock(t, "run", "--addr", "redis://:"+secret+"x@"+srv.Addr(), "--name", lockName(t), "--", "true")
		if r.code != exitAuth || strings.Contains(r.stderr, secret) {
			t.Fatalf("wrong password in the URL: exit %d; stderr: %s", r.code, r.stderr)
		}
	})
	t.Run("address with credentials but no scheme", func(t *testing.T) {
		addr := secret + "@" + srv.Addr()
		for _, cmd := range [][]string{
			{"run", "--addr", addr, "--name", "x", "--", "true"},
			{"inspect", "--addr", addr, "x"},
		} {
			r := runRlock(t, cmd...)
			if r.code != exitUsage || strings.Contains(r.stderr, secret) || !strings.Contains(r.stderr, "xxxxx@") {
				t.Fatalf("%s: exit %d; stderr: %s", cmd[0], r.code, r.stderr)
			}
		}
		r := runRlockEnv(t, []string{"RLOCK_ADDR=" + addr}, "run", "--name", "x", "--", "true")
		if r.code != exitUsage || strings.Contains(r.stderr, secret) {
			t.Fatalf("$RLOCK_ADDR: exit %d; stderr: %s", r.code, r.stderr)
		}
	})
	t.Run("bad URL with credentials", func(t *testing.T) {
		r := runRlock(t, "run", "--addr", "redis://:"+secret+"@"+srv.Addr()+"/x", "--name", "x", "--", "true")
		if r.code != exitUsage || strings.Contains(r.stderr, secret) || !strings.Contains(r.stderr, "xxxxx@") {
			t.Fatalf("exit %d; stderr: %s", r.code, r.stderr)
		}
	})
}

// TestRunNoFence: --no-fence leaves no token key and no RLOCK_FENCE.
func TestRunNoFence(t *testing.T) {
	srv := newServer(t, integration.Options{})
	c := newClient(t, srv.Addr(), lock.Config{})
	name := lockName(t)
	r := runRlockEnv(t, []string{"RLOCK_FENCE=from-outside"}, "run", "--addr", srv.Addr(), "--name", name, "--no-fence", "--verbose",
		"--", "sh", "-c", `echo "fence=${RLOCK_FENCE-unset} name=$RLOCK_NAME"`)
	if r.code != 0 || r.stdout != "fence=unset name="+name+"\n" {
		t.Fatalf("exit %d, stdout %q; stderr: %s", r.code, r.stdout, r.stderr)
	}
	if exists(t, c, reentrant.TokenName(name)) {
		t.Fatal("--no-fence created the token key")
	}
	if strings.Contains(r.stderr, "fencing token") {
		t.Fatalf("stderr %q mentions a token", r.stderr)
	}
	// Without it, the key is made, without TTL: what docs/cli.md says.
	if r := runRlock(t, "run", "--addr", srv.Addr(), "--name", name, "--", "true"); r.code != 0 {
		t.Fatalf("exit %d; stderr: %s", r.code, r.stderr)
	}
	rc := c.Redis()
	ttl, err := rc.Do(context.Background(), rc.B().Ttl().Key(reentrant.TokenName(name)).Build()).AsInt64()
	if err != nil || ttl != -1 {
		t.Fatalf("token key TTL %d (%v), want -1 (none)", ttl, err)
	}
}
