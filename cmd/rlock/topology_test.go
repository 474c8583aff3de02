package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/lock"
)

// TestCluster: a cluster node given without --cluster answers MOVED for
// a lock on another node: run and inspect exit 64 and say to add
// --cluster, never 70; with --cluster they lock, and see the lock, on
// the node that owns it.
func TestCluster(t *testing.T) {
	cl := integration.RedisCluster(t, 3, integration.Options{})
	seed := cl.Nodes()[0].Addr()
	name := movedName(t, seed)

	r := runRlock(t, "run", "--addr", seed, "--name", name, "--", "true")
	if r.code != exitUsage || !strings.Contains(r.stderr, "MOVED") || !strings.Contains(r.stderr, "add --cluster") {
		t.Fatalf("run without --cluster: exit %d, want %d with a hint; stderr: %s", r.code, exitUsage, r.stderr)
	}
	r = runRlock(t, "inspect", "--addr", seed, name)
	if r.code != exitUsage || !strings.Contains(r.stderr, "add --cluster") {
		t.Fatalf("inspect without --cluster: exit %d, want %d with a hint; stderr: %s", r.code, exitUsage, r.stderr)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := lock.New(ctx, lock.Config{Cluster: true, Addrs: []string{seed}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	h, err := c.Mutex(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r := runRlock(t, "run", "--cluster", "--addr", seed, "--name", name, "--", "true"); r.code != exitConflict {
		t.Fatalf("run --cluster on a held lock: exit %d, want %d; stderr: %s", r.code, exitConflict, r.stderr)
	}
	r = runRlock(t, "inspect", "--cluster", "--addr", seed, "--json", name)
	var info lockInfo
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &info) != nil {
		t.Fatalf("inspect --cluster: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	if !info.Locked || len(info.Holders) != 1 || info.Holders[0].ClientID != c.ID() {
		t.Fatalf("inspect --cluster: %+v, want held by %s", info, c.ID())
	}
	// It names the node that holds the key, not the seed asked (row 16).
	var nodes []string
	for _, n := range cl.Nodes() {
		nodes = append(nodes, n.Addr(), n.DirectAddr())
	}
	if info.Addr == seed || !slices.Contains(nodes, info.Addr) {
		t.Fatalf("inspect --cluster names %q; want the node owning the key's slot (not the seed %s), one of %v", info.Addr, seed, nodes)
	}
	if err := h.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	r = runRlock(t, "run", "--cluster", "--addr", seed, "--name", name, "--", "sh", "-c", `echo "fence=$RLOCK_FENCE"`)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "fence=") || r.stdout == "fence=\n" {
		t.Fatalf("run --cluster: exit %d, stdout %q; stderr: %s", r.code, r.stdout, r.stderr)
	}

	// --cluster on a server that is not a cluster node is bad usage.
	srv := newServer(t, integration.Options{})
	r = runRlock(t, "run", "--cluster", "--addr", srv.Addr(), "--name", name, "--", "true")
	if r.code != exitUsage || !strings.Contains(r.stderr, "not a cluster node") {
		t.Fatalf("--cluster on a standalone server: exit %d; stderr: %s", r.code, r.stderr)
	}
}

// movedName returns a lock name whose slot another node than seed owns.
func movedName(t *testing.T, seed string) string {
	t.Helper()
	rc := integration.NewClient(t, seed)
	for i := range 100 {
		name := fmt.Sprintf("%s:%d", lockName(t), i)
		err := rc.Do(context.Background(), rc.B().Exists().Key(name).Build()).Error()
		if re, ok := rueidis.IsRedisErr(err); ok {
			if _, moved := re.IsMoved(); moved {
				return name
			}
		}
	}
	t.Fatal("no name of 100 is owned by another node")
	return ""
}

// TestWrongType: a key of another type under the lock's name is exit 65
// for run, as for inspect, named as such, never 70; waiting does not
// change it.
func TestWrongType(t *testing.T) {
	srv := newServer(t, integration.Options{})
	c := newClient(t, srv.Addr(), lock.Config{})
	name := lockName(t)
	rc := c.Redis()
	if err := rc.Do(context.Background(), rc.B().Set().Key(name).Value("not a lock").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	for _, wait := range []string{"0", "30s"} {
		start := time.Now()
		r := runRlock(t, "run", "--addr", srv.Addr(), "--name", name, "--wait", wait, "--", "true")
		if r.code != exitDataErr || !strings.Contains(r.stderr, "WRONGTYPE") || !strings.Contains(r.stderr, "rlock inspect") {
			t.Fatalf("--wait %s: exit %d, want %d; stderr: %s", wait, r.code, exitDataErr, r.stderr)
		}
		if took := time.Since(start); took > 20*time.Second {
			t.Fatalf("--wait %s: took %v: a key that is not a lock is not waited for", wait, took)
		}
	}
	if r := runRlock(t, "inspect", "--addr", srv.Addr(), name); r.code != exitDataErr {
		t.Fatalf("inspect: exit %d, want %d; stderr: %s", r.code, exitDataErr, r.stderr)
	}
}

// TestACLRefusesTheKey: a user whose ACL does not cover the lock's key
// connects, and its acquire is refused (NOPERM): exit 77, not "busy".
func TestACLRefusesTheKey(t *testing.T) {
	srv := newServer(t, integration.Options{})
	rc := newClient(t, srv.Addr(), lock.Config{}).Redis()
	acl := rc.B().Arbitrary("ACL", "SETUSER").Args("limited", "on", ">limited-pw", "~other:*", "&*", "+@all").Build()
	if err := rc.Do(context.Background(), acl).Error(); err != nil {
		t.Fatal(err)
	}
	r := runRlock(t, "run", "--addr", "redis://limited:limited-pw@"+srv.Addr(), "--name", lockName(t), "--", "true")
	if r.code != exitAuth || !strings.Contains(r.stderr, "NOPERM") || strings.Contains(r.stderr, "limited-pw") {
		t.Fatalf("exit %d, want %d; stderr: %s", r.code, exitAuth, r.stderr)
	}
}

// TestReplicaGivenAsTheMaster: --addr names a replica. Its READONLY
// answer is exit 69 (it is also what a failover under way looks like),
// with a message that says the server is a replica, and nothing is left
// in Redis.
func TestReplicaGivenAsTheMaster(t *testing.T) {
	master := newServer(t, integration.Options{})
	host, port, err := net.SplitHostPort(master.DirectAddr())
	if err != nil {
		t.Fatal(err)
	}
	replica := newServer(t, integration.Options{Args: []string{"--replicaof", host, port}})
	name := lockName(t)
	r := runRlock(t, "run", "--addr", replica.Addr(), "--name", name, "--wait", "0", "--", "true")
	if r.code != exitUnavailable || !strings.Contains(r.stderr, "READONLY") || !strings.Contains(r.stderr, "replica") {
		t.Fatalf("exit %d, want %d naming the replica; stderr: %s", r.code, exitUnavailable, r.stderr)
	}
	// inspect says the server is a replica (row 16).
	if r := runRlock(t, "inspect", "--addr", replica.Addr(), name); r.code != 0 || !strings.Contains(r.stdout, "a replica") {
		t.Fatalf("inspect of a replica: exit %d; stdout: %s; stderr: %s", r.code, r.stdout, r.stderr)
	}
	// --wait D rides the READONLY out for D (a failover under way ends
	// within it), as --wait forever does for 10s or the lease; then 69.
	start := time.Now()
	r = runRlock(t, "run", "--addr", replica.Addr(), "--name", name, "--wait", "2", "--", "true")
	if d := time.Since(start); r.code != exitUnavailable || d < 2*time.Second || !strings.Contains(r.stderr, "replica") {
		t.Fatalf("--wait 2: exit %d after %v, want %d after riding READONLY out for 2s; stderr: %s", r.code, d, exitUnavailable, r.stderr)
	}
	c := newClient(t, master.Addr(), lock.Config{})
	rc := c.Redis()
	if n, err := rc.Do(context.Background(), rc.B().Exists().Key(name).Build()).AsInt64(); err != nil || n != 0 {
		t.Fatalf("EXISTS %s on the master = %d, %v: want nothing left", name, n, err)
	}
}

// A replica promoted while rlock run --wait waits for it (a failover that
// ends within the wait) is where the lock is taken: connecting rides out
// New's refusal of a replica as an acquire rides out READONLY (issue 28,
// rows 4 and 26).
func TestRunRidesOutAReplicaUntilPromoted(t *testing.T) {
	master := newServer(t, integration.Options{})
	host, port, err := net.SplitHostPort(master.DirectAddr())
	if err != nil {
		t.Fatal(err)
	}
	replica := newServer(t, integration.Options{Args: []string{"--replicaof", host, port}})
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{replica.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	roles := func() int64 {
		info, err := rc.Do(context.Background(), rc.B().Info().Section("commandstats").Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(info, "\r\n") {
			if rest, ok := strings.CutPrefix(line, "cmdstat_role:calls="); ok {
				n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
				return n
			}
		}
		return 0
	}
	before := roles()
	name := lockName(t)
	s := startRlock(t, "run", "--addr", replica.Addr(), "--name", name, "--wait", "30s", "--", "echo", "acquired")
	// rlock asked the replica's ROLE and was refused: the failover ends.
	for deadline := time.Now().Add(10 * time.Second); roles() < before+2; {
		if time.Now().After(deadline) {
			t.Fatalf("rlock never asked the replica's ROLE twice; stderr: %s", s.stderr)
		}
		time.Sleep(20 * time.Millisecond) // the server has no event for it
	}
	if err := rc.Do(context.Background(), rc.B().Replicaof().No().One().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	s.expectLine("acquired")
	if r := s.wait(); r.code != 0 {
		t.Fatalf("exit %d after the promotion; stderr: %s", r.code, r.stderr)
	}
}
