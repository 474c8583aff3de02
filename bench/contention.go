package main

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// Scenario 3: contention. 16 contenders loop on one key: Lock, hold 1 ms,
// Unlock. Each contender has its own client, as separate services would,
// except in the "1 client" rows where they share one.

type contentionResult struct {
	Contenders int
	Hold       time.Duration // the hold asked for
	Window     time.Duration // per row
	RTT        summary       // PING, on the same server, before the rows
	Rows       []contentionRow
}

type contentionRow struct {
	Name         string
	Polls        bool
	Acquisitions int64
	PerSec       float64
	MeanHold     time.Duration // measured: the sleep overshoots
	Ideal        float64       // 1 / (mean hold + 2 RTT)
	Efficiency   float64       // PerSec / Ideal
	Wait         summary
	MinShare     int64 // fewest acquisitions by one contender
	MaxShare     int64
	MaxMin       float64 // MaxShare / MinShare; +Inf if one starved
	// Overtook is the share of acquisitions granted before a waiter that
	// had called Lock more than overtakeSlack earlier was (FIFO kept: 0).
	Overtook    float64
	CommandsAcq float64 // Redis commands per acquisition (INFO commandstats, script internals included)
	RequestsAcq float64 // requests sent per acquisition (counted in the clients; a script call is one)
	TopCommands string  // the largest commandstats entries, per acquisition

	waits samples
}

// overtakeSlack is how much earlier a waiter must have called Lock for a
// later caller's grant to count as overtaking it: calls closer than that
// may reach Redis in either order.
const overtakeSlack = time.Millisecond

// grant is one acquisition: when its Lock was called and when it returned.
type grant struct{ called, got time.Time }

// overtook returns the share of gs granted while a waiter that called
// Lock more than overtakeSlack earlier was still waiting (it was granted
// later).
func overtook(gs []grant) float64 {
	if len(gs) == 0 {
		return 0
	}
	slices.SortFunc(gs, func(a, b grant) int { return a.got.Compare(b.got) })
	n := 0
	var earliest time.Time // earliest call among the grants after the current one
	for i := len(gs) - 1; i >= 0; i-- {
		if !earliest.IsZero() && earliest.Add(overtakeSlack).Before(gs[i].called) {
			n++
		}
		if earliest.IsZero() || gs[i].called.Before(earliest) {
			earliest = gs[i].called
		}
	}
	return float64(n) / float64(len(gs))
}

type contentionCase struct {
	lib    library
	shared bool // all contenders on one locker
}

func (c contentionCase) name() string {
	if c.shared {
		return c.lib.name + " (1 client)"
	}
	return c.lib.name
}

func runContention(ctx context.Context, p params) (*contentionResult, error) {
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
	rtt, err := pingRTT(ctx, addr, 2000)
	if err != nil {
		return nil, err
	}
	r := &contentionResult{Contenders: p.contenders, Hold: p.hold, Window: p.contentionWindow, RTT: summarize(rtt)}
	cases := []contentionCase{
		{lib: libRlock}, {lib: libRlock, shared: true}, {lib: libPoll}, {lib: libSpin}, {lib: libFair}, {lib: libRW},
		{lib: libRedsync}, {lib: libRedislock},
		{lib: libRueidislock}, {lib: libRueidislock, shared: true},
	}
	for _, c := range cases {
		row, err := contend(ctx, p, addr, adm, c, r.RTT.P50)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.name(), err)
		}
		logf("  %-22s %6.0f acq/s (%.2f of ideal)  wait p50 %v p99 %v  max/min %.2f  requests/acq %.1f  commands/acq %.1f",
			row.Name, row.PerSec, row.Efficiency, row.Wait.P50, row.Wait.P99, row.MaxMin, row.RequestsAcq, row.CommandsAcq)
		r.Rows = append(r.Rows, *row)
	}
	return r, nil
}

