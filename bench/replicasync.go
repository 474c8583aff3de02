package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/redis/rueidis"
)

// Scenario 8: what replica sync (lock.Config.ReplicaSyncTimeout) costs an
// uncontended Lock+Unlock. One master with one replica on loopback, and a
// second master without replicas; rlock only. Rows, interleaved in random
// order per round as in scenario 1:
//
//   - the floor of the master with the replica (two EVALSHA round trips of
//     floorScript, as scenario 1 defines it);
//   - the same with a script that writes one key (writeScript), and the
//     same followed by WAIT 1 on one connection: what any client doing
//     synced writes pays. The WAIT floor's script writes because WAIT
//     waits for the connection's own writes: after a command that wrote
//     nothing, what it waits for depends on the server version and on
//     other clients' writes (redis-server 7.0 stamps every command with
//     the global replication offset; later versions only writes);
//   - rlock with replica sync on (the default: each acquire and each
//     release goes out with a WAIT on one connection), rlock with
//     ReplicaSyncTimeout -1 on the same master, and rlock with defaults on
//     the master without replicas.

// syncWaitTimeout is the floor's WAIT timeout: rlock's default
// ReplicaSyncTimeout (Redisson's slavesSyncTimeout).
const syncWaitTimeout = time.Second

// writeScript is the floor's script made to write: one SET, which the
// master propagates to its replica.
const writeScript = "redis.call('set', KEYS[1], '1') return 1"

// verifyCycles is how many cycles per row are run, after the timed
// rounds, to count the WAITs the row's master ran.
const verifyCycles = 20

type replicaSyncResult struct {
	RTT     summary // PING round trip to the master with the replica
	Samples int     // per row
	Rows    []syncRow
	// WaitCost is rlock's paired p50 with replica sync on minus off (the
	// median over rounds of the difference of block medians);
	// WaitCostFloor is the WAIT floor's minus the writing floor's. Both
	// cover two WAITs.
	WaitCost, WaitCostFloor time.Duration
	// OnVsOff is rlock's paired p50 ratio, sync on to sync off.
	OnVsOff float64
	// OffVsAlone is rlock's paired p50 ratio, sync off on the master with
	// the replica to defaults on the master without.
	OffVsAlone float64
}

// syncRow is one row of the scenario.
type syncRow struct {
	Name   string
	Master string // "with replica" or "no replicas"
	Floor  bool
	Total  summary
	Lock   summary // rlock rows only
	Unlock summary
	CPU    time.Duration // this process's CPU per cycle
	// Paired is the median over rounds of the row's block median to the
	// floor's of the same round; RatioP50 and RatioP99 divide whole-run
	// percentiles.
	Paired, RatioP50, RatioP99 float64
	// Waits is how many WAIT commands the row's master ran per cycle,
	// counted over verifyCycles cycles after the timed rounds.
	Waits float64
	// WantWaits is what the row should send: 2 with sync, else 0.
	WantWaits float64

	blockP50 []time.Duration
}

// Row indexes, in the order the targets are made.
const (
	syncFloor = iota
	syncFloorWrite
	syncFloorWait
	syncOn
	syncOff
	syncAlone
	syncRows
)

