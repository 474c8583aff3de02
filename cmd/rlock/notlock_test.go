package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rlock-go/rlock/integration"
	rs "github.com/rlock-go/rlock/internal/redissonstandin"
	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/reentrant"
)

// TestNotALock: a hash that is not a lock (an application's record, "HSET
// user:1 name bob age 3") is told from every key a lock kind writes.
// inspect and run say "not a lock" and exit 65, with no advice to delete
// it; every key the Redisson stand-in's scripts (a Java service) and
// rlock's fenced lock write is a lock's, and inspect exits 0 on it.
func TestNotALock(t *testing.T) {
	srv := newServer(t, integration.Options{})
	c := newClient(t, srv.Addr(), lock.Config{})
	rc := c.Redis()
	ctx := context.Background()
	java := rs.New(rc, rs.Options{})
	other := rs.New(rc, rs.Options{})
	do := func(cmd ...string) {
		t.Helper()
		if err := rc.Do(ctx, rc.B().Arbitrary(cmd[0]).Args(cmd[1:]...).Build()).Error(); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
	}
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	const lease = time.Minute

	t.Run("lock kinds' keys", func(t *testing.T) {
		base := lockName(t)
		var keys []string
		// RLock.
		n := base + ":lock"
		must(java.Lock(n).TryAcquire(ctx, 1, lease))
		keys = append(keys, n)
		// An unlock's latch (Redisson 3.52 and 4.7 leave it for seconds).
		n = base + ":latch"
		must(java.Lock(n).TryAcquire(ctx, 1, lease))
		req := rs.NewRequestID()
		must(java.Lock(n).UnlockInner(ctx, 1, req))
		keys = append(keys, rs.LatchName(n, req))
		// Spin lock.
		n = base + ":spin"
		must(java.SpinLock(n).TryAcquire(ctx, 1, lease))
		keys = append(keys, n)
		// Read lock: its hash and the hold's timeout key.
		n = base + ":read"
		must(java.ReadLock(n).TryAcquire(ctx, 1, lease))
		must(other.ReadLock(n).TryAcquire(ctx, 2, lease))
		keys = append(keys, n, rs.ReadTimeoutKey(n, java.Field(1), 1))
		// Write lock.
		n = base + ":write"
		must(java.WriteLock(n).TryAcquire(ctx, 1, lease))
		keys = append(keys, n)
		// Fair lock with a waiter: its hash, queue and timeouts.
		n = base + ":fair"
		must(java.FairLock(n).TryAcquire(ctx, 1, lease, 0))
		must(other.FairLock(n).TryAcquire(ctx, 2, lease, 0))
		keys = append(keys, n, rs.FairQueueName(n), rs.FairTimeoutName(n))
		// The fenced lock's token counter.
		n = base + ":fenced"
		h, err := c.Mutex(n).TryLock(ctx, lock.Fenced())
		if err != nil {
			t.Fatal(err)
		}
		defer h.Unlock(ctx)
		keys = append(keys, reentrant.TokenName(n))

		for _, k := range keys {
			r := runRlock(t, "inspect", "--addr", srv.Addr(), "--json", k)
			var info map[string]any
			if err := json.Unmarshal([]byte(r.stdout), &info); err != nil {
				t.Fatalf("%s: %v in %q (exit %d, stderr %s)", k, err, r.stdout, r.code, r.stderr)
			}
			if r.code != 0 || info["not_lock"] != nil {
				t.Errorf("%s: exit %d, not_lock %v: a lock's key taken for something else:\n%s", k, r.code, info["not_lock"], r.stdout)
			}
			if info["type"] != "hash" && info["part_of"] == nil {
				t.Errorf("%s: a %v, and inspect does not say which lock it is part of:\n%s", k, info["type"], r.stdout)
			}
		}
	})

	for _, tc := range []struct {
		name   string
		fields []string
	}{
		{"a record", []string{"name", "bob", "age", "3"}},
		{"lock-like fields, text values", []string{"a:1", "bob"}},
		{"a mode that is not read or write", []string{"mode", "both", "1b4e28ba-2fa1-41d2-883f-0016d3cca427:1", "1"}},
		{"a mode and a record", []string{"mode", "read", "name", "bob"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := lockName(t)
			do(append([]string{"HSET", name}, tc.fields...)...)
			r := runRlock(t, "inspect", "--addr", srv.Addr(), name)
			if r.code != exitDataErr || !strings.Contains(r.stdout, "not a lock") || strings.Contains(r.stdout, "DEL") || strings.Contains(r.stdout, "hold count") {
				t.Errorf("inspect: exit %d, want %d, \"not a lock\", no holder, no DEL:\n%s%s", r.code, exitDataErr, r.stdout, r.stderr)
			}
			for _, wait := range []string{"0", "30s", "forever"} {
				start := time.Now()
				r := runRlock(t, "run", "--addr", srv.Addr(), "--name", name, "--wait", wait, "--", "echo", "ran")
				if r.code != exitDataErr || r.stdout != "" || !strings.Contains(r.stderr, "not a lock") || strings.Contains(r.stderr, "held by") || strings.Contains(r.stderr, "DEL") {
					t.Errorf("run --wait %s: exit %d, want %d, \"not a lock\", no holder, no DEL; stdout %q, stderr: %s", wait, r.code, exitDataErr, r.stdout, r.stderr)
				}
				if d := time.Since(start); d > 15*time.Second {
					t.Errorf("run --wait %s: took %v to say so", wait, d)
				}
			}
		})
	}
}