func contend(ctx context.Context, p params, addr string, adm rueidis.Client, c contentionCase, rtt time.Duration) (*contentionRow, error) {
	var requests atomic.Int64
	lockers := make([]locker, p.contenders)
	for i := range lockers {
		if c.shared && i > 0 {
			lockers[i] = lockers[0]
			continue
		}
		l, err := c.lib.open(ctx, addr, openOpts{requests: &requests})
		if err != nil {
			return nil, err
		}
		defer l.Close()
		lockers[i] = l
	}
	key := "bench:contention:" + strings.ReplaceAll(c.name(), " ", "")
	for _, l := range lockers { // warm up: connect, load scripts, subscribe once
		unlock, _, err := lockBounded(ctx, l, key, "3. contention warm-up: "+c.name())
		if err != nil {
			return nil, err
		}
		if err := unlock(ctx); err != nil {
			return nil, err
		}
	}
	if err := resetStats(ctx, adm); err != nil {
		return nil, err
	}
	requests.Store(0)

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		waits  samples
		holds  time.Duration
		first  error
		grants []grant
	)
	counts := make([]int64, p.contenders)
	start := time.Now()
	end := start.Add(p.contentionWindow)
	for i, l := range lockers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var local samples
			var held time.Duration
			var mine []grant
			for time.Now().Before(end) {
				t := time.Now()
				unlock, err := l.Lock(runCtx, key)
				if err != nil {
					if runCtx.Err() == nil {
						mu.Lock()
						first = cmp.Or(first, err)
						mu.Unlock()
					}
					break
				}
				got := time.Now()
				time.Sleep(p.hold)
				released := time.Now()
				if err := unlock(context.Background()); err != nil {
					mu.Lock()
					first = cmp.Or(first, err)
					mu.Unlock()
					break
				}
				if got.Before(end) {
					counts[i]++
					mine = append(mine, grant{called: t, got: got})
					local = append(local, got.Sub(t))
					held += released.Sub(got)
				}
			}
			mu.Lock()
			waits = append(waits, local...)
			grants = append(grants, mine...)
			holds += held
			mu.Unlock()
		}()
	}
	time.Sleep(time.Until(end))
	stop() // waiters still asleep give up; their waits are not counted
	wg.Wait()
	if first != nil {
		return nil, first
	}
	stats, err := commandStats(ctx, adm)
	if err != nil {
		return nil, err
	}

	row := &contentionRow{Name: c.name(), Polls: c.lib.polls}
	for _, n := range counts {
		row.Acquisitions += n
	}
	if row.Acquisitions == 0 {
		return nil, fmt.Errorf("no acquisition in %v", p.contentionWindow)
	}
	acq := float64(row.Acquisitions)
	row.PerSec = acq / p.contentionWindow.Seconds()
	row.MeanHold = holds / time.Duration(row.Acquisitions)
	row.Ideal = 1 / (row.MeanHold + 2*rtt).Seconds()
	row.Efficiency = row.PerSec / row.Ideal
	row.waits = waits.sorted()
	row.Wait = summarize(row.waits)
	row.MinShare, row.MaxShare = slices.Min(counts), slices.Max(counts)
	row.Overtook = overtook(grants)
	row.MaxMin = math.Inf(1)
	if row.MinShare > 0 {
		row.MaxMin = float64(row.MaxShare) / float64(row.MinShare)
	}
	var total int64
	type kv struct {
		k string
		v int64
	}
	var all []kv
	for k, v := range stats {
		total += v
		all = append(all, kv{k, v})
	}
	slices.SortFunc(all, func(a, b kv) int { return cmp.Or(cmp.Compare(b.v, a.v), strings.Compare(a.k, b.k)) })
	var top []string
	for _, e := range all[:min(len(all), 4)] {
		top = append(top, fmt.Sprintf("%s %.1f", e.k, float64(e.v)/acq))
	}
	row.TopCommands = strings.Join(top, ", ")
	row.CommandsAcq = float64(total) / acq
	row.RequestsAcq = float64(requests.Load()) / acq
	return row, nil
}

func (r *contentionResult) check() error {
	if r.RTT.P50 <= 0 || len(r.Rows) == 0 {
		return fmt.Errorf("contention: no rows")
	}
	for _, row := range r.Rows {
		if row.Acquisitions == 0 || !(row.CommandsAcq > 0) || !(row.RequestsAcq > 0) || row.Wait.N == 0 {
			return fmt.Errorf("contention: %s produced no numbers", row.Name)
		}
	}
	return nil
}
