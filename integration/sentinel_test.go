package integration

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sentinelCtx bounds one sentinel test's waits.
func sentinelCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 25*time.Second)
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
}

// TestSentinelCloseLeavesNothing: Close ends every process and removes
// every directory, and is idempotent.
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
