package integration

import (
	"flag"
	"runtime"
	"slices"
	"sync"
	"time"
)

// A test that bounds how long after its ctx ended a call returned measures
// the library only while the process runs: a machine that does not
// schedule the process for a while (a virtual machine whose host is busy
// was seen to freeze the processes on it for 100–600 ms, about twice a
// second, with nothing else running; sometimes one virtual CPU only)
// delays every return by as much, whatever the library does. The stall
// meter measures that: on each CPU (its thread pinned there where the
// system allows) a goroutine sleeps stallTick again and again, and each
// time it wakes more than stallLate after it was due, the time from when
// it was due to when it woke is a stall: a goroutine on that CPU did not
// run on schedule then. [Stalled] tells how much of a window was stalled
// on some CPU, so that a test can assert its bound on the rest. A library
// that waits for something other than the ctx (a CommandTimeout, a dial)
// is not excused: the meter wakes on time then.

const (
	// stallTick is how long the meter sleeps between looks.
	stallTick = 5 * time.Millisecond
	// stallLate is how late a wake-up must be to count as a stall: less
	// is ordinary timer and scheduling jitter.
	stallLate = 10 * time.Millisecond
	// stallKeep is how many stalls the meter remembers (the latest).
	stallKeep = 4096
)

// stall is a span of time in which the process was not run on schedule.
type stall struct{ from, to time.Time }

// stallMeter is the process's stall meter; its fields are guarded by mu.
var stallMeter struct {
	mu     sync.Mutex
	stalls []stall
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
	m := &stallMeter
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stop != nil {
		return
	}
	m.stop, m.done = make(chan struct{}), make(chan struct{})
	go meterStalls(m.stop, m.done)
}

// StopStalls ends the stall meter and waits for its goroutine; what it
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
// joins it): one metering goroutine per CPU.
func meterStalls(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	var wg sync.WaitGroup
	for cpu := range runtime.NumCPU() {
		wg.Go(func() { meterCPU(cpu, stop) })
	}
	wg.Wait()
}

// meterCPU notes the stalls seen from cpu until stop is closed. Its thread
// stays locked to it: the thread ends with the goroutine, pinned or not.
func meterCPU(cpu int, stop <-chan struct{}) {
	runtime.LockOSThread()
	pinThread(cpu)
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
		if now.Sub(due) > stallLate {
			m := &stallMeter
			m.mu.Lock()
			if len(m.stalls) == stallKeep {
				m.stalls = append(m.stalls[:0], m.stalls[stallKeep/2:]...)
			}
			m.stalls = append(m.stalls, stall{from: due, to: now})
			m.mu.Unlock()
		}
		due = now.Add(stallTick)
		t.Reset(stallTick)
	}
}

// Stalled returns how much of the window from..to the stall meter saw a
// CPU stalled (0 when the meter did not run then); stalls of two CPUs at
// once count once. A test asserting that a call returned within bound of
// its ctx's end asserts that the overrun less Stalled(end, returned) is
// within bound.
func Stalled(from, to time.Time) time.Duration {
	m := &stallMeter
	m.mu.Lock()
	var in []stall
	for _, s := range m.stalls {
		if s.from.Before(from) {
			s.from = from
		}
		if s.to.After(to) {
			s.to = to
		}
		if s.to.After(s.from) {
			in = append(in, s)
		}
	}
	m.mu.Unlock()
	slices.SortFunc(in, func(a, b stall) int { return a.from.Compare(b.from) })
	var d time.Duration
	var end time.Time // of the stalls counted so far
	for _, s := range in {
		if s.from.Before(end) {
			s.from = end
		}
		if s.to.After(s.from) {
			d += s.to.Sub(s.from)
			end = s.to
		}
	}
	return d
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
