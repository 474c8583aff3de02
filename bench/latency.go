package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// Scenario 1: uncontended Lock+Unlock latency, one goroutine, one key per
// library, against the floor (two EVALSHA round trips on one rueidis
// client), the same floor on go-redis (the client under redsync and
// redislock) and PING.

type latencyResult struct {
	RTT     summary // PING round trip
	Floor   summary // two EVALSHA round trips, rueidis
	FloorPl summary // the same on a rueidis client in pipelining mode
	FloorGo summary // the same on go-redis
	// FloorCPU, FloorPlCPU, FloorGoCPU are the process CPU per cycle of
	// the floors.
	FloorCPU, FloorPlCPU, FloorGoCPU time.Duration
	Libs                             []libLatency
	Samples                          int // per library
	// Protocol are the protocol floors (protofloor.go): Redisson's
	// scripts and rlock's, sent raw.
	Protocol []protocolRow
	// RlockOverScripts is rlock's paired ratio to rlock's scripts sent
	// raw: what its Client adds to its own scripts.
	RlockOverScripts float64
	// RlockOverRedisson is rlock's paired ratio to Redisson's scripts
	// sent raw: issue 29's measure (at most 1.10).
	RlockOverRedisson float64

	floorSamples, floorPlSamples, floorGoSamples, rttSamples samples
	libsRun                                                  int  // how many libraries were timed (all but with -libs)
	timedRlock                                               bool // rlock was one of them
}

type libLatency struct {
	Name         string
	Client       string
	Total        summary // Lock + Unlock
	Lock, Unlock summary
	CPU          time.Duration // this process's CPU per cycle
	RatioP50     float64       // to the floor
	RatioP99     float64
	RatioOwn     float64 // p50 to the floor on the library's own client, in the mode it runs in
	// Paired and PairedOwn are the median over rounds of the ratio of
	// block medians within the same round, to the floor and to the own
	// client's floor: robust against the machine's load changing between
	// rounds.
	Paired, PairedOwn float64

	totalSamples samples
}

// protocolRow is one protocol floor's measurement.
type protocolRow struct {
	Name   string
	Total  summary
	CPU    time.Duration
	Paired float64 // paired p50 to the floor
}

// latencyLibs are the libraries scenario 1 times (-libs picks some).
var latencyLibs = []library{libRlock, libRedsync, libRedislock, libRueidislock}

// latencyTarget is one thing whose cycle is timed.
type latencyTarget struct {
	name  string
	cycle func(ctx context.Context) (lock, total time.Duration, err error)
}

