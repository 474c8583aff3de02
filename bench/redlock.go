package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/multilock"
	"github.com/rlock-go/rlock/observe"
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
	// Waiting is rlock's RedLock waiters against a holder that keeps the
	// lock.
	Waiting *redlockWaiting
}

// redlockWaiting measures what RedLock waiters send while another owner
// keeps a bare quorum: the attempts (rounds) per second of each waiter,
// against the goal of no more than its wake-ups plus one per lease.
type redlockWaiting struct {
	Waiters int
	Held    int           // masters the holder keeps: the quorum, no more
	Lease   time.Duration // the holder's watchdog lease (renewed every third)
	Window  time.Duration // each waiter's TryLock wait
	Rounds  []int         // per waiter
	Wakes   []int         // per waiter: wake-ups by an unlock message, a reconnect or a local release
	Bound   []int         // per waiter: 2 (the first round, the one after subscribing) + wake-ups + leases seen
	PerSec  float64       // rounds per second per waiter, mean
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
	if r.Waiting, err = runRedLockWaiting(ctx, addrs, p.redlockWaitWindow); err != nil {
		return nil, fmt.Errorf("waiting: %w", err)
	}
	for _, row := range r.Rows {
		logf("  %-16s acquire p50 %v p99 %v (%.2f× / %.2f× one master, paired p50 %.2f×), CPU/cycle %v", row.Name, row.Acquire.P50, row.Acquire.P99, row.RatioP50, row.RatioP99, row.Paired, row.CPU)
	}
	logf("  rlock RedLock / redsync RedLock, paired acquire p50: %.2f×", r.RlockVsRedsync)
	wt := r.Waiting
	logf("  RedLock waiters against a holder of %d of %d masters (lease %v), %v each: rounds %v (%.2f/s per waiter), wake-ups %v, bound %v",
		wt.Held, n, wt.Lease, wt.Window, wt.Rounds, wt.PerSec, wt.Wakes, wt.Bound)
	return r, nil
}

// runRedLockWaiting has another owner hold the lock on a bare quorum of
// the masters (plain locks, renewed by their watchdog) while waiters, each
// with its own Clients like separate processes, wait for it with TryLock
// for window; it counts every waiter's rounds and wake-ups.
func runRedLockWaiting(ctx context.Context, addrs []string, window time.Duration) (*redlockWaiting, error) {
	const waiters = 2
	const lease = time.Second
	const name = "bench:redlock:waiting"
	quorum := len(addrs)/2 + 1
	var clients []*lock.Client
	defer func() {
		for _, c := range clients {
			c.Close(context.Background())
		}
	}()
	connect := func(addr string, cfg lock.Config) (*lock.Client, error) {
		cfg.Addrs = []string{addr}
		c, err := lock.New(ctx, cfg)
		if err == nil {
			clients = append(clients, c)
		}
		return c, err
	}
	for _, a := range addrs[:quorum] {
		c, err := connect(a, lock.Config{WatchdogTimeout: lease})
		if err != nil {
			return nil, err
		}
		if _, err := c.Mutex(name).Lock(ctx); err != nil {
			return nil, err
		}
	}
	w := &redlockWaiting{Waiters: waiters, Held: quorum, Lease: lease, Window: window,
		Rounds: make([]int, waiters), Wakes: make([]int, waiters), Bound: make([]int, waiters)}
	ls := make([]*multilock.Lock, waiters)
	obs := make([]*observe.Observer, waiters)
	var mu sync.Mutex
	for i := range ls {
		ms := make([]*lock.Mutex, len(addrs))
		for k, a := range addrs {
			c, err := connect(a, lock.Config{})
			if err != nil {
				return nil, err
			}
			ms[k] = c.Mutex(name)
		}
		ls[i] = multilock.NewRedLock(ms...)
		obs[i] = &observe.Observer{
			Round: func(context.Context, observe.Round) { mu.Lock(); w.Rounds[i]++; mu.Unlock() },
			WakeUp: func(_ context.Context, e observe.WakeUp) {
				switch e.Reason {
				case observe.WakeMessage, observe.WakeReconnect, observe.WakeRelease:
					mu.Lock()
					w.Wakes[i]++
					mu.Unlock()
				}
			},
		}
	}
	errs := make([]error, waiters)
	var wg sync.WaitGroup
	for i, l := range ls {
		wg.Go(func() {
			h, err := l.TryLock(ctx, lock.Wait(window), multilock.Observe(obs[i]))
			if err == nil {
				_ = h.Unlock(ctx)
				errs[i] = fmt.Errorf("waiter %d acquired a lock held on a quorum", i)
			} else if !errors.Is(err, multilock.ErrQuorum) {
				errs[i] = err
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	// The holder's watchdog renews every third of the lease: a lease a
	// waiter saw ends at least 2/3 of it later.
	leases := int((3*window + 2*lease - 1) / (2 * lease))
	total := 0
	for i := range waiters {
		w.Bound[i] = 2 + w.Wakes[i] + leases
		total += w.Rounds[i]
	}
	w.PerSec = float64(total) / float64(waiters) / window.Seconds()
	return w, nil
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
	if w := r.Waiting; w == nil || len(w.Rounds) == 0 || w.Rounds[0] == 0 {
		return fmt.Errorf("redlock: the waiting measurement produced no numbers")
	}
	return nil
}
