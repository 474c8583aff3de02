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

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/lock"
)

// Issue 29, stage 4, P2-25 at rate: "An answered latch is deleted within
// 1 s at up to 3 × the bench's peak rate; 2 s after load stops no latch
// remains but those of unanswered releases."

// benchPeak is the highest rate of rlock's Lock+Unlock the bench has
// reported (bench/throughput.go, 64 goroutines on one Client): 38,972
// cycles/s in the second of session 28's three complete runs
// (docs/benchmarks.md; before them, 38,716/s in session 27's, 38,255/s
// in session 26's, and 30,437/s). The issue asks for 3 × the peak,
// 116,916/s.
const benchPeak = 38972

const (
	latchBound  = time.Second     // the issue's: an answered latch is deleted within it
	latchAfter  = 2 * time.Second // the issue's: no latch remains this long after the load
	latchPeriod = 100 * time.Millisecond
	latchKeys   = "redisson_unlock_latch:*"
)

// latchAges is run by Redis, so that a sample is one instant of the
// server's clock and moves no key list over the wire: it counts the
// latches matching ARGV[1] and returns {count, least PTTL, greatest
// PTTL, then every latch whose PTTL is below ARGV[2], each followed by
// its PTTL} (ms; -1 when there are none).
var latchAges = rueidis.NewLuaScript(`
local ks = redis.call('keys', ARGV[1])
local least, most, below = -1, -1, tonumber(ARGV[2])
local old = {}
for _, k in ipairs(ks) do
  local p = redis.call('pttl', k)
  if p >= 0 then
    if least < 0 or p < least then least = p end
    if p > most then most = p end
    if p < below then
      old[#old + 1] = k
      old[#old + 1] = p
    end
  end
end
local out = {#ks, least, most}
for _, v in ipairs(old) do out[#out + 1] = v end
return out
`)

// A latchWatch reads the age of every unlock latch on a server of the
// test's own, every latchPeriod while a load runs, then once latchAfter
// after it stopped. A latch's age is its life (the PX it was written
// with) less its PTTL, on Redis's clock; a latch that lived past
// latchBound + latchPeriod is seen older than latchBound. A latch fresher
// than life fails the test too: every age read would be wrong.
//
// The bounds count the latch's life less the time every CPU's stall
// meter was seen stalled at once during it (integration.Stalled), in
// which this test process, its cleaners included, could not run: a machine that stops every process for
// up to 600 ms, as session 23's VM did about twice a second, would
// otherwise fail the bound by its own pause, while a cleaner that is
// late by itself is seen late net of any pause.
type latchWatch struct {
	t      *testing.T
	rc     rueidis.Client
	life   time.Duration
	exempt func(latch string) bool // a latch that may rightly stay (an unanswered release's)

	samples, most int64
	oldest        time.Duration
	late          map[string]bool // latches seen older than latchBound, net of the machine's freezes
	excused       int             // looks that saw a latch older than latchBound only by a freeze
}

func newLatchWatch(t *testing.T, rc rueidis.Client, life time.Duration) *latchWatch {
	return &latchWatch{t: t, rc: rc, life: life, exempt: func(string) bool { return false }, late: map[string]bool{}}
}

// oldLatch is a latch seen older than latchBound, and its age then.
type oldLatch struct {
	key string
	age time.Duration
}

// lateNet reports whether a latch seen older than latchBound (sample
// returns no other) at the instant at lived past it by more than the
// machine was frozen during its life.
func (w *latchWatch) lateNet(l oldLatch, at time.Time) bool {
	if l.age-integration.Stalled(at.Add(-l.age), at) > latchBound {
		return true
	}
	w.excused++
	return false
}

// sample returns how many latches there are, the oldest one's age, and
// those older than latchBound with their ages.
func (w *latchWatch) sample() (n int64, oldest time.Duration, old []oldLatch) {
	t := w.t
	t.Helper()
	ctx, cancel := context.WithTimeout(bg(), 5*time.Second)
	defer cancel()
	below := (w.life - latchBound).Milliseconds()
	v, err := latchAges.Exec(ctx, w.rc, nil, []string{latchKeys, fmt.Sprint(below)}).ToArray()
	must(t, err)
	n, err = v[0].AsInt64()
	must(t, err)
	least, err := v[1].AsInt64()
	must(t, err)
	most, err := v[2].AsInt64()
	must(t, err)
	if time.Duration(most)*time.Millisecond > w.life {
		t.Fatalf("a latch has PTTL %d ms, more than the %v life it was given: the ages this test reads are wrong", most, w.life)
	}
	if least >= 0 {
		oldest = w.life - time.Duration(least)*time.Millisecond
	}
	for i := 3; i+1 < len(v); i += 2 {
		k, err := v[i].ToString()
		must(t, err)
		p, err := v[i+1].AsInt64()
		must(t, err)
		old = append(old, oldLatch{k, w.life - time.Duration(p)*time.Millisecond})
	}
	return n, oldest, old
}