func runLatency(ctx context.Context, p params) (*latencyResult, error) {
	srv, err := startRedis(ctx)
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	addr := srv.Addr()

	f, err := newFloor(ctx, addr)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	pf, err := newPipelinedFloor(ctx, addr)
	if err != nil {
		return nil, err
	}
	defer pf.Close()
	gf, err := newGoFloor(ctx, addr)
	if err != nil {
		return nil, err
	}
	defer gf.Close()
	floorCycle := func(once func(context.Context, string) error, key string) func(ctx context.Context) (time.Duration, time.Duration, error) {
		return func(ctx context.Context) (time.Duration, time.Duration, error) {
			t := time.Now()
			err := once(ctx, key)
			d := time.Since(t)
			return d / 2, d, err
		}
	}
	targets := []latencyTarget{
		{name: "floor", cycle: floorCycle(f.once, "bench:latency:floor")},
		{name: "floor (rueidis pipelining)", cycle: floorCycle(pf.once, "bench:latency:floor-pl")},
		{name: "floor (go-redis)", cycle: floorCycle(gf.once, "bench:latency:floor-go")},
	}
	rf, err := newRedissonScriptsFloor(addr)
	if err != nil {
		return nil, err
	}
	defer rf.Close()
	lf, err := newRlockScriptsFloor(addr)
	if err != nil {
		return nil, err
	}
	defer lf.Close()
	targets = append(targets,
		latencyTarget{name: "Redisson's scripts", cycle: floorCycle(rf.once, "bench:latency:redisson-scripts")},
		latencyTarget{name: "rlock's scripts", cycle: floorCycle(lf.once, "bench:latency:rlock-scripts")})
	const nFloors = 5
	libs := slices.Clone(latencyLibs)
	if len(p.libs) > 0 {
		libs = slices.DeleteFunc(libs, func(l library) bool { return !p.libs[l.name] })
	}
	for _, lib := range libs {
		l, err := lib.open(ctx, addr, openOpts{})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", lib.name, err)
		}
		defer l.Close()
		key := "bench:latency:" + lib.name
		targets = append(targets, latencyTarget{name: lib.name, cycle: func(ctx context.Context) (time.Duration, time.Duration, error) {
			t := time.Now()
			unlock, _, err := lockBounded(ctx, l, key, "1. latency: "+lib.name)
			if err != nil {
				return 0, 0, err
			}
			ld := time.Since(t)
			err = unlock(ctx)
			return ld, time.Since(t), err
		}})
	}

	accs, err := interleave(ctx, targets, p.latencyWarmup, p.latencyRounds, p.latencyBlock, p.pace)
	if err != nil {
		return nil, err
	}
	rtt, err := pingRTT(ctx, addr, p.latencyRounds*p.latencyBlock)
	if err != nil {
		return nil, err
	}

	r := &latencyResult{RTT: summarize(rtt), Samples: p.latencyRounds * p.latencyBlock, libsRun: len(libs)}
	r.rttSamples = rtt.sorted()
	r.floorSamples = accs[0].total.sorted()
	r.Floor = summarize(r.floorSamples)
	r.floorPlSamples = accs[1].total.sorted()
	r.FloorPl = summarize(r.floorPlSamples)
	r.floorGoSamples = accs[2].total.sorted()
	r.FloorGo = summarize(r.floorGoSamples)
	r.FloorCPU, r.FloorPlCPU, r.FloorGoCPU = accs[0].perCycle(), accs[1].perCycle(), accs[2].perCycle()
	for i := 3; i < nFloors; i++ {
		a := accs[i]
		pr := protocolRow{Name: targets[i].name, Total: summarize(a.total.sorted()), CPU: a.perCycle(), Paired: pairedRatio(a.blockP50, accs[0].blockP50)}
		logf("  %-20s p50 %v  paired %.2f× floor, CPU/cycle %v", pr.Name, pr.Total.P50, pr.Paired, pr.CPU)
		r.Protocol = append(r.Protocol, pr)
	}
	for i, lib := range libs {
		a := accs[i+nFloors]
		unl := make(samples, len(a.total))
		for j := range a.total {
			unl[j] = a.total[j] - a.lock[j]
		}
		ll := libLatency{Name: lib.name, Client: lib.client, Total: summarize(a.total), Lock: summarize(a.lock), Unlock: summarize(unl), CPU: a.perCycle(), totalSamples: a.total.sorted()}
		ll.RatioP50 = ratio(ll.Total.P50, r.Floor.P50)
		ll.RatioP99 = ratio(ll.Total.P99, r.Floor.P99)
		own, ownAcc := r.Floor.P50, accs[0]
		switch lib.client {
		case "rueidis, pipelining":
			own, ownAcc = r.FloorPl.P50, accs[1]
		case "go-redis":
			own, ownAcc = r.FloorGo.P50, accs[2]
		}
		ll.RatioOwn = ratio(ll.Total.P50, own)
		ll.Paired = pairedRatio(a.blockP50, accs[0].blockP50)
		ll.PairedOwn = pairedRatio(a.blockP50, ownAcc.blockP50)
		logf("  %-12s p50 %v p99 %v  %.2f× floor (paired %.2f×; %.2f× its client's floor), CPU/cycle %v", ll.Name, ll.Total.P50, ll.Total.P99, ll.RatioP50, ll.Paired, ll.PairedOwn, ll.CPU)
		r.Libs = append(r.Libs, ll)
		if lib.name == libRlock.name {
			r.timedRlock = true
			r.RlockOverScripts = pairedRatio(a.blockP50, accs[4].blockP50)
			r.RlockOverRedisson = pairedRatio(a.blockP50, accs[3].blockP50)
			logf("  rlock ÷ rlock's scripts sent raw (paired): %.2f×; ÷ Redisson's scripts sent raw (paired): %.2f×", r.RlockOverScripts, r.RlockOverRedisson)
		}
	}
	logf("  floor p50 %v, pipelining %v, go-redis %v, PING p50 %v; floor CPU/cycle %v, %v, %v", r.Floor.P50, r.FloorPl.P50, r.FloorGo.P50, r.RTT.P50, r.FloorCPU, r.FloorPlCPU, r.FloorGoCPU)
	return r, nil
}

