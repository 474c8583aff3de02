package integration

import (
	"flag"
	"slices"
	"sync"
	"testing"
	"time"
)

// A test that bounds how long after its ctx ended a call returned measures
// the library only while the process runs: a machine that does not
// schedule the process for a while (a virtual machine whose host is busy
// was seen to freeze the processes on it for 100–600 ms, about twice a
// second, with nothing else running) delays every return by as much,
// whatever the library does. The stall meter measures that: on each CPU
// the process may use (at most maxMeters; each thread pinned to its CPU
// where the system allows) a goroutine sleeps stallTick again and again,
// and each time it wakes more than stallLate after it was due, the time
// from when it was due to when it woke is a stall of that CPU. [Stalled]
// counts only the time every CPU's meter was stalled at once: the process
// could run nowhere. A test then asserts its bound on the window less
// that, i.e. on the time the process could run: a library that returns at
// its ctx's end needs only a few milliseconds of it. A wait for something
// else (a CommandTimeout, a dial) of W is excused only when the process
// was frozen for all but bound of W: on a machine frozen that much, the
// test cannot tell the two apart (on that day's VM, 1 s windows were
// measured frozen 62–88 %; on CI's machines so far, stalls were rare).

const (
	// stallTick is how long a meter sleeps between looks.
	stallTick = 5 * time.Millisecond
	// stallLate is how late a wake-up must be to count as a stall: less
	// is ordinary timer and scheduling jitter.
	stallLate = 10 * time.Millisecond
	// stallKeep is how many stalls the meter remembers (the latest).
	stallKeep = 8192
	// maxMeters bounds the metering goroutines (and their wake-ups).
	maxMeters = 8
)

// stall is a span of time in which one CPU's meter (cpu, its index) did
// not run on schedule.
type stall struct {
	from, to time.Time
	cpu      int
}

// stallMeter is the process's stall meter; its fields are guarded by mu.
var stallMeter struct {
	mu     sync.Mutex
	stalls []stall
	looked []time.Time   // when each metered CPU's meter last woke (kept after it stops)
	stop   chan struct{} // nil when the meter is not running
	done   chan struct{}
}

// WatchStalls starts the stall meter, unless it runs already or the test
// binary runs benchmarks (-test.bench: the meter's wake-ups would be
// measured with them). [Main] starts it; [StopStalls] ends it.
func WatchStalls() {
	if benchmarking() {
		return
	}
	if startMeter() {
		// Every meter looks once before WatchStalls returns (1 s at
		// most): a meter not yet running when a stall comes would not see
		// it, and the intersection over CPUs would count nothing (seen on
		// a loaded machine in TestStallMeterSeesTheProcessStopped).
		awaitLooks(time.Now(), time.Second)
	}
}

// startMeter starts the meter's goroutines unless they run, and reports
// whether it did.
func startMeter() bool {
	m := &stallMeter
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stop != nil {
		return false
	}
	cpus := allowedCPUs()
	if len(cpus) > maxMeters {
		cpus = cpus[:maxMeters]
	}
	m.looked = make([]time.Time, len(cpus))
	m.stop, m.done = make(chan struct{}), make(chan struct{})
	go meterStalls(cpus, m.stop, m.done)
	return true
}

// StopStalls ends the stall meter and waits for its goroutines; what it
// measured stays readable.
func StopStalls() {
	m := &stallMeter
	m.mu.Lock()
	stop, done := m.stop, m.done
	m.stop, m.done = nil, nil
	m.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
}

// meterStalls is the meter's goroutine (WatchStalls starts it, StopStalls
// joins it): one metering goroutine per CPU of cpus.
func meterStalls(cpus []int, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	var wg sync.WaitGroup
	for i, cpu := range cpus {
		wg.Go(func() { meterCPU(i, cpu, stop) })
	}
	wg.Wait()
}

// meterCPU notes the stalls seen from cpu (meter i) until stop is closed.
// Its thread stays locked to it: the thread ends with the goroutine,
// pinned or not.
func meterCPU(i, cpu int, stop <-chan struct{}) {
	lockToCPU(cpu)
	t := time.NewTimer(stallTick)
	defer t.Stop()
	due := time.Now().Add(stallTick)
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		now := time.Now()
		m := &stallMeter
		m.mu.Lock()
		if now.Sub(due) > stallLate {
			if len(m.stalls) == stallKeep {
				m.stalls = append(m.stalls[:0], m.stalls[stallKeep/2:]...)
			}
			m.stalls = append(m.stalls, stall{from: due, to: now, cpu: i})
		}
		m.looked[i] = now
		m.mu.Unlock()
		due = now.Add(stallTick)
		t.Reset(stallTick)
	}
}

// span is a time interval.
type span struct{ from, to time.Time }

