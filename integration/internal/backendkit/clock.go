package backendkit

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// libfaketime makes a process's clock run fast or slow. It is preloaded into
// redis-server with a spec file of the form "+<offset seconds> x<rate>",
// which it re-reads on every clock call (FAKETIME_NO_CACHE=1); so rewriting
// the file changes the rate of a running server. libfaketime computes
// fake = S + (real-S)*rate + offset, where S is the real time at which the
// process started, for CLOCK_REALTIME and CLOCK_MONOTONIC alike; that is
// the formula Clock inverts to keep the fake time continuous.
//
// Debian's redis-server is linked against libjemalloc, which deadlocks with
// libfaketime at start-up (jemalloc's initialisation calls clock_gettime,
// libfaketime's calls malloc; libfaketime issue #130). glibc's
// libc_malloc_debug.so.0 is preloaded first so that malloc resolves to
// glibc's allocator and the cycle never forms. The server works as usual;
// only INFO memory's allocator_* fields then describe an idle jemalloc.
var (
	LibfaketimePaths = []string{
		"/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
		"/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
		"/usr/lib/faketime/libfaketime.so.1",
		"/usr/local/lib/faketime/libfaketime.so.1",
	}
	MallocDebugPaths = []string{
		"/lib/x86_64-linux-gnu/libc_malloc_debug.so.0",
		"/usr/lib/x86_64-linux-gnu/libc_malloc_debug.so.0",
		"/lib/aarch64-linux-gnu/libc_malloc_debug.so.0",
		"/usr/lib/aarch64-linux-gnu/libc_malloc_debug.so.0",
		"/lib64/libc_malloc_debug.so.0",
	}
)

// firstFile returns the first of paths that exists, or "".
func firstFile(paths []string) string {
	for _, p := range paths {
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	return ""
}

// Clock is the fake time of one server, as a function of real time:
// fake(t) = anchorFake + (t - anchorReal) * rate. It outlives processes, so
// the fake time also runs on while the server is down.
type Clock struct {
	spec       string // the spec file libfaketime reads
	preload    string // LD_PRELOAD value
	anchorReal time.Time
	anchorFake time.Time
	rate       float64
	procStart  time.Time // S of the current process, estimated
	calibrated bool      // procStart was measured through the server
}

// NewClock prepares a clock in dir starting at real time with rate, for a
// server of backend b (named in the error when libfaketime is missing).
func NewClock(dir string, rate float64, b string) (*Clock, error) {
	lib := os.Getenv("RLOCK_LIBFAKETIME")
	if lib == "" {
		lib = firstFile(LibfaketimePaths)
	}
	if lib == "" {
		return nil, Unavailable(b, "ClockRate needs libfaketime (Debian package faketime) or RLOCK_LIBFAKETIME")
	}
	preload := lib
	if md := firstFile(MallocDebugPaths); md != "" {
		preload = md + " " + lib
	}
	now := time.Now()
	c := &Clock{
		spec:       filepath.Join(dir, "faketime.rc"),
		preload:    preload,
		anchorReal: now,
		anchorFake: now,
		rate:       rate,
		procStart:  now,
	}
	return c, c.write()
}

// Env is what a process needs in its environment to run on this clock.
func (c *Clock) Env() []string { return c.EnvAt(c.spec) }

// EnvAt is Env for a process that sees the spec file at spec, as a
// container does through its mount.
func (c *Clock) EnvAt(spec string) []string {
	return []string{
		"LD_PRELOAD=" + c.preload,
		"FAKETIME_TIMESTAMP_FILE=" + spec,
		"FAKETIME_NO_CACHE=1",
	}
}

// at is the fake time at real time t.
func (c *Clock) at(t time.Time) time.Time {
	d := float64(t.Sub(c.anchorReal)) * c.rate
	return c.anchorFake.Add(time.Duration(d))
}

// Started records the real time a new process started and rewrites the
// spec for it.
func (c *Clock) Started(t time.Time) error {
	c.procStart = t
	c.calibrated = false
	return c.write()
}

// NeedsCalibration reports whether S is still an estimate that matters:
// at rate 1 the fake time does not depend on S.
func (c *Clock) NeedsCalibration() bool { return !c.calibrated && c.rate != 1 }

// Calibrate corrects the estimate of S from the server's clock, observed as
// fake at real time t. With the spec written for S', the server's clock is
// at(t) + (S-S')(1-rate), so S-S' = (fake-at(t))/(1-rate).
func (c *Clock) Calibrate(fake, t time.Time) error {
	if c.rate == 1 {
		return nil
	}
	x := float64(fake.Sub(c.at(t))) / (1 - c.rate)
	c.procStart = c.procStart.Add(time.Duration(x))
	c.calibrated = true
	return c.write()
}

// SetRate changes the rate from real time t on.
func (c *Clock) SetRate(t time.Time, rate float64) error {
	c.anchorFake = c.at(t)
	c.anchorReal = t
	c.rate = rate
	return c.write()
}

// write stores the spec for the current process. From
// S + (t-S)*rate + offset = anchorFake + (t-anchorReal)*rate,
// offset = anchorFake - S - (anchorReal-S)*rate, independent of t.
func (c *Clock) write() error {
	s := c.procStart
	offset := c.anchorFake.Sub(s).Seconds() - c.anchorReal.Sub(s).Seconds()*c.rate
	spec := fmt.Sprintf("%+.6f x%.6f\n", offset, c.rate)
	// Write then rename, so libfaketime never reads half a spec.
	tmp := c.spec + ".tmp"
	if err := os.WriteFile(tmp, []byte(spec), 0o644); err != nil {
		return fmt.Errorf("rlock: integration: faketime spec: %w", err)
	}
	if err := os.Rename(tmp, c.spec); err != nil {
		return fmt.Errorf("rlock: integration: faketime spec: %w", err)
	}
	return nil
}

// Spec is the path of the spec file libfaketime reads.
func (c *Clock) Spec() string { return c.spec }
