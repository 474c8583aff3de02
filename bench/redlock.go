package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/multilock"
)

// Scenario 6: RedLock over 5 independent masters, rlock's multilock
// against redsync with 5 pools, each against itself on one master.

type redlockResult struct {
	Masters int
	Samples int
	RTT     summary // PING to one master
	Rows    []redlockRow
	// RlockVsRedsync is the paired acquire p50 ratio of rlock's RedLock
	// to redsync's.
	RlockVsRedsync float64
}

type redlockRow struct {
	Name     string
	Masters  int
	Acquire  summary
	Cycle    summary       // Lock + Unlock
	CPU      time.Duration // this process's CPU per cycle
	RatioP50 float64       // acquire p50 / the same library's on one master
	RatioP99 float64
	Paired   float64 // median over rounds of the block p50 ratio to one master
	blocks   []time.Duration
	acquires samples
}

func runRedLock(ctx context.Context, p params) (*redlockResult, error) {
	const n = 5
	ms, err := startMasters(ctx, n)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, s := range ms {
			s.Close()
		}
	}()
	addrs := make([]string, n)
	for i, s := range ms {
		addrs[i] = s.Addr()
	}
	rtt, err := pingRTT(ctx, addrs[0], 2000)
	if err != nil {
		return nil, err
	}

	// rlock: one Client per master.
	var clients []*lock.Client
	defer func() {
		for _, c := range clients {
			c.Close(context.Background())
		}
	}()
	for _, a := range addrs {
		c, err := lock.New(ctx, lock.Config{Addrs: []string{a}})
		if err != nil {
			return nil, err
		}
		clients = append(clients, c)
	}
	var mutexes []*lock.Mutex
	for _, c := range clients {
		mutexes = append(mutexes, c.Mutex("bench:redlock:rlock"))
	}
	red := multilock.NewRedLock(mutexes...)
	single := clients[0].Mutex("bench:redlock:rlock-single")

	rs5, err := openRedsyncPools(ctx, addrs, openOpts{})
	if err != nil {
		return nil, err
	}
	defer rs5.Close()
	rs1, err := openRedsyncPools(ctx, addrs[:1], openOpts{})
	if err != nil {
		return nil, err
	}
	defer rs1.Close()

	type target struct {
		name    string
		masters int
		cycle   func(ctx context.Context) (time.Duration, time.Duration, error)
	}
	timed := func(lockf func(ctx context.Context) (func(context.Context) error, error)) func(ctx context.Context) (time.Duration, time.Duration, error) {
		return func(ctx context.Context) (time.Duration, time.Duration, error) {
			t := time.Now()
			unlock, err := lockf(ctx)
			if err != nil {
				return 0, 0, err
			}
			a := time.Since(t)
			err = unlock(ctx)
			return a, time.Since(t), err
		}
	}
	targets := []target{
		{"rlock", 1, timed(func(ctx context.Context) (func(context.Context) error, error) {
			h, err := single.Lock(ctx)
			if err != nil {
				return nil, err
			}
			return h.Unlock, nil
		})},
		{"rlock RedLock", n, timed(func(ctx context.Context) (func(context.Context) error, error) {
			h, err := red.Lock(ctx)
			if err != nil {
				return nil, err
			}
			return h.Unlock, nil
		})},
		{"redsync", 1, timed(func(ctx context.Context) (func(context.Context) error, error) {
			return rs1.Lock(ctx, "bench:redlock:redsync-single")
		})},
		{"redsync RedLock", n, timed(func(ctx context.Context) (func(context.Context) error, error) {
			return rs5.Lock(ctx, "bench:redlock:redsync")
		})},
	}
	acq := make([]samples, len(targets))
	cpu := make([]time.Duration, len(targets))
	blocks := make([][]time.Duration, len(targets))
	cyc := make([]samples, len(targets))
	for _, t := range targets {
		for range p.latencyWarmup {
			if _, _, err := t.cycle(ctx); err != nil {
				return nil, fmt.Errorf("%s: %w", t.name, err)
			}
		}
	}
	for range p.redlockRounds {
		for _, i := range rand.Perm(len(targets)) {
			c0 := cpuTime()
			for range p.redlockBlock {
				a, c, err := targets[i].cycle(ctx)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", targets[i].name, err)
				}
				acq[i] = append(acq[i], a)
				cyc[i] = append(cyc[i], c)
			}
			cpu[i] += cpuTime() - c0
			blocks[i] = append(blocks[i], acq[i][len(acq[i])-p.redlockBlock:].pct(50))
		}
	}
	r := &redlockResult{Masters: n, Samples: p.redlockRounds * p.redlockBlock, RTT: summarize(rtt)}
	for i, t := range targets {
		r.Rows = append(r.Rows, redlockRow{Name: t.name, Masters: t.masters, Acquire: summarize(acq[i]), Cycle: summarize(cyc[i]),
			CPU: cpu[i] / time.Duration(max(len(cyc[i]), 1)), acquires: acq[i].sorted(), blocks: blocks[i]})
	}
	for i := range r.Rows {
		base := r.Rows[i/2*2] // the single-master row of the same library
		r.Rows[i].RatioP50 = ratio(r.Rows[i].Acquire.P50, base.Acquire.P50)
		r.Rows[i].RatioP99 = ratio(r.Rows[i].Acquire.P99, base.Acquire.P99)
		r.Rows[i].Paired = pairedRatio(r.Rows[i].blocks, base.blocks)
	}
	r.RlockVsRedsync = pairedRatio(r.Rows[1].blocks, r.Rows[3].blocks)
	for _, row := range r.Rows {
		logf("  %-16s acquire p50 %v p99 %v (%.2f× / %.2f× one master, paired p50 %.2f×), CPU/cycle %v", row.Name, row.Acquire.P50, row.Acquire.P99, row.RatioP50, row.RatioP99, row.Paired, row.CPU)
	}
	logf("  rlock RedLock / redsync RedLock, paired acquire p50: %.2f×", r.RlockVsRedsync)
	return r, nil
}

func (r *redlockResult) check() error {
	if len(r.Rows) != 4 {
		return fmt.Errorf("redlock: missing rows")
	}
	for _, row := range r.Rows {
		if row.Acquire.N == 0 || !(row.RatioP50 > 0) {
			return fmt.Errorf("redlock: %s produced no numbers", row.Name)
		}
	}
	return nil
}