// Stalled returns how much of the window from..to every metered CPU was
// stalled at once (0 when the meter did not run then). A test asserting
// that a call returned within bound of its ctx's end asserts that the
// overrun less Stalled(end, returned) is within bound.
func Stalled(from, to time.Time) time.Duration {
	awaitLooks(to, lookWait)
	m := &stallMeter
	m.mu.Lock()
	per := make([][]span, len(m.looked))
	for _, s := range m.stalls {
		if s.cpu < len(per) {
			per[s.cpu] = append(per[s.cpu], span{s.from, s.to})
		}
	}
	m.mu.Unlock()
	if len(per) == 0 {
		return 0
	}
	all := []span{{from, to}}
	for _, spans := range per {
		all = intersect(all, union(spans))
	}
	var d time.Duration
	for _, s := range all {
		d += s.to.Sub(s.from)
	}
	return d
}

// LongestStall returns the longest single stall of any one metered CPU
// that overlaps the window from..to (0 when none, or when the meter did
// not run then). Unlike [Stalled] it counts a CPU alone: it tells whether
// the machine was seen to stall at all in the window, which is evidence,
// never an excuse for a bound (internal/retest uses it to decide whether
// a failed test may be run again). It sees the stalls of this process's
// CPUs only: a sentinel stopped while the CPUs ran (on its disk) is seen
// by its TILT instead ([StallMark]).
func LongestStall(from, to time.Time) time.Duration {
	awaitLooks(to, lookWait)
	m := &stallMeter
	m.mu.Lock()
	defer m.mu.Unlock()
	var d time.Duration
	for _, s := range m.stalls {
		if s.to.After(from) && s.from.Before(to) {
			d = max(d, s.to.Sub(s.from))
		}
	}
	return d
}

// TryStall is the stall of one CPU, seen during one try of a test that
// repeats a measurement ([Tries]), that lets the try be void; and
// internal/retest's default for running a failed test again.
const TryStall = 100 * time.Millisecond

// Tries runs try (k counts from 0) until it reports a measurement that
// was not void, at most n times; when all n were void, t fails: nothing
// was measured. A try is void when a stall of the process, not the
// library, explains its outcome ([LongestStall] of [TryStall] or more, or
// the test's own evidence); it asserts nothing then, and fails t itself
// otherwise.
func Tries(t testing.TB, n int, try func(k int) (void bool)) {
	t.Helper()
	for k := range n {
		if !try(k) {
			return
		}
		t.Logf("try %d void: measured again", k)
	}
	t.Errorf("%d tries void: nothing measured", n)
}

// VoidIfStalled is the verdict on one try of [Tries] that found err (nil:
// the try passed) since from: void, and logged, when a stall of
// [TryStall] or more was seen since from; otherwise the try counts, and t
// fails with err when there is one.
func VoidIfStalled(t testing.TB, from time.Time, err error) (void bool) {
	t.Helper()
	if err == nil {
		return false
	}
	if stall := LongestStall(from, time.Now()); stall >= TryStall {
		t.Logf("%v; void: a CPU stalled %v meanwhile", err, stall.Round(time.Millisecond))
		return true
	}
	t.Error(err)
	return false
}

// lookWait bounds awaitLooks.
const lookWait = 50 * time.Millisecond

// awaitLooks waits, d at most, until every running meter has woken after
// to: a stall is noted only when its meter wakes, so a stall that ended
// just before to (the process thawed, and the caller ran first) would
// otherwise not be counted yet.
func awaitLooks(to time.Time, d time.Duration) {
	deadline := time.Now().Add(d)
	for {
		m := &stallMeter
		m.mu.Lock()
		done := m.stop == nil
		if !done {
			done = true
			for _, l := range m.looked {
				done = done && !l.Before(to)
			}
		}
		m.mu.Unlock()
		if done || time.Now().After(deadline) {
			return
		}
		time.Sleep(time.Millisecond) // polled: the meters signal nothing
	}
}

// union returns spans merged into disjoint, sorted spans.
func union(spans []span) []span {
	slices.SortFunc(spans, func(a, b span) int { return a.from.Compare(b.from) })
	var out []span
	for _, s := range spans {
		if !s.to.After(s.from) {
			continue
		}
		if n := len(out); n > 0 && !s.from.After(out[n-1].to) {
			if s.to.After(out[n-1].to) {
				out[n-1].to = s.to
			}
			continue
		}
		out = append(out, s)
	}
	return out
}

// intersect returns the parts common to a and b, both disjoint and
// sorted, as disjoint, sorted spans.
func intersect(a, b []span) []span {
	var out []span
	for i, j := 0, 0; i < len(a) && j < len(b); {
		from, to := a[i].from, a[i].to
		if b[j].from.After(from) {
			from = b[j].from
		}
		if b[j].to.Before(to) {
			to = b[j].to
		}
		if to.After(from) {
			out = append(out, span{from, to})
		}
		if a[i].to.Before(b[j].to) {
			i++
		} else {
			j++
		}
	}
	return out
}

// benchmarking reports whether the test binary was asked to run
// benchmarks (-test.bench); it parses the command line, as a TestMain that
// needs its flags must.
func benchmarking() bool {
	if !flag.Parsed() {
		flag.Parse()
	}
	f := flag.Lookup("test.bench")
	return f != nil && f.Value.String() != ""
}

// firstCPUs returns 0..n-1.
func firstCPUs(n int) []int {
	cpus := make([]int, n)
	for i := range cpus {
		cpus[i] = i
	}
	return cpus
}
