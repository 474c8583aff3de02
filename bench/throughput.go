package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"
)

// Scenario 2: parallel throughput, 64 goroutines on distinct keys, one
// client (one locker) per library shared by all of them.

type throughputResult struct {
	Goroutines int
	Window     time.Duration // measured time per library, all rounds
	Floor      libThroughput // two EVALSHA round trips on one rueidis client
	FloorGo    libThroughput // the same on one go-redis client (its pool)
	Libs       []libThroughput
}

type libThroughput struct {
	Name     string
	Ops      int64
	PerSec   float64
	Latency  summary       // one cycle under load
	CPU      time.Duration // this process's CPU per cycle
	RedisCPU time.Duration // redis-server's CPU per cycle
	Ratio    float64       // PerSec / floor's
	Own      float64       // PerSec / the floor of the library's own client
}

// cycleFunc is one Lock+Unlock (or the floor's two round trips) on key.
type cycleFunc func(ctx context.Context, key string) error

func runThroughput(ctx context.Context, p params) (*throughputResult, error) {
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
	gf, err := newGoFloor(ctx, addr)
	if err != nil {
		return nil, err
	}
	defer gf.Close()
	names := []string{"floor", "floor (go-redis)"}
	cycles := []cycleFunc{f.once, gf.once}
	libs := []library{libRlock, libRedsync, libRedislock, libRueidislock}
	for _, lib := range libs {
		l, err := lib.open(ctx, addr, openOpts{})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", lib.name, err)
		}
		defer l.Close()
		names = append(names, lib.name)
		cycles = append(cycles, func(ctx context.Context, key string) error {
			unlock, err := l.Lock(ctx, key)
			if err != nil {
				return err
			}
			return unlock(context.WithoutCancel(ctx)) // a cycle cut at the window's end still releases
		})
	}

	adm, err := admin(addr)
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	ops := make([]int64, len(cycles))
	lats := make([]samples, len(cycles))
	cpus := make([]time.Duration, len(cycles))
	rcpus := make([]time.Duration, len(cycles))
	for i, c := range cycles { // warm up: connection pools, scripts
		if _, _, err := parallel(ctx, p.goroutines, p.throughputWarmup, names[i], c, "2. throughput warm-up: "+names[i]); err != nil {
			return nil, fmt.Errorf("%s: %w", names[i], err)
		}
	}
	for range p.throughputRounds {
		for _, i := range rand.Perm(len(cycles)) {
			c0 := cpuTime()
			r0, err := redisCPU(ctx, adm)
			if err != nil {
				return nil, err
			}
			n, s, err := parallel(ctx, p.goroutines, p.throughputWindow, names[i], cycles[i], "2. throughput: "+names[i])
			if err != nil {
				return nil, fmt.Errorf("%s: %w", names[i], err)
			}
			c1 := cpuTime()
			r1, err := redisCPU(ctx, adm)
			if err != nil {
				return nil, err
			}
			cpus[i] += c1 - c0
			rcpus[i] += r1 - r0
			ops[i] += n
			lats[i] = append(lats[i], s...)
		}
	}
	window := p.throughputWindow * time.Duration(p.throughputRounds)
	mk := func(i int) libThroughput {
		t := libThroughput{Name: names[i], Ops: ops[i], PerSec: float64(ops[i]) / window.Seconds(), Latency: summarize(lats[i])}
		if ops[i] > 0 {
			t.CPU = cpus[i] / time.Duration(ops[i])
			t.RedisCPU = rcpus[i] / time.Duration(ops[i])
		}
		return t
	}
	r := &throughputResult{Goroutines: p.goroutines, Window: window, Floor: mk(0), FloorGo: mk(1)}
	for i, lib := range libs {
		t := mk(i + 2)
		t.Ratio = t.PerSec / r.Floor.PerSec
		t.Own = t.Ratio
		if lib.client == "go-redis" {
			t.Own = t.PerSec / r.FloorGo.PerSec
		}
		logf("  %-12s %8.0f cycles/s  %.2f× floor (%.2f× its client's floor), CPU/cycle %v + redis %v", t.Name, t.PerSec, t.Ratio, t.Own, t.CPU, t.RedisCPU)
		r.Libs = append(r.Libs, t)
	}
	logf("  floor %.0f/s (CPU/cycle %v + redis %v), go-redis floor %.0f/s (CPU/cycle %v + redis %v)", r.Floor.PerSec, r.Floor.CPU, r.Floor.RedisCPU, r.FloorGo.PerSec, r.FloorGo.CPU, r.FloorGo.RedisCPU)
	return r, nil
}

// parallel runs cycle in g goroutines, each on its own key, for d, and
// returns the cycles completed within d and their latencies. Calls still
// running at the end are cancelled; one that had run longer than
// stallAfter by then, or any cycle longer than that, is counted as a
// stall under where.
func parallel(ctx context.Context, g int, d time.Duration, prefix string, cycle cycleFunc, where string) (int64, samples, error) {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total int64
		all   samples
		first error
	)
	start := make(chan struct{})
	var deadline time.Time
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	for i := range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := "bench:tp:" + prefix + ":" + strconv.Itoa(i)
			var n int64
			local := make(samples, 0, 1024)
			<-start
			for {
				t := time.Now()
				if !t.Before(deadline) {
					break
				}
				err := cycle(runCtx, key)
				end := time.Now()
				if end.Sub(t) > stallAfter {
					noteStall(where)
				}
				if err != nil {
					if runCtx.Err() == nil {
						mu.Lock()
						if first == nil {
							first = err
						}
						mu.Unlock()
					}
					break
				}
				if end.Before(deadline) {
					n++
					local = append(local, end.Sub(t))
				}
			}
			mu.Lock()
			total += n
			all = append(all, local...)
			mu.Unlock()
		}()
	}
	deadline = time.Now().Add(d)
	close(start)
	time.Sleep(time.Until(deadline))
	stop() // calls still blocked (stalled) end now
	wg.Wait()
	return total, all, first
}

func (r *throughputResult) check() error {
	if r.Floor.PerSec <= 0 || r.FloorGo.PerSec <= 0 || len(r.Libs) != 4 {
		return fmt.Errorf("throughput: missing floor or libraries")
	}
	for _, l := range r.Libs {
		if l.Ops == 0 || !(l.Ratio > 0) {
			return fmt.Errorf("throughput: %s completed no cycle", l.Name)
		}
	}
	return nil
}