// during samples every latchPeriod until running reports false.
func (w *latchWatch) during(running func() bool) {
	tick := time.NewTicker(latchPeriod)
	defer tick.Stop()
	for running() {
		<-tick.C
		// Before the sample's instant: a stall while its answer travels
		// is not counted as the latches' life.
		at := time.Now()
		n, age, old := w.sample()
		w.samples++
		w.most = max(w.most, n)
		w.oldest = max(w.oldest, age)
		for _, l := range old {
			if !w.exempt(l.key) && w.lateNet(l, at) {
				w.late[l.key] = true
			}
		}
	}
}

// check logs what the samples saw, waits until latchAfter after stopped
// (the bound under test, not a synchronisation) and fails the test if a
// latch lived past latchBound during the load or one is left then.
func (w *latchWatch) check(stopped time.Time) {
	t := w.t
	t.Helper()
	if w.samples > 0 {
		t.Logf("%d samples every %v: at most %d latches in Redis at once, the oldest %v old", w.samples, latchPeriod, w.most, w.oldest)
	}
	if w.excused > 0 {
		t.Logf("%d looks saw a latch older than %v only by the time the machine was frozen during its life", w.excused, latchBound)
	}
	time.Sleep(time.Until(stopped.Add(latchAfter)))
	// The machine frozen meanwhile gave the cleaners less than
	// latchAfter: wait that much longer (a bound, not a
	// synchronisation), once.
	if frozen := integration.Stalled(stopped, time.Now()); frozen > 0 {
		t.Logf("the machine was frozen %v of the %v after the load: looking that much later", frozen.Round(time.Millisecond), latchAfter)
		time.Sleep(frozen)
	}
	n, age, _ := w.sample()
	var left []string
	if n > 0 {
		ks, err := do(t, w.rc, "KEYS", latchKeys).AsStrSlice()
		must(t, err)
		for _, k := range ks {
			if !w.exempt(k) {
				left = append(left, k)
			}
		}
	}
	if len(w.late) > 0 {
		t.Errorf("during the load, %d latches of answered releases lived past %v (the oldest seen %v old), e.g. %v",
			len(w.late), latchBound, w.oldest, slices.Sorted(maps.Keys(w.late))[:1])
	}
	if len(left) > 0 {
		t.Errorf("%v after the load stopped, %d latches of answered releases are still in Redis (the oldest %v old), e.g. %v",
			latchAfter, len(left), age, left[:1])
	}
}

// latchLock is the lock name in a latch's key,
// redisson_unlock_latch:{name}:<id>.
func latchLock(latch string) string {
	s := strings.TrimPrefix(latch, "redisson_unlock_latch:{")
	if i := strings.LastIndex(s, "}:"); i >= 0 {
		return s[:i]
	}
	return s
}

