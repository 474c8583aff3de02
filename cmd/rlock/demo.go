package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/observe"
)

const demoUsage = `rlock demo [--workers N] [--rounds N] [--seed S] [--trace stdout]

Needs nothing installed: starts embedded Redis servers (miniredis) in this
process, and runs workers — each with its own lock.Client per master, like
separate processes — that contend for one lock, in two sections.

One master: every acquisition takes a fencing token, re-enters the lock
once through held.Context() (hold count 2), works a few milliseconds and
releases.

RedLock: five masters, a quorum of three. Every acquisition takes a
fencing token on a majority, works and releases. Midway, the worker that
holds the lock kills one master and carries on; the later acquisitions
are granted by the four left.

Each section prints a timeline and a summary: acquisitions per worker,
overlaps seen (an in-process count of current holders; always 0), whether
the fencing tokens strictly increased and what woke the waiters. Exit 0,
or 1 if an invariant broke. --trace stdout prints the spans too.`

// Demo bounds.
const (
	demoMaxWorkers = 64
	demoMaxRounds  = 100
	demoTimeout    = 30 * time.Second // the whole demo, a safety net
	demoLockWait   = 10 * time.Second // one TryLock
	demoLockName   = "rlock-demo"
)

// demoOptions are demo's flags.
type demoOptions struct {
	workers int
	rounds  int
	seed    uint64
	trace   string

	observer *observe.Observer // every Client's, from startTracing
}

func newDemoFlags(o *demoOptions) *flag.FlagSet {
	fs := newFlagSet("demo")
	fs.IntVar(&o.workers, "workers", 4, fmt.Sprintf("workers contending for the lock (1 to %d)", demoMaxWorkers))
	fs.IntVar(&o.rounds, "rounds", 3, fmt.Sprintf("acquisitions per worker (1 to %d)", demoMaxRounds))
	fs.Uint64Var(&o.seed, "seed", 0, "seed of the work and pause durations (default: from the clock)")
	registerTrace(fs, &o.trace)
	return fs
}

// demoSection is one part of the demo: its own embedded masters, its own
// timeline and demoStats.
type demoSection struct {
	title string
	run   func(ctx context.Context, tl *timeline, o demoOptions, st *demoStats) error
}

var demoSections = []demoSection{
	{title: "one master: workers contend for lock " + demoLockName, run: singleMasterDemo},
	{title: fmt.Sprintf("RedLock on %d masters: workers contend, one master is killed midway", redLockMasters), run: redLockDemo},
}

// demoMain is "rlock demo".
func demoMain(args []string) error {
	var o demoOptions
	fs := newDemoFlags(&o)
	if err := parse(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return usagef("demo: unexpected argument %q", fs.Arg(0))
	case o.workers < 1 || o.workers > demoMaxWorkers:
		return usagef("demo: --workers %d: want 1 to %d", o.workers, demoMaxWorkers)
	case o.rounds < 1 || o.rounds > demoMaxRounds:
		return usagef("demo: --rounds %d: want 1 to %d", o.rounds, demoMaxRounds)
	}
	if err := checkTrace("demo", o.trace); err != nil {
		return err
	}
	if o.seed == 0 {
		o.seed = uint64(time.Now().UnixNano())
	}
	tr := startTracing(o.trace)
	defer tr.flush()
	o.observer = tr.observer
	ctx, cancel := context.WithTimeout(context.Background(), demoTimeout)
	defer cancel()

	fmt.Printf("rlock demo: %s, %s each, seed %d\n", plural(o.workers, "worker"), plural(o.rounds, "round"), o.seed)
	var failed []error
	for _, s := range demoSections {
		fmt.Printf("\n== %s ==\n", s.title)
		tl := newTimeline(os.Stdout)
		st := newDemoStats(o.workers)
		// One trace per section: its workers' spans are children of this.
		sctx, span := tr.start(ctx, "rlock demo: "+s.title)
		err := s.run(sctx, tl, o, st)
		st.print(os.Stdout, time.Since(tl.start))
		if err == nil {
			err = st.check()
		}
		endSpan(span, err, exitError)
		if err != nil {
			fmt.Printf("FAILED: %v\n", err)
			failed = append(failed, fmt.Errorf("demo %s: %w", s.title, err))
		}
	}
	if len(failed) > 0 {
		return exitWith(exitError, errors.Join(failed...))
	}
	return nil
}

