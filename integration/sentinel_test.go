package integration

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rlock-go/rlock/integration/internal/backendkit"
)

// sentinelCtx bounds one sentinel test's waits.
func sentinelCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestSentinelFailover: SENTINEL FAILOVER promotes a replica, which has
// the data written before it; the sentinels then demote the old master,
// which WaitHealthy waits for.
func TestSentinelFailover(t *testing.T) {
	g := RedisSentinel(t, SentinelOptions{Password: "pw", SentinelPassword: "spw"})
	ctx := sentinelCtx(t)
	if len(g.Servers()) != 3 || len(g.SentinelAddrs()) != 3 || g.MasterSet() != DefaultMasterSet {
		t.Fatalf("%d servers, %d sentinels, master set %q", len(g.Servers()), len(g.SentinelAddrs()), g.MasterSet())
	}
	old, err := g.Master(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if old != g.Servers()[0] {
		t.Fatalf("master %s, want the first server %s", old.DirectAddr(), g.Servers()[0].DirectAddr())
	}
	if _, err := command(ctx, old.DirectAddr(), "pw", "SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	// The write reaches both replicas before the failover.
	if n, err := command(ctx, old.DirectAddr(), "pw", "WAIT", "2", "5000"); err != nil || n != "2" {
		t.Fatalf("WAIT: %q, %v", n, err)
	}
	m, err := g.Failover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m == old {
		t.Fatal("Failover returned the old master")
	}
	if got, err := command(ctx, m.DirectAddr(), "pw", "GET", "k"); err != nil || got != "v" {
		t.Fatalf("GET on the new master: %q, %v", got, err)
	}
	if now, err := g.Master(ctx); err != nil || now != m {
		t.Fatalf("Master after Failover: %v, %v; want %s", now, err, m.DirectAddr())
	}
	if h, err := g.WaitHealthy(ctx); err != nil || h != m {
		t.Fatalf("WaitHealthy after Failover: %v, %v; want %s", h, err, m.DirectAddr())
	}
	if role, err := g.role(ctx, old); err != nil || role != "slave" {
		t.Fatalf("old master's role %q, %v; want slave", role, err)
	}
	// The sentinels' own password is enforced.
	if _, err := command(ctx, g.SentinelAddrs()[0], "", "SENTINEL", "MASTERS"); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Fatalf("SENTINEL MASTERS without the sentinel password: %v, want NOAUTH", err)
	}
}

// TestSentinelKill: a killed master is failed over by the sentinels on
// their own, and rejoins as a replica once restarted.
func TestSentinelKill(t *testing.T) {
	g := RedisSentinel(t, SentinelOptions{})
	ctx := sentinelCtx(t)
	killed, err := g.KillMaster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m, err := g.WaitNewMaster(ctx, killed)
	if err != nil {
		t.Fatal(err)
	}
	if m == killed {
		t.Fatal("the killed master is still the master")
	}
	if err := killed.Restart(ctx, RestartOptions{}); err != nil {
		t.Fatal(err)
	}
	if h, err := g.WaitHealthy(ctx); err != nil || h != m {
		t.Fatalf("after the restart: master %v, %v; want %s", h, err, m.DirectAddr())
	}
	if role, err := g.role(ctx, killed); err != nil || role != "slave" {
		t.Fatalf("restarted old master's role %q, %v; want slave", role, err)
	}
}

// TestSentinelPause: a paused master is failed over by the sentinels on
// their own.
func TestSentinelPause(t *testing.T) {
	g := RedisSentinel(t, SentinelOptions{})
	ctx := sentinelCtx(t)
	first := g.Servers()[0]
	paused, err := g.PauseMaster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if paused != first {
		t.Fatalf("paused %s, want the master %s", paused.DirectAddr(), first.DirectAddr())
	}
	if paused.up() {
		t.Fatal("the paused master counts as up")
	}
	m, err := g.WaitNewMaster(ctx, paused)
	if err != nil {
		t.Fatal(err)
	}
	if m == paused {
		t.Fatal("the paused master is still the master")
	}
	if err := paused.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	// Without Proxied there is nothing to partition.
	if _, err := g.PartitionMaster(ctx); !errors.Is(err, ErrNoProxy) {
		t.Fatalf("PartitionMaster without Proxied: %v, want ErrNoProxy", err)
	}
}

// TestSentinelPartition: with Proxied, the sentinels and the replicas
// reach the servers through their proxies only, so a partition of the
// master's proxy makes the sentinels promote a replica, while the old
// master runs on as a master on its DirectAddr (the minority side), cut
// off from its replicas: a write made there reaches nobody. After Heal,
// Rejoin makes it a replica of the new master, whose data replaces its
// own.
func TestSentinelPartition(t *testing.T) {
	g := RedisSentinel(t, SentinelOptions{Proxied: true, Password: "pw"})
	ctx := sentinelCtx(t)
	old, err := g.Master(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range g.Servers() {
		if s.Addr() == s.DirectAddr() {
			t.Fatalf("server %s has no proxy", s.DirectAddr())
		}
	}
	// The replicas replicate the master's proxy (StartSentinel's
	// WaitHealthy checked that), and announce their own.
	if err := g.checkReplication(ctx, old); err != nil {
		t.Fatal(err)
	}
	if p, err := g.PartitionMaster(ctx); err != nil || p != old {
		t.Fatalf("PartitionMaster: %v, %v; want %s", p, err, old.Addr())
	}
	if _, err := command(ctx, old.DirectAddr(), "pw", "SET", "minority", "1"); err != nil {
		t.Fatalf("a write on the partitioned master's DirectAddr: %v", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = command(pctx, old.Addr(), "pw", "PING")
	cancel()
	if err == nil {
		t.Fatal("PING through the partitioned master's proxy answered")
	}
	m, err := g.WaitNewMaster(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	if role, err := g.role(ctx, old); err != nil || role != "master" {
		t.Fatalf("partitioned old master's role %q, %v; want master", role, err)
	}
	if v, err := query(ctx, old.DirectAddr(), "pw", "INFO", "replication"); err != nil || infoFields(v.(string))["connected_slaves"] != "0" {
		t.Fatalf("partitioned old master's replicas: %v, %v; want none connected", v, err)
	}
	if v, err := query(ctx, m.DirectAddr(), "pw", "GET", "minority"); err != nil || v != nil {
		t.Fatalf("the minority's write on the new master: %v, %v; want none", v, err)
	}
	if err := old.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	if h, err := g.Rejoin(ctx, old); err != nil || h != m {
		t.Fatalf("Rejoin: %v, %v; want %s", h, err, m.Addr())
	}
	if role, err := g.role(ctx, old); err != nil || role != "slave" {
		t.Fatalf("rejoined old master's role %q, %v; want slave", role, err)
	}
	if v, err := query(ctx, old.DirectAddr(), "pw", "GET", "minority"); err != nil || v != nil {
		t.Fatalf("the minority's write on the rejoined old master: %v, %v; want none", v, err)
	}
}

// TestSentinelCloseLeavesNothing: Close ends every process and removes
// every directory, and is idempotent. The sentinels' directories are in
// RAM where the machine has it (their fsyncs then wait for no disk).
func TestSentinelCloseLeavesNothing(t *testing.T) {
	g, err := StartSentinel(sentinelCtx(t), SentinelOptions{Replicas: 1, Sentinels: 1})
	if err != nil {
		skipOrFail(t, err)
	}
	var pids []int
	var dirs []string
	for _, s := range append(g.Servers(), g.Sentinels()...) {
		p := s.b.(*process)
		pids = append(pids, p.cmd.Process.Pid)
		dirs = append(dirs, p.root)
	}
	for _, s := range g.Sentinels() {
		if ram, root := backendkit.RAMDir(), s.b.(*process).root; ram != "" && filepath.Dir(root) != ram {
			t.Errorf("sentinel directory %s, want one in %s", root, ram)
		}
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	for _, pid := range pids {
		// Reaped by the wait goroutine: no /proc entry, not even a zombie.
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
			t.Errorf("process %d still exists", pid)
		}
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("directory %s still exists", d)
		}
	}
}

// TestSentinelOptionsRefused: options that cannot make a deployment are
// refused before anything starts.
func TestSentinelOptionsRefused(t *testing.T) {
	for _, o := range []SentinelOptions{
		{Replicas: -1},
		{Sentinels: 2, Quorum: 3},
		{MasterSet: "my master"},
	} {
		if g, err := StartSentinel(t.Context(), o); err == nil {
			_ = g.Close()
			t.Errorf("StartSentinel(%+v) succeeded", o)
		}
	}
}