// Several Clients (each its own cleaner, queue and connections) on one
// master, Lock+Unlock as fast as they can, each goroutine on a name of
// its own, for 3 s; every latch's age is read every 100 ms.
//
// A test on the machine that measured benchPeak cannot drive 3 × it
// this way: the peak is what Lock+Unlock reaches when the bench process
// and redis-server share the CPUs (at the 30 + 22 µs of CPU a cycle
// docs/benchmarks.md reports, 2 CPUs run about 38,000 cycles/s at most,
// and redis-server alone about 46,000), and -race multiplies the Go
// side's cost. This test drives what the machine gives and logs the rate
// against 3 × the peak; TestLatchCleanerAtThreeTimesPeak feeds the
// cleaners at 3 × the peak. The bounds are the issue's, whatever the
// rate.
func TestLatchRateSeveralClients(t *testing.T) {
	const (
		clients   = 8
		perClient = 8 // 64 goroutines in all, as the bench's throughput scenario
		load      = 3 * time.Second
	)
	srv := integrationRedis(t) // a server of its own: every latch on it is this test's
	rc := raw(t, srv)
	cfg := lock.Config{
		Addrs:           []string{srv.DirectAddr()}, // no proxy: the bench's path
		WatchdogTimeout: lock.DefaultWatchdogTimeout,
		CommandTimeout:  3 * time.Second,
	}
	// The life docs/safety.md gives a latch.
	w := newLatchWatch(t, rc, max(time.Minute, 4*(cfg.WatchdogTimeout+cfg.CommandTimeout)))
	prefix := name(t)

	var (
		cycles  atomic.Int64
		failed  atomic.Value
		mu      sync.Mutex
		suspect = map[string]time.Duration{} // names with a Lock or Unlock long enough for a send to have gone unanswered
	)
	w.exempt = func(latch string) bool {
		mu.Lock()
		defer mu.Unlock()
		_, ok := suspect[latchLock(latch)]
		return ok
	}
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
					began := time.Now()
					h, err := m.Lock(ctx)
					if d := time.Since(began); d >= cfg.CommandTimeout {
						// A send may have timed out unanswered: the
						// acquire, answered on a second send, then leaves
						// its fence record (hold.fence) until it expires.
						mu.Lock()
						suspect[m.Name()] = d
						mu.Unlock()
					}
					if err != nil {
						failed.CompareAndSwap(nil, fmt.Errorf("Lock %s: %w", m.Name(), err))
						return
					}
					began = time.Now()
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

	began := time.Now()
	w.during(func() bool { return time.Since(began) < load })
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
	mu.Lock()
	if len(suspect) > 0 {
		t.Logf("%d name(s) had a Lock or Unlock of CommandTimeout or longer (their latches may rightly stay): %v", len(suspect), suspect)
	}
	mu.Unlock()
	w.check(stopped)
}

