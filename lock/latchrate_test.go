package lock_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/lock"
)

// benchPeak is the highest rate of rlock's Lock+Unlock the bench has
// reported (bench/throughput.go, 64 goroutines on one Client):
// docs/benchmarks.md's 30,437 cycles/s. On this 2-CPU machine, shared
// with other tests, `go run . -only throughput` gave 22,580/s. The issue
// asks for 3 × the peak; see TestLatchRateSeveralClients for why a test
// on the same machine cannot drive that.
const benchPeak = 30437

// latchAges is run by Redis, so that a sample is one instant of the
// server's clock and moves no key list over the wire: it counts the
// latches matching ARGV[1] and returns {count, least PTTL, greatest
// PTTL, then every latch whose PTTL is below ARGV[2]} (ms; -1 when there
// are none).
var latchAges = rueidis.NewLuaScript(`
local ks = redis.call('keys', ARGV[1])
local least, most, below = -1, -1, tonumber(ARGV[2])
local old = {}
for _, k in ipairs(ks) do
  local p = redis.call('pttl', k)
  if p >= 0 then
    if least < 0 or p < least then least = p end
    if p > most then most = p end
    if p < below then old[#old + 1] = k end
  end
end
local out = {#ks, least, most}
for _, k in ipairs(old) do out[#out + 1] = k end
return out
`)

