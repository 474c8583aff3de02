package main

import (
	"context"
	"math"
	"math/rand/v2"
	"runtime"
	"runtime/metrics"
	"slices"
	"sync"
	"syscall"
	"time"

	goredislib "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// samples is a set of durations, kept whole for percentiles and plots.
type samples []time.Duration

func (s samples) sorted() samples {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

// pct returns the p-th percentile (0..100) by nearest rank; 0 when empty.
func (s samples) pct(p float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	c := s
	if !slices.IsSorted(c) {
		c = s.sorted()
	}
	i := int(math.Ceil(p/100*float64(len(c)))) - 1
	return c[max(0, min(i, len(c)-1))]
}

func (s samples) max() time.Duration {
	if len(s) == 0 {
		return 0
	}
	return slices.Max(s)
}

func (s samples) mean() time.Duration {
	if len(s) == 0 {
		return 0
	}
	var t time.Duration
	for _, d := range s {
		t += d
	}
	return t / time.Duration(len(s))
}

// summary is the usual digest of a latency distribution.
type summary struct {
	N                  int
	P50, P90, P99, Max time.Duration
	Mean               time.Duration
}

func summarize(s samples) summary {
	c := s.sorted()
	return summary{N: len(c), P50: c.pct(50), P90: c.pct(90), P99: c.pct(99), Max: c.max(), Mean: c.mean()}
}

// cpuTime returns the process's CPU time so far (user + system, every
// thread), from getrusage.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// memSnapshot is what a set of held locks costs the process.
type memSnapshot struct {
	heap       uint64 // live heap objects, after a GC
	stacks     uint64 // goroutine stacks
	goroutines uint64
}

func takeMem() memSnapshot {
	runtime.GC()
	runtime.GC()
	ss := []metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/stacks:bytes"},
		{Name: "/sched/goroutines:goroutines"},
	}
	metrics.Read(ss)
	var m memSnapshot
	if ss[0].Value.Kind() == metrics.KindUint64 {
		m.heap = ss[0].Value.Uint64()
	}
	if ss[1].Value.Kind() == metrics.KindUint64 {
		m.stacks = ss[1].Value.Uint64()
	}
	if ss[2].Value.Kind() == metrics.KindUint64 {
		m.goroutines = ss[2].Value.Uint64()
	}
	return m
}

// pingRTT measures n sequential PINGs on a fresh rueidis client.
func pingRTT(ctx context.Context, addr string, n int) (samples, error) {
	c, err := admin(addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	for range 50 { // warm up
		if err := c.Do(ctx, c.B().Ping().Build()).Error(); err != nil {
			return nil, err
		}
	}
	out := make(samples, 0, n)
	for range n {
		t := time.Now()
		if err := c.Do(ctx, c.B().Ping().Build()).Error(); err != nil {
			return nil, err
		}
		out = append(out, time.Since(t))
	}
	return out, nil
}

// floorScript is the trivial script of the floor: the cheapest possible
// EVALSHA on a key.
const floorScript = "return 1"

// floor is the cost below which no lock on one master can go: two
// EVALSHA round trips (acquire, release) on one rueidis client.
type floor struct {
	c   rueidis.Client
	sha string
}

func newFloor(ctx context.Context, addr string) (*floor, error) {
	c, err := admin(addr)
	if err != nil {
		return nil, err
	}
	sha, err := c.Do(ctx, c.B().ScriptLoad().Script(floorScript).Build()).ToString()
	if err != nil {
		c.Close()
		return nil, err
	}
	return &floor{c: c, sha: sha}, nil
}

// newPipelinedFloor is the floor on a rueidis client that has seen
// concurrent requests. rueidis serves a connection used by one goroutine
// at a time on the caller's goroutine; the first concurrent request
// switches it for good to pipelining through a writer and a reader
// goroutine, which costs every later request two goroutine handoffs.
// Libraries with background work on their client (rlock's latch cleaner
// and watchdog, rueidislock's per-lock goroutines) run in that mode.
func newPipelinedFloor(ctx context.Context, addr string) (*floor, error) {
	f, err := newFloor(ctx, addr)
	if err != nil {
		return nil, err
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				f.c.Do(ctx, f.c.B().Ping().Build())
			}
		}()
	}
	wg.Wait()
	return f, nil
}

// once sends the two round trips.
func (f *floor) once(ctx context.Context, key string) error {
	for range 2 {
		cmd := f.c.B().Evalsha().Sha1(f.sha).Numkeys(1).Key(key).Build()
		if err := f.c.Do(ctx, cmd).Error(); err != nil {
			return err
		}
	}
	return nil
}

func (f *floor) Close() { f.c.Close() }

// goFloor is the same two round trips on one go-redis client, the client
// under redsync and redislock.
type goFloor struct {
	c   *goredislib.Client
	sha string
}

func newGoFloor(ctx context.Context, addr string) (*goFloor, error) {
	c := goredislib.NewClient(&goredislib.Options{Addr: addr})
	sha, err := c.ScriptLoad(ctx, floorScript).Result()
	if err != nil {
		c.Close()
		return nil, err
	}
	return &goFloor{c: c, sha: sha}, nil
}

func (f *goFloor) once(ctx context.Context, key string) error {
	for range 2 {
		if err := f.c.EvalSha(ctx, f.sha, []string{key}).Err(); err != nil {
			return err
		}
	}
	return nil
}

func (f *goFloor) Close() { f.c.Close() }

// idlePingRTT measures n PINGs each sent after an idle pause drawn from
// [lo, hi): the round trip of a process that was waiting, as a released
// lock's holder and its waiter are. On a small virtual machine it is
// several times the round trip of a busy loop.
func idlePingRTT(ctx context.Context, addr string, n int, lo, hi time.Duration) (samples, error) {
	c, err := admin(addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := c.Do(ctx, c.B().Ping().Build()).Error(); err != nil {
		return nil, err
	}
	out := make(samples, 0, n)
	for range n {
		time.Sleep(lo + rand.N(hi-lo))
		t := time.Now()
		if err := c.Do(ctx, c.B().Ping().Build()).Error(); err != nil {
			return nil, err
		}
		out = append(out, time.Since(t))
	}
	return out, nil
}

func ratio(a, b time.Duration) float64 {
	if b <= 0 {
		return math.NaN()
	}
	return float64(a) / float64(b)
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