// One Client's cleaner at 3 × the bench's Lock+Unlock peak (116,148
// latches a second), which no Lock+Unlock on this machine reaches: the
// test measures the peak here for the log (as the bench does, in small),
// then hands the Client's cleaner latches at 3 × benchPeak, as answered
// releases hand them (lock.QueueLatch, once the latch is in Redis), for
// 3 s. Each latch is written as the release script writes it (SET PX, the
// Client's life for it) by a pipelined client, in batches paced to the
// rate, and queued once its SET is answered, as a release's once its reply
// is. What is measured is the cleaner's part alone. When the feeder falls
// short of the rate (under -race, the Go side is several times slower),
// the bounds are checked at the rate it reached, which the log gives.
//
// A sample here is not every latch's PTTL (KEYS over tens of thousands
// of latches, ten times a second, would be most of Redis's work): each
// batch is looked up by one EXISTS of all its latches 1 s after it was
// queued, so a latch alive then lived past 1 s of its queueing, and
// queueing follows the latch's write.
//
// Before the cleaner woke on a quarter-full queue (latchWake), it slept
// 200 ms after a first latch whatever came meanwhile, and its queue
// (16,384) overflowed: 80,775 of 274,570 latches were still in Redis 1 s
// after they were queued, and 2 s after the load (docs/safety.md, P2-25).
func TestLatchCleanerAtThreeTimesPeak(t *testing.T) {
	const (
		clients = 1
		load    = 3 * time.Second
		tick    = 5 * time.Millisecond // the feeders' pace
		most    = 4096                 // the most latches one feeder writes in a round trip
	)
	srv := integrationRedis(t)
	rc := raw(t, srv)
	cfg := lock.Config{Addrs: []string{srv.DirectAddr()}}
	cs := make([]*lock.Client, clients)
	for i := range cs {
		cs[i] = newClient(t, cfg, srv)
	}
	life := lock.RecordTTL(cs[0])
	prefix := name(t)
	// The peak here and now: the bench's throughput scenario in small,
	// in this build (-race costs the Go side several times) on this
	// machine as loaded as it is. The target is 3 × it, and at most
	// 3 × benchPeak, the rate.
	peak := lockUnlockRate(t, cs[0], prefix+":peak", 64, time.Second)
	target := float64(3 * benchPeak)
	t.Logf("Lock+Unlock peak here (1 Client, 64 goroutines, 1 s): %.0f/s; the bench's %d/s", peak, benchPeak)

	type batch struct {
		queued time.Time
		keys   []string
	}
	// Room for every batch: a feeder never waits for the checks.
	batches := make(chan batch, clients*int(load/tick+1))
	var (
		fed    atomic.Int64
		failed atomic.Value
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	began := time.Now()
	for ci, c := range cs {
		feeder := integration.NewClient(t, srv.DirectAddr())
		wg.Go(func() {
			each := target / clients
			var sent int
			tk := time.NewTicker(tick)
			defer tk.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tk.C:
				}
				due := min(int(each*time.Since(began).Seconds())-sent, most)
				if due <= 0 {
					continue
				}
				names, ids, keys := make([]string, due), make([]string, due), make([]string, due)
				cmds := make(rueidis.Commands, due)
				for i := range due {
					names[i] = fmt.Sprintf("%s:%d:%d", prefix, ci, (sent+i)%64)
					ids[i] = fmt.Sprintf("%032x", sent+i)
					// The key reentrant.LatchName makes, the value and PX
					// release.lua writes.
					keys[i] = "redisson_unlock_latch:{" + names[i] + "}:" + ids[i]
					cmds[i] = feeder.B().Set().Key(keys[i]).Value("1").Px(life).Build()
				}
				for i, r := range feeder.DoMulti(bg(), cmds...) {
					if err := r.Error(); err != nil {
						failed.CompareAndSwap(nil, err)
						return
					}
					lock.QueueLatch(c, names[i], ids[i])
				}
				batches <- batch{time.Now(), keys}
				sent += due
				fed.Add(int64(due))
			}
		})
	}
	var stopped time.Time
	go func() {
		time.Sleep(load) // the load's length
		close(stop)
		wg.Wait()
		stopped = time.Now()
		close(batches)
	}()
	var checked, late, worstBatch int64
	var lag time.Duration // how far behind its 1 s the latest check ran
	for b := range batches {
		time.Sleep(time.Until(b.queued.Add(latchBound))) // the bound under test
		lag = max(lag, time.Since(b.queued)-latchBound)
		n, err := do(t, rc, append([]string{"EXISTS"}, b.keys...)...).AsInt64()
		must(t, err)
		checked += int64(len(b.keys))
		late += n
		worstBatch = max(worstBatch, n)
	}
	if err, _ := failed.Load().(error); err != nil {
		t.Fatalf("writing a latch: %v", err)
	}
	total := fed.Load()
	rate := float64(total) / stopped.Sub(began).Seconds()
	t.Logf("%d Client's cleaner handed %d latches in %v: %.0f/s (target %.0f/s), %.2f × the peak here, %.2f × the bench's",
		clients, total, stopped.Sub(began).Round(time.Millisecond), rate, target, rate/peak, rate/benchPeak)
	if rate < 0.9*target {
		t.Logf("the feeders fell short of the target on this machine now: the bounds were checked at %.0f/s", rate)
	}
	// A look that ran late (the machine busy) proves less: a latch gone
	// by then may have lived up to latchBound + lag.
	t.Logf("%d latches looked up %v after they were queued (the looks at most %v late): %d still there", checked, latchBound, lag.Round(time.Millisecond), late)
	w := newLatchWatch(t, rc, life)
	if late > 0 {
		t.Errorf("%d of %d answered latches were still in Redis %v after they were queued (up to %d of one batch)", late, checked, latchBound, worstBatch)
	}
	w.check(stopped)
}

// lockUnlockRate runs Lock+Unlock on c in g goroutines, each on a name of
// its own, for d, and returns the cycles a second.
func lockUnlockRate(t *testing.T, c *lock.Client, prefix string, g int, d time.Duration) float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg(), d+30*time.Second)
	defer cancel()
	var cycles atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	began := time.Now()
	for i := range g {
		m := c.Mutex(fmt.Sprintf("%s:%d", prefix, i))
		wg.Go(func() {
			for time.Since(began) < d {
				h, err := m.Lock(ctx)
				if err == nil {
					err = h.Unlock(ctx)
				}
				if err != nil {
					failed.CompareAndSwap(nil, err)
					return
				}
				cycles.Add(1)
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		t.Fatalf("Lock+Unlock: %v", err)
	}
	return float64(cycles.Load()) / time.Since(began).Seconds()
}
