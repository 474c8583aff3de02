package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"github.com/rlock-go/rlock/observe"
)

// Scenario 5: renewal at scale. Hold n locks in one process and measure
// what keeping them costs per renewal period: requests and round trips,
// CPU of this process (getrusage) and of redis-server (INFO cpu),
// goroutines and memory per lock. Only rlock and rueidislock renew; the
// others leave it to the caller.

type renewalResult struct {
	Lease    time.Duration
	Interval time.Duration
	Ticks    int
	// IdleCPU and IdleRedisCPU are the CPU of this process and of
	// redis-server per period with no lock held: the floor under the rows.
	IdleCPU, IdleRedisCPU time.Duration
	Rows                  []renewalRow
}

type renewalRow struct {
	Name       string
	Locks      int
	RequestsTk float64       // requests per tick
	RoundTrips float64       // round trips per tick, as the library reports them (rlock)
	TickTime   time.Duration // rlock: mean duration of a tick's round trip
	CPUTick    time.Duration // this process, per tick
	RedisCPUTk time.Duration // redis-server, per tick
	Goroutines float64       // per lock
	BytesPerLk float64       // heap objects + goroutine stacks, per lock
	StillHeld  int64         // keys in Redis after the window
}

func runRenewal(ctx context.Context, p params) (*renewalResult, error) {
	srv, err := startRedis(ctx)
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	addr := srv.Addr()
	adm, err := admin(addr)
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	r := &renewalResult{Lease: p.renewLease, Interval: p.renewInterval, Ticks: p.renewTicks}
	cpu0 := cpuTime()
	rcpu0, err := redisCPU(ctx, adm)
	if err != nil {
		return nil, err
	}
	time.Sleep(p.renewInterval * time.Duration(p.renewTicks))
	rcpu1, err := redisCPU(ctx, adm)
	if err != nil {
		return nil, err
	}
	r.IdleCPU = (cpuTime() - cpu0) / time.Duration(p.renewTicks)
	r.IdleRedisCPU = (rcpu1 - rcpu0) / time.Duration(p.renewTicks)
	logf("  idle: CPU %v/period (redis %v)", r.IdleCPU, r.IdleRedisCPU)
	type renewer func(context.Context, params, string, rueidis.Client, int) (*renewalRow, error)
	for i, n := range p.renewCounts {
		fs := []renewer{renewRlock, func(ctx context.Context, p params, addr string, adm rueidis.Client, n int) (*renewalRow, error) {
			return renewRueidislock(ctx, p, addr, adm, n, libRueidislock)
		}}
		if i == 0 { // its own extensions wake it: measured at the smallest count only
			fs = append(fs, func(ctx context.Context, p params, addr string, adm rueidis.Client, n int) (*renewalRow, error) {
				return renewRueidislock(ctx, p, addr, adm, n, libRueidislockDefaults)
			})
		}
		for _, f := range fs {
			if err := adm.Do(ctx, adm.B().Flushall().Build()).Error(); err != nil {
				return nil, err
			}
			row, err := f(ctx, p, addr, adm, n)
			if err != nil {
				return nil, fmt.Errorf("%d locks: %w", n, err)
			}
			logf("  %-12s %6d locks: %.0f req/tick, %.1f RT/tick, CPU %v/tick (redis %v), %.2f goroutines/lock, %.0f B/lock",
				row.Name, n, row.RequestsTk, row.RoundTrips, row.CPUTick, row.RedisCPUTk, row.Goroutines, row.BytesPerLk)
			r.Rows = append(r.Rows, *row)
		}
	}
	return r, nil
}

// holdMany takes n locks named prefix:i with 32 workers.
func holdMany(ctx context.Context, l locker, prefix string, n int, where string) ([]func(context.Context) error, error) {
	unlocks := make([]func(context.Context) error, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				u, _, err := lockBounded(ctx, l, prefix+":"+strconv.Itoa(i), where)
				if err != nil {
					mu.Lock()
					first = err
					mu.Unlock()
					return
				}
				unlocks[i] = u
			}
		}()
	}
	wg.Wait()
	return unlocks, first
}

// releaseMany calls every unlock with 32 workers.
func releaseMany(ctx context.Context, unlocks []func(context.Context) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(unlocks) {
					return
				}
				if u := unlocks[i]; u != nil {
					u(ctx)
				}
			}
		}()
	}
	wg.Wait()
}

func dbsize(ctx context.Context, adm rueidis.Client) int64 {
	n, _ := adm.Do(ctx, adm.B().Dbsize().Build()).AsInt64()
	return n
}