func runReplicaSync(ctx context.Context, p params) (*replicaSyncResult, error) {
	master, replica, err := startReplicated(ctx)
	if err != nil {
		return nil, err
	}
	defer master.Close()
	defer replica.Close()
	alone, err := startRedis(ctx)
	if err != nil {
		return nil, err
	}
	defer alone.Close()

	f, err := newFloor(ctx, master.Addr())
	if err != nil {
		return nil, err
	}
	defer f.Close()
	wf, err := newWriteFloor(ctx, master.Addr())
	if err != nil {
		return nil, err
	}
	defer wf.Close()
	floorCycle := func(once func(context.Context, string) error, key string) func(ctx context.Context) (time.Duration, time.Duration, error) {
		return func(ctx context.Context) (time.Duration, time.Duration, error) {
			t := time.Now()
			err := once(ctx, key)
			d := time.Since(t)
			return d / 2, d, err
		}
	}

	type row struct {
		name, master string
		floor        bool
		wantWaits    float64
		admin        string // the address whose WAITs count for the row
	}
	rows := []row{
		syncFloor:      {"floor (2 × EVALSHA)", "with replica", true, 0, master.Addr()},
		syncFloorWrite: {"floor, writing (2 × EVALSHA of a SET)", "with replica", true, 0, master.Addr()},
		syncFloorWait:  {fmt.Sprintf("floor, writing + WAIT (2 × (EVALSHA of a SET, WAIT 1 %d))", syncWaitTimeout.Milliseconds()), "with replica", true, 2, master.Addr()},
		syncOn:         {"rlock, replica sync on (default)", "with replica", false, 2, master.Addr()},
		syncOff:        {"rlock, ReplicaSyncTimeout -1", "with replica", false, 0, master.Addr()},
		syncAlone:      {"rlock, defaults", "no replicas", false, 0, alone.Addr()},
	}
	targets := make([]latencyTarget, syncRows)
	targets[syncFloor] = latencyTarget{name: rows[syncFloor].name, cycle: floorCycle(f.once, "bench:replicasync:floor")}
	targets[syncFloorWrite] = latencyTarget{name: rows[syncFloorWrite].name, cycle: floorCycle(wf.once, "bench:replicasync:floor-write")}
	targets[syncFloorWait] = latencyTarget{name: rows[syncFloorWait].name, cycle: floorCycle(wf.onceSynced, "bench:replicasync:floor-wait")}
	for _, o := range []struct {
		i    int
		addr string
		opts openOpts
	}{
		{syncOn, master.Addr(), openOpts{}},
		{syncOff, master.Addr(), openOpts{replicaSync: -1}},
		{syncAlone, alone.Addr(), openOpts{}},
	} {
		i := o.i
		l, err := libRlock.open(ctx, o.addr, o.opts)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", rows[i].name, err)
		}
		defer l.Close()
		key := fmt.Sprintf("bench:replicasync:rlock-%d", i)
		where := "8. replica sync: " + rows[i].name
		targets[i] = latencyTarget{name: rows[i].name, cycle: func(ctx context.Context) (time.Duration, time.Duration, error) {
			t := time.Now()
			unlock, _, err := lockBounded(ctx, l, key, where)
			if err != nil {
				return 0, 0, err
			}
			ld := time.Since(t)
			err = unlock(ctx)
			return ld, time.Since(t), err
		}}
	}

	accs, err := interleave(ctx, targets, p.latencyWarmup, p.latencyRounds, p.latencyBlock, p.pace)
	if err != nil {
		return nil, err
	}
	rtt, err := pingRTT(ctx, master.Addr(), p.latencyRounds*p.latencyBlock)
	if err != nil {
		return nil, err
	}

	r := &replicaSyncResult{RTT: summarize(rtt), Samples: p.latencyRounds * p.latencyBlock}
	floor := summarize(accs[syncFloor].total)
	for i, rw := range rows {
		a := accs[i]
		sr := syncRow{Name: rw.name, Master: rw.master, Floor: rw.floor, Total: summarize(a.total), CPU: a.perCycle(), WantWaits: rw.wantWaits, blockP50: a.blockP50}
		if !rw.floor {
			unl := make(samples, len(a.total))
			for j := range a.total {
				unl[j] = a.total[j] - a.lock[j]
			}
			sr.Lock, sr.Unlock = summarize(a.lock), summarize(unl)
		}
		sr.RatioP50 = ratio(sr.Total.P50, floor.P50)
		sr.RatioP99 = ratio(sr.Total.P99, floor.P99)
		sr.Paired = pairedRatio(a.blockP50, accs[syncFloor].blockP50)
		if sr.Waits, err = countWaits(ctx, rw.admin, targets[i]); err != nil {
			return nil, fmt.Errorf("%s: counting WAITs: %w", rw.name, err)
		}
		r.Rows = append(r.Rows, sr)
	}
	r.WaitCost = pairedDiff(accs[syncOn].blockP50, accs[syncOff].blockP50)
	r.WaitCostFloor = pairedDiff(accs[syncFloorWait].blockP50, accs[syncFloorWrite].blockP50)
	r.OnVsOff = pairedRatio(accs[syncOn].blockP50, accs[syncOff].blockP50)
	r.OffVsAlone = pairedRatio(accs[syncOff].blockP50, accs[syncAlone].blockP50)
	for _, sr := range r.Rows {
		logf("  %-62s p50 %v p99 %v  paired %.2f× floor, WAITs/cycle %.2f, CPU/cycle %v", sr.Name+" ("+sr.Master+")", sr.Total.P50, sr.Total.P99, sr.Paired, sr.Waits, sr.CPU)
	}
	logf("  sync on − off: %v per cycle (paired, %.2f×); floor WAIT − writing floor: %v; PING p50 %v", r.WaitCost, r.OnVsOff, r.WaitCostFloor, r.RTT.P50)
	return r, nil
}