// singleMasterDemo runs the workers against one embedded miniredis.
func singleMasterDemo(ctx context.Context, tl *timeline, o demoOptions, st *demoStats) error {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil { // listens on 127.0.0.1, a free port
		return fmt.Errorf("starting miniredis: %w", err)
	}
	defer mr.Close()
	tl.note("miniredis listening on %s", mr.Addr())

	obs := countWakeUps(o.observer, st)
	errs := make([]error, o.workers)
	var wg sync.WaitGroup
	for w := range o.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[w] = demoWorker(ctx, tl, st, o, w+1, lock.Config{
				Addrs:              []string{mr.Addr()},
				AlwaysRESP2:        true, // miniredis speaks RESP2 only
				ReplicaSyncTimeout: -1,   // miniredis has no replicas, nor ROLE to ask
				Observer:           obs,
			})
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// countWakeUps returns obs (tracing's, or nil) with its WakeUp also
// counting the wake-up in st.
func countWakeUps(obs *observe.Observer, st *demoStats) *observe.Observer {
	var o observe.Observer
	if obs != nil {
		o = *obs
	}
	next := o.WakeUp
	o.WakeUp = func(ctx context.Context, e observe.WakeUp) {
		st.wakeUp(e.Reason)
		if next != nil {
			next(ctx, e)
		}
	}
	return &o
}

// demoWorker is one worker: its own Client, rounds acquisitions of the
// lock, each re-entered once.
func demoWorker(ctx context.Context, tl *timeline, st *demoStats, o demoOptions, w int, cfg lock.Config) (err error) {
	c, err := lock.New(ctx, cfg)
	if err != nil {
		return fmt.Errorf("worker %d: %w", w, err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err = errors.Join(err, c.Close(cctx))
	}()
	m := c.Mutex(demoLockName)
	rng := rand.New(rand.NewPCG(o.seed, uint64(w)))
	for range o.rounds {
		if err := demoRound(ctx, tl, st, m, w, rng); err != nil {
			return fmt.Errorf("worker %d: %w", w, err)
		}
		// Time outside the lock, so that the others get a turn.
		time.Sleep(time.Duration(1+rng.IntN(4)) * time.Millisecond)
	}
	return nil
}

// demoRound is one acquisition: lock, re-enter, work, release twice.
func demoRound(ctx context.Context, tl *timeline, st *demoStats, m *lock.Mutex, w int, rng *rand.Rand) error {
	asked := time.Now()
	h, err := m.TryLock(ctx, lock.Wait(demoLockWait), lock.Fenced())
	if err != nil {
		return err
	}
	st.enter(w, h.Fence())
	tl.event(w, "acquired %v after asking, fence %d", round(time.Since(asked)), h.Fence())

	// Re-entry: the same owner, carried by the held context.
	h2, err := m.Lock(h.Context(), lock.Fenced())
	if err != nil {
		st.leave()
		return errors.Join(err, h.Unlock(context.WithoutCancel(ctx)))
	}
	n, err := m.HoldCount(h2.Context())
	if err == nil {
		st.reentered(h2.Fence(), n)
		tl.event(w, "re-entered through held.Context(): hold count %d, fence %d", n, h2.Fence())
		// The "work": what the lock protects.
		time.Sleep(time.Duration(2+rng.IntN(5)) * time.Millisecond)
	}
	err = errors.Join(err, h2.Unlock(ctx))
	n, herr := m.HoldCount(h.Context())
	err = errors.Join(err, herr)
	tl.event(w, "released the inner hold (hold count %d), then the lock", n)
	st.leave() // before the last Unlock: after it, another may hold
	return errors.Join(err, h.Unlock(ctx))
}

// timeline prints events with the time since it started.
type timeline struct {
	mu    sync.Mutex
	w     io.Writer
	start time.Time
}

func newTimeline(w io.Writer) *timeline { return &timeline{w: w, start: time.Now()} }

func (t *timeline) event(worker int, format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Fprintf(t.w, "%s  worker %-2d  %s\n", t.since(), worker, fmt.Sprintf(format, args...))
}

func (t *timeline) note(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Fprintf(t.w, "%s  %s\n", t.since(), fmt.Sprintf(format, args...))
}

// since renders the time since the start in milliseconds, aligned.
func (t *timeline) since() string {
	return fmt.Sprintf("%+9.1fms", float64(time.Since(t.start))/float64(time.Millisecond))
}

func round(d time.Duration) time.Duration { return d.Round(100 * time.Microsecond) }

// demoStats counts what the workers saw. The holder count is in-process:
// every worker is in this process, so it sees any overlap directly.
type demoStats struct {
	holders   atomic.Int64
	overlaps  atomic.Int64
	mu        sync.Mutex
	perWorker []int // acquisitions, by worker-1
	reentries int
	badCounts int      // re-entries whose hold count was not 2
	fences    []uint64 // every token, in the order taken under the lock
	wakes     map[observe.WakeReason]int
	notes     []string // section-specific summary lines
}

func newDemoStats(workers int) *demoStats {
	return &demoStats{perWorker: make([]int, workers), wakes: map[observe.WakeReason]int{}}
}

// enter records an acquisition by worker w with its fence, and returns
// how many acquisitions the section has seen, this one included.
func (s *demoStats) enter(w int, fence uint64) int {
	if s.holders.Add(1) > 1 {
		s.overlaps.Add(1)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.perWorker[w-1]++
	s.fences = append(s.fences, fence)
	total := 0
	for _, n := range s.perWorker {
		total += n
	}
	return total
}

// note adds a line to the summary.
func (s *demoStats) note(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notes = append(s.notes, fmt.Sprintf(format, args...))
}

func (s *demoStats) reentered(fence uint64, count int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reentries++
	if count != 2 {
		s.badCounts++
	}
	s.fences = append(s.fences, fence)
}

func (s *demoStats) leave() { s.holders.Add(-1) }

func (s *demoStats) wakeUp(r observe.WakeReason) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wakes[r]++
}

// increasing reports whether the fences strictly increased.
func (s *demoStats) increasing() bool {
	for i := 1; i < len(s.fences); i++ {
		if s.fences[i] <= s.fences[i-1] {
			return false
		}
	}
	return true
}

// check returns an error when an invariant broke.
func (s *demoStats) check() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	if n := s.overlaps.Load(); n > 0 {
		errs = append(errs, fmt.Errorf("%d overlapping holds", n))
	}
	if !s.increasing() {
		errs = append(errs, errors.New("fencing tokens did not strictly increase"))
	}
	if s.badCounts > 0 {
		errs = append(errs, fmt.Errorf("%d re-entries without hold count 2", s.badCounts))
	}
	return errors.Join(errs...)
}

// print writes the summary.
func (s *demoStats) print(w io.Writer, elapsed time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintln(w, "summary:")
	total := 0
	for i, n := range s.perWorker {
		fmt.Fprintf(w, "  worker %-2d %s\n", i+1, plural(n, "acquisition"))
		total += n
	}
	if s.reentries > 0 {
		fmt.Fprintf(w, "  acquisitions: %d, re-entries: %d (hold count 2: %d)\n", total, s.reentries, s.reentries-s.badCounts)
	} else {
		fmt.Fprintf(w, "  acquisitions: %d\n", total)
	}
	fmt.Fprintf(w, "  overlaps: %d\n", s.overlaps.Load())
	if len(s.fences) > 0 {
		verdict := "strictly increasing"
		if !s.increasing() {
			verdict = "NOT strictly increasing"
		}
		lo, hi := s.fences[0], s.fences[len(s.fences)-1]
		gaps := ""
		if hi-lo+1 != uint64(len(s.fences)) {
			gaps = "; numbers skipped by attempts that did not acquire (failed rounds, masters short of the quorum): only their order matters"
		}
		fmt.Fprintf(w, "  fencing tokens: %d taken, %s (%d to %d)%s\n", len(s.fences), verdict, lo, hi, gaps)
	}
	var wakes []string
	for _, r := range []observe.WakeReason{observe.WakeMessage, observe.WakeTimeout, observe.WakeReconnect, observe.WakeDelay} {
		if n := s.wakes[r]; n > 0 || r != observe.WakeDelay {
			wakes = append(wakes, fmt.Sprintf("%d by %s", n, r))
		}
	}
	explain := "no polling"
	if s.wakes[observe.WakeDelay] > 0 {
		explain += "; delay: a retry after a split vote"
	}
	fmt.Fprintf(w, "  waiters woken: %s (%s)\n", strings.Join(wakes, ", "), explain)
	for _, n := range s.notes {
		fmt.Fprintf(w, "  %s\n", n)
	}
	fmt.Fprintf(w, "  elapsed: %v\n", round(elapsed))
}

// plural is "1 round", "2 rounds".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