func renewRlock(ctx context.Context, p params, addr string, adm rueidis.Client, n int) (*renewalRow, error) {
	ticks := make(chan observe.Renew, 1024)
	obs := &observe.Observer{Renew: func(e observe.Renew) {
		select {
		case ticks <- e:
		default:
		}
	}}
	var requests atomic.Int64
	l, err := libRlock.open(ctx, addr, openOpts{requests: &requests, lease: p.renewLease, renew: p.renewInterval, observer: obs})
	if err != nil {
		return nil, err
	}
	defer l.Close()
	m0 := takeMem()
	unlocks, err := holdMany(ctx, l, "bench:renew:rlock", n, "5. renewal: rlock")
	defer releaseMany(context.Background(), unlocks)
	if err != nil {
		return nil, err
	}
	m1 := takeMem()

	// Start on a tick that renewed every lock, then measure the next ones.
	deadline := time.After(p.renewInterval*time.Duration(p.renewTicks+5) + 10*time.Second)
	next := func() (observe.Renew, error) {
		select {
		case e := <-ticks:
			if e.Err != nil || e.Lost > 0 {
				return e, fmt.Errorf("rlock renewal: lost %d, failed %d: %v", e.Lost, e.Failed, e.Err)
			}
			return e, nil
		case <-deadline:
			return observe.Renew{}, fmt.Errorf("rlock: no renewal tick")
		case <-ctx.Done():
			return observe.Renew{}, ctx.Err()
		}
	}
	for {
		e, err := next()
		if err != nil {
			return nil, err
		}
		if e.Renewed == n {
			break
		}
	}
	cpu0 := cpuTime()
	rcpu0, err := redisCPU(ctx, adm)
	if err != nil {
		return nil, err
	}
	req0 := requests.Load()
	var rts int
	var dur time.Duration
	for range p.renewTicks {
		e, err := next()
		if err != nil {
			return nil, err
		}
		if e.Renewed != n {
			return nil, fmt.Errorf("rlock: a tick renewed %d of %d locks", e.Renewed, n)
		}
		rts += e.RoundTrips
		dur += e.Duration
	}
	cpu1 := cpuTime()
	rcpu1, err := redisCPU(ctx, adm)
	if err != nil {
		return nil, err
	}
	req1 := requests.Load()
	t := p.renewTicks
	return &renewalRow{
		Name: "rlock", Locks: n,
		RequestsTk: float64(req1-req0) / float64(t),
		RoundTrips: float64(rts) / float64(t),
		TickTime:   dur / time.Duration(t),
		CPUTick:    (cpu1 - cpu0) / time.Duration(t),
		RedisCPUTk: (rcpu1 - rcpu0) / time.Duration(t),
		Goroutines: float64(int64(m1.goroutines)-int64(m0.goroutines)) / float64(n),
		BytesPerLk: float64(int64(m1.heap+m1.stacks)-int64(m0.heap+m0.stacks)) / float64(n),
		StillHeld:  dbsize(ctx, adm),
	}, nil
}

func renewRueidislock(ctx context.Context, p params, addr string, adm rueidis.Client, n int, lib library) (*renewalRow, error) {
	var requests atomic.Int64
	l, err := lib.open(ctx, addr, openOpts{requests: &requests, lease: p.renewLease, renew: p.renewInterval})
	if err != nil {
		return nil, err
	}
	defer l.Close()
	m0 := takeMem()
	unlocks, err := holdMany(ctx, l, "bench:renew:"+lib.name, n, "5. renewal: "+lib.name)
	defer releaseMany(context.Background(), unlocks)
	if err != nil {
		return nil, err
	}
	m1 := takeMem()
	// Each lock renews on its own timer: let every one renew once, then
	// measure over whole periods.
	time.Sleep(p.renewInterval + p.renewInterval/2)
	cpu0 := cpuTime()
	rcpu0, err := redisCPU(ctx, adm)
	if err != nil {
		return nil, err
	}
	req0 := requests.Load()
	time.Sleep(p.renewInterval * time.Duration(p.renewTicks))
	cpu1 := cpuTime()
	rcpu1, err := redisCPU(ctx, adm)
	if err != nil {
		return nil, err
	}
	req1 := requests.Load()
	t := p.renewTicks
	req := float64(req1-req0) / float64(t)
	return &renewalRow{
		Name: lib.name, Locks: n,
		RequestsTk: req,
		RoundTrips: req, // one request per lock, each awaited on its own (rueidis pipelines them)
		CPUTick:    (cpu1 - cpu0) / time.Duration(t),
		RedisCPUTk: (rcpu1 - rcpu0) / time.Duration(t),
		Goroutines: float64(int64(m1.goroutines)-int64(m0.goroutines)) / float64(n),
		BytesPerLk: float64(int64(m1.heap+m1.stacks)-int64(m0.heap+m0.stacks)) / float64(n),
		StillHeld:  dbsize(ctx, adm),
	}, nil
}

func (r *renewalResult) check() error {
	if len(r.Rows) == 0 {
		return fmt.Errorf("renewal: no rows")
	}
	for _, row := range r.Rows {
		if row.RequestsTk <= 0 || row.CPUTick <= 0 || row.BytesPerLk <= 0 {
			return fmt.Errorf("renewal: %s with %d locks produced no numbers", row.Name, row.Locks)
		}
		if row.StillHeld < int64(row.Locks) {
			return fmt.Errorf("renewal: %s: only %d of %d locks still in Redis after the window", row.Name, row.StillHeld, row.Locks)
		}
	}
	return nil
}