func (r *replicaSyncResult) check() error {
	if r.RTT.P50 <= 0 || len(r.Rows) != syncRows {
		return fmt.Errorf("replicasync: missing rows")
	}
	for _, sr := range r.Rows {
		if sr.Total.N == 0 || sr.Total.P50 <= 0 || !(sr.Paired > 0) || !(sr.RatioP50 > 0) {
			return fmt.Errorf("replicasync: %s produced no samples", sr.Name)
		}
		// Every WAIT expected, and none where none is: a row without
		// them would measure something else than its name says.
		if (sr.WantWaits == 0 && sr.Waits != 0) || (sr.WantWaits > 0 && sr.Waits < sr.WantWaits) {
			return fmt.Errorf("replicasync: %s: %.2f WAITs per cycle, want %v", sr.Name, sr.Waits, sr.WantWaits)
		}
	}
	if math.IsNaN(r.OnVsOff) || math.IsNaN(r.OffVsAlone) {
		return fmt.Errorf("replicasync: no paired rounds")
	}
	return nil
}

// countWaits runs verifyCycles cycles of t and returns how many WAIT
// commands the server at addr ran per cycle meanwhile.
func countWaits(ctx context.Context, addr string, t latencyTarget) (float64, error) {
	c, err := admin(addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	before, err := commandStats(ctx, c)
	if err != nil {
		return 0, err
	}
	for range verifyCycles {
		if _, _, err := t.cycle(ctx); err != nil {
			return 0, err
		}
	}
	after, err := commandStats(ctx, c)
	if err != nil {
		return 0, err
	}
	return float64(after["wait"]-before["wait"]) / verifyCycles, nil
}

// pairedDiff is the median over rounds of a[i]-b[i].
func pairedDiff(a, b []time.Duration) time.Duration {
	var ds []time.Duration
	for i := range min(len(a), len(b)) {
		ds = append(ds, a[i]-b[i])
	}
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	if len(ds)%2 == 1 {
		return ds[len(ds)/2]
	}
	return (ds[len(ds)/2-1] + ds[len(ds)/2]) / 2
}

// writeFloor is the floor with writeScript, alone or followed by WAIT.
type writeFloor struct {
	c   rueidis.Client
	sha string
}

func newWriteFloor(ctx context.Context, addr string) (*writeFloor, error) {
	c, err := admin(addr)
	if err != nil {
		return nil, err
	}
	sha, err := c.Do(ctx, c.B().ScriptLoad().Script(writeScript).Build()).ToString()
	if err != nil {
		c.Close()
		return nil, err
	}
	return &writeFloor{c: c, sha: sha}, nil
}

// once sends the two round trips, each one EVALSHA of writeScript.
func (f *writeFloor) once(ctx context.Context, key string) error {
	for range 2 {
		cmd := f.c.B().Evalsha().Sha1(f.sha).Numkeys(1).Key(key).Build()
		if err := f.c.Do(ctx, cmd).Error(); err != nil {
			return err
		}
	}
	return nil
}

// onceSynced sends the two round trips, each one EVALSHA of writeScript
// and WAIT 1 in one DoMulti, which rueidis sends on one connection (as
// rlock sends a request and its WAIT). A WAIT that the replica did not
// answer in time is an error: the row would not be a synced write.
func (f *writeFloor) onceSynced(ctx context.Context, key string) error {
	for range 2 {
		res := f.c.DoMulti(ctx,
			f.c.B().Evalsha().Sha1(f.sha).Numkeys(1).Key(key).Build(),
			f.c.B().Wait().Numreplicas(1).Timeout(syncWaitTimeout.Milliseconds()).Build())
		if err := res[0].Error(); err != nil {
			return err
		}
		n, err := res[1].AsInt64()
		if err != nil {
			return err
		}
		if n < 1 {
			return fmt.Errorf("WAIT 1 %d: the replica did not acknowledge", syncWaitTimeout.Milliseconds())
		}
	}
	return nil
}

func (f *writeFloor) Close() { f.c.Close() }