// P2-25 at rate: an answered unlock latch is deleted within 1 s, and 2 s
// after the load stops no latch remains but those of unanswered releases,
// with several Clients (each its own cleaner, queue and connections)
// unlocking on one master together, Lock+Unlock as fast as they can, each
// goroutine on a name of its own, for 3 s.
//
// The rate is 3 × the bench's peak (benchPeak). A test on the
// machine that measured the peak cannot drive it: the peak is what
// Lock+Unlock reaches when the bench process and redis-server share the
// CPUs (at 34 + 23 µs of CPU a cycle there, 2 CPUs run about 35,000
// cycles/s at most, and redis-server alone, at 23 µs a cycle, about
// 43,000), and -race multiplies the Go side's cost. The test drives
// what the machine gives and logs the rate it reached against 3 × the
// peak; the bounds are the issue's, whatever the rate.
//
// A latch's age is read from Redis: its PTTL against the life rlock gives
// it, max(60 s, 4 × (WatchdogTimeout + CommandTimeout)) (docs/safety.md).
// Every 100 ms the sampler reads every latch's PTTL in one script; a
// latch that lived past 1.1 s is seen older than 1 s. A latch fresher
// than that life fails the test too: the formula would then be wrong,
// and so every age.
func TestLatchRateSeveralClients(t *testing.T) {
	const (
		clients   = 8
		perClient = 8 // 64 goroutines in all, as the bench's throughput scenario
		load      = 3 * time.Second
		bound     = time.Second     // the issue's: an answered latch is deleted within it
		after     = 2 * time.Second // the issue's: no latch remains this long after the load
		period    = 100 * time.Millisecond
		pattern   = "redisson_unlock_latch:*"
	)
	srv := integrationRedis(t) // a server of its own: every latch on it is this test's
	rc := raw(t, srv)
	cfg := lock.Config{
		Addrs:           []string{srv.DirectAddr()}, // no proxy: the bench's path
		WatchdogTimeout: lock.DefaultWatchdogTimeout,
		CommandTimeout:  3 * time.Second,
	}
	life := max(time.Minute, 4*(cfg.WatchdogTimeout+cfg.CommandTimeout))
	prefix := name(t)

	var (
		cycles  atomic.Int64
		failed  atomic.Value
		mu      sync.Mutex
		suspect = map[string]time.Duration{} // names with an Unlock long enough for a send to have gone unanswered
	)
	ctx, cancel := context.WithTimeout(bg(), load+30*time.Second)
	defer cancel()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for ci := range clients {
		c := newClient(t, cfg, srv)
		for gi := range perClient {
			m := c.Mutex(fmt.Sprintf("%s:%d:%d", prefix, ci, gi))
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					h, err := m.Lock(ctx)
					if err != nil {
						failed.CompareAndSwap(nil, fmt.Errorf("Lock %s: %w", m.Name(), err))
						return
					}
					began := time.Now()
					err = h.Unlock(ctx)
					if d := time.Since(began); d >= cfg.CommandTimeout {
						// A send may have timed out unanswered: its latch
						// then rightly stays until it expires.
						mu.Lock()
						suspect[m.Name()] = d
						mu.Unlock()
					}
					if err != nil {
						failed.CompareAndSwap(nil, fmt.Errorf("Unlock %s: %w", m.Name(), err))
						return
					}
					cycles.Add(1)
				}
			})
		}
	}

	// sample reads every latch's age; it returns how many there were, the
	// oldest's age and the latches older than bound, by name of lock.
	below := (life - bound).Milliseconds()
	sample := func() (n int64, oldest time.Duration, old []string) {
		t.Helper()
		sctx, scancel := context.WithTimeout(bg(), 5*time.Second)
		defer scancel()
		v, err := latchAges.Exec(sctx, rc, nil, []string{pattern, fmt.Sprint(below)}).ToArray()
		must(t, err)
		n, err = v[0].AsInt64()
		must(t, err)
		least, err := v[1].AsInt64()
		must(t, err)
		most, err := v[2].AsInt64()
		must(t, err)
		if time.Duration(most)*time.Millisecond > life {
			t.Fatalf("a latch has PTTL %d ms, more than the %v life docs/safety.md gives it: the ages this test reads are wrong", most, life)
		}
		if least >= 0 {
			oldest = life - time.Duration(least)*time.Millisecond
		}
		for _, k := range v[3:] {
			s, err := k.ToString()
			must(t, err)
			old = append(old, s)
		}
		return n, oldest, old
	}
	// lockOf is the lock name in a latch's key,
	// redisson_unlock_latch:{name}:<id>.
	lockOf := func(latch string) string {
		s := strings.TrimPrefix(latch, "redisson_unlock_latch:{")
		if i := strings.LastIndex(s, "}:"); i >= 0 {
			return s[:i]
		}
		return s
	}
	isSuspect := func(latch string) bool {
		mu.Lock()
		defer mu.Unlock()
		_, ok := suspect[lockOf(latch)]
		return ok
	}

	var (
		samples, most int64
		oldest        time.Duration
		late          = map[string]bool{} // latches of answered releases seen older than bound
	)
	began := time.Now()
	tick := time.NewTicker(period)
	for time.Since(began) < load {
		<-tick.C
		n, age, old := sample()
		samples++
		most = max(most, n)
		oldest = max(oldest, age)
		for _, k := range old {
			if !isSuspect(k) {
				late[k] = true
			}
		}
	}
	tick.Stop()
	close(stop)
	wg.Wait()
	stopped := time.Now()
	if err, _ := failed.Load().(error); err != nil {
		t.Fatalf("a Lock+Unlock cycle failed: %v", err)
	}
	total := cycles.Load()
	rate := float64(total) / stopped.Sub(began).Seconds()
	t.Logf("%d Clients × %d goroutines: %d Lock+Unlock cycles in %v, %.0f/s: %.2f × the bench's peak (%d/s), %.0f%% of the issue's 3 × (%d/s)",
		clients, perClient, total, stopped.Sub(began).Round(time.Millisecond), rate, rate/benchPeak, benchPeak, 100*rate/(3*benchPeak), 3*benchPeak)
	t.Logf("%d samples every %v: at most %d latches in Redis at once, the oldest %v old", samples, period, most, oldest)
	mu.Lock()
	if len(suspect) > 0 {
		t.Logf("%d name(s) had an Unlock of CommandTimeout or longer (their latches may rightly stay): %v", len(suspect), suspect)
	}
	mu.Unlock()

	time.Sleep(time.Until(stopped.Add(after))) // the bound under test, not a synchronisation
	n, age, _ := sample()
	var left []string
	if n > 0 {
		ks, err := do(t, rc, "KEYS", pattern).AsStrSlice()
		must(t, err)
		for _, k := range ks {
			if !isSuspect(k) {
				left = append(left, k)
			}
		}
	}
	if len(late) > 0 {
		t.Errorf("during the load, %d latches of answered releases lived past %v (the oldest seen %v old), e.g. %v",
			len(late), bound, oldest, slices.Sorted(maps.Keys(late))[:1])
	}
	if len(left) > 0 {
		t.Errorf("%v after the load stopped, %d latches of answered releases are still in Redis (the oldest %v old), e.g. %v",
			after, len(left), age, left[:1])
	}
}