func (r *latencyResult) check() error {
	if r.RTT.P50 <= 0 || r.Floor.P50 <= 0 || r.FloorPl.P50 <= 0 || r.FloorGo.P50 <= 0 || len(r.Libs) != r.libsRun || len(r.Protocol) != 2 {
		return fmt.Errorf("latency: missing baselines or libraries")
	}
	for _, p := range r.Protocol {
		if p.Total.P50 <= 0 || !(p.Paired > 0) {
			return fmt.Errorf("latency: %s produced no samples", p.Name)
		}
	}
	if r.timedRlock && (!(r.RlockOverScripts > 0) || !(r.RlockOverRedisson > 0)) {
		return fmt.Errorf("latency: no ratio of rlock to its scripts")
	}
	for _, l := range r.Libs {
		if l.Total.N == 0 || l.Total.P50 <= 0 || !(l.RatioP50 > 0) {
			return fmt.Errorf("latency: %s produced no samples", l.Name)
		}
	}
	return nil
}

// timedBlocks is what interleave measured of one target.
type timedBlocks struct {
	lock, total samples
	cpu         time.Duration   // this process's CPU over the timed blocks
	blockP50    []time.Duration // the block's median, per round
}

// perCycle is the process CPU per timed cycle.
func (a timedBlocks) perCycle() time.Duration {
	return a.cpu / time.Duration(max(len(a.total), 1))
}

// interleave warms every target up (warmup cycles each, in order), then
// times rounds of one block of block cycles per target, the targets in a
// random order each round, so that a noisy stretch of the machine hits
// every target alike. The result is in the order of targets.
func interleave(ctx context.Context, targets []latencyTarget, warmup, rounds, block int, pace time.Duration) ([]timedBlocks, error) {
	accs := make([]timedBlocks, len(targets))
	// The pacer: a timer kept pace ahead (reset before every cycle, so it
	// never fires while the cycles run), the same for every target.
	paced := func() {}
	if pace > 0 {
		pacer := time.NewTimer(pace)
		defer pacer.Stop()
		paced = func() { pacer.Reset(pace) }
	}
	for i, t := range targets { // warm up: connections, script caches
		for range warmup {
			if _, _, err := t.cycle(ctx); err != nil {
				return nil, fmt.Errorf("%s: %w", t.name, err)
			}
		}
		accs[i].lock = make(samples, 0, rounds*block)
		accs[i].total = make(samples, 0, rounds*block)
	}
	for range rounds {
		for _, i := range rand.Perm(len(targets)) {
			t := targets[i]
			c0 := cpuTime()
			for range block {
				paced()
				ld, td, err := t.cycle(ctx)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", t.name, err)
				}
				accs[i].lock = append(accs[i].lock, ld)
				accs[i].total = append(accs[i].total, td)
			}
			accs[i].cpu += cpuTime() - c0
			accs[i].blockP50 = append(accs[i].blockP50, accs[i].total[len(accs[i].total)-block:].pct(50))
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return accs, nil
}

// pairedRatio is the median over rounds of a[i]/b[i].
func pairedRatio(a, b []time.Duration) float64 {
	var rs []float64
	for i := range min(len(a), len(b)) {
		if b[i] > 0 {
			rs = append(rs, float64(a[i])/float64(b[i]))
		}
	}
	if len(rs) == 0 {
		return math.NaN()
	}
	slices.Sort(rs)
	if len(rs)%2 == 1 {
		return rs[len(rs)/2]
	}
	return (rs[len(rs)/2-1] + rs[len(rs)/2]) / 2
}
