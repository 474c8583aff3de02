// Command bench compares rlock with other Go lock libraries on Redis:
// go-redsync/redsync, bsm/redislock and rueidis's rueidislock, against
// the floor of two raw EVALSHA round trips. It starts its own
// redis-server processes on loopback and runs every scenario.
//
//	cd bench && go run . -quick   # CI: a few seconds per scenario, checks every number
//	cd bench && go run .          # full run: writes ../docs/benchmarks.md and ../docs/img/*.svg
//
// It is a module of its own so that the peers never enter rlock's go.mod.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// params are the sizes of a run.
type params struct {
	quick bool
	libs  map[string]bool // scenario 1's libraries (-libs); empty: all

	latencyWarmup, latencyRounds, latencyBlock int
	// pace: scenarios 1 and 8 keep a runtime timer armed this far ahead
	// through every cycle of every target (-pace; 0: none).
	pace time.Duration

	goroutines                         int
	throughputWarmup, throughputWindow time.Duration
	throughputRounds                   int

	contenders       int
	hold             time.Duration
	contentionWindow time.Duration

	handoffIters                   int
	handoffMinHold, handoffMaxHold time.Duration

	renewCounts               []int
	renewLease, renewInterval time.Duration
	renewTicks                int

	redlockRounds, redlockBlock int
	redlockWaitWindow           time.Duration

	fleetGo, fleetAcq, fleetRounds int
}

func fullParams() params {
	return params{
		latencyWarmup: 200, latencyRounds: 50, latencyBlock: 200,
		goroutines: 64, throughputWarmup: time.Second, throughputWindow: 4 * time.Second, throughputRounds: 2,
		contenders: 16, hold: time.Millisecond, contentionWindow: 8 * time.Second,
		handoffIters: 300, handoffMinHold: 3 * time.Millisecond, handoffMaxHold: 8 * time.Millisecond,
		renewCounts: []int{1000, 3000, 10000}, renewLease: 5 * time.Second, renewInterval: 500 * time.Millisecond, renewTicks: 10,
		redlockRounds: 30, redlockBlock: 100, redlockWaitWindow: 5 * time.Second,
		fleetGo: 4, fleetAcq: 1000, fleetRounds: 5,
	}
}

func quickParams() params {
	return params{
		quick:         true,
		latencyWarmup: 50, latencyRounds: 5, latencyBlock: 100,
		goroutines: 64, throughputWarmup: 300 * time.Millisecond, throughputWindow: time.Second, throughputRounds: 1,
		contenders: 16, hold: time.Millisecond, contentionWindow: 1500 * time.Millisecond,
		handoffIters: 25, handoffMinHold: 3 * time.Millisecond, handoffMaxHold: 8 * time.Millisecond,
		renewCounts: []int{1000}, renewLease: 2 * time.Second, renewInterval: 250 * time.Millisecond, renewTicks: 4,
		redlockRounds: 4, redlockBlock: 50, redlockWaitWindow: time.Second,
		fleetGo: 4, fleetAcq: 200, fleetRounds: 1,
	}
}

// results is everything a run measured; report.go renders it.
type results struct {
	Quick   bool
	Command string
	Started time.Time
	Elapsed time.Duration
	Machine machine
	Params  params
	Errors  []string       // scenarios that failed, with why
	Stalls  map[string]int // Lock calls cancelled after stallAfter, by scenario and library

	Latency     *latencyResult
	Throughput  *throughputResult
	Contention  *contentionResult
	Handoff     *handoffResult
	Renewal     *renewalResult
	RedLock     *redlockResult
	Fleet       *fleetResult
	ReplicaSync *replicaSyncResult
}

// scenario is one numbered scenario of the run.
type scenario struct {
	id   string
	name string
	run  func(ctx context.Context, p params, r *results) error
}

var scenarios = []scenario{
	{"latency", "1. uncontended latency", func(ctx context.Context, p params, r *results) (err error) {
		r.Latency, err = runLatency(ctx, p)
		return checked(r.Latency, err)
	}},
	{"throughput", "2. parallel throughput", func(ctx context.Context, p params, r *results) (err error) {
		r.Throughput, err = runThroughput(ctx, p)
		return checked(r.Throughput, err)
	}},
	{"contention", "3. contention", func(ctx context.Context, p params, r *results) (err error) {
		r.Contention, err = runContention(ctx, p)
		return checked(r.Contention, err)
	}},
	{"handoff", "4. handoff", func(ctx context.Context, p params, r *results) (err error) {
		r.Handoff, err = runHandoff(ctx, p)
		return checked(r.Handoff, err)
	}},
	{"renewal", "5. renewal at scale", func(ctx context.Context, p params, r *results) (err error) {
		r.Renewal, err = runRenewal(ctx, p)
		return checked(r.Renewal, err)
	}},
	{"redlock", "6. RedLock over 5 masters", func(ctx context.Context, p params, r *results) (err error) {
		r.RedLock, err = runRedLock(ctx, p)
		return checked(r.RedLock, err)
	}},
	{"fleet", "7. mixed fleet: a Redisson waiter beside Go waiters", func(ctx context.Context, p params, r *results) (err error) {
		r.Fleet, err = runFleet(ctx, p)
		return checked(r.Fleet, err)
	}},
	{"replicasync", "8. replica sync: WAIT after each acquire and release", func(ctx context.Context, p params, r *results) (err error) {
		r.ReplicaSync, err = runReplicaSync(ctx, p)
		return checked(r.ReplicaSync, err)
	}},
}

type checker interface{ check() error }

func checked[T checker](res T, err error) error {
	if err != nil {
		return err
	}
	return res.check()
}

var verbose = true

func logf(format string, args ...any) {
	if verbose {
		fmt.Fprintf(os.Stderr, format+"\n", args...)
	}
}

// names is the set of a comma-separated flag's names.
func names(list string) map[string]bool {
	set := map[string]bool{}
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s != "" {
			set[s] = true
		}
	}
	return set
}

func main() {
	quick := flag.Bool("quick", false, "CI mode: a few seconds per scenario; checks that every scenario produced numbers; writes nothing under docs/")
	out := flag.String("out", filepath.Join("..", "docs", "benchmarks.md"), "full mode: the page whose generated section to (re)write")
	img := flag.String("img", filepath.Join("..", "docs", "img"), "full mode: where the SVG plots go")
	results_ := flag.String("results", "results", "quick mode: where to write the generated page for inspection (gitignored)")
	only := flag.String("only", "", "comma-separated scenarios to run (latency,throughput,contention,handoff,renewal,redlock,fleet,replicasync); default all. A partial run never writes docs/")
	libs := flag.String("libs", "", "scenario 1 (latency) only: comma-separated libraries to time (rlock,redsync,redislock,rueidislock), beside the floors; default all. Makes the run partial")
	pace := flag.Duration("pace", 0, "scenarios 1 and 8: keep a timer armed this far ahead through every cycle of every target, so that a timer one library keeps (rlock's latch cleaner: 200 ms) does not change the others' round trips (see docs/benchmarks.md, session 28); 0: none. Makes the run partial")
	flag.Parse()

	p := fullParams()
	if *quick {
		p = quickParams()
	}
	p.libs = names(*libs)
	p.pace = *pace
	for n := range p.libs {
		if !slices.ContainsFunc(latencyLibs, func(l library) bool { return l.name == n }) {
			fmt.Fprintf(os.Stderr, "bench: -libs: no library %q in scenario 1 (rlock, redsync, redislock, rueidislock)\n", n)
			os.Exit(2)
		}
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 15*time.Minute)
	defer cancelT()

	r := &results{Quick: *quick, Command: command(), Started: time.Now(), Params: p}
	r.Machine = describeMachine(ctx)
	want := names(*only)
	for _, s := range scenarios {
		if len(want) > 0 && !want[s.id] {
			continue
		}
		logf("%s ...", s.name)
		t := time.Now()
		err := s.run(ctx, p, r)
		if err != nil {
			logf("%s: FAILED: %v", s.name, err)
			r.Errors = append(r.Errors, fmt.Sprintf("%s: %v", s.name, err))
		} else {
			logf("%s: done in %v", s.name, time.Since(t).Round(time.Millisecond))
		}
		if ctx.Err() != nil {
			break
		}
	}
	r.Elapsed = time.Since(r.Started)
	stalls.Lock()
	r.Stalls = maps.Clone(stalls.n)
	stalls.Unlock()

	// Only a complete, successful full run replaces the page; anything
	// else goes under results/ (gitignored) for inspection.
	var err error
	switch {
	case len(want) > 0 || len(p.libs) > 0 || p.pace != 0:
		err = writeAll(r, filepath.Join(*results_, "partial.md"), filepath.Join(*results_, "img"), "img")
	case *quick:
		err = writeAll(r, filepath.Join(*results_, "quick.md"), filepath.Join(*results_, "img"), "img")
	case len(r.Errors) > 0 || ctx.Err() != nil:
		err = writeAll(r, filepath.Join(*results_, "failed.md"), filepath.Join(*results_, "img"), "img")
		logf("bench: the run was incomplete; %s left as it was, see %s", *out, filepath.Join(*results_, "failed.md"))
	default:
		err = writeAll(r, *out, *img, relImg(*out, *img))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: writing the report:", err)
		os.Exit(1)
	}
	if ctx.Err() != nil && len(r.Errors) == 0 {
		r.Errors = append(r.Errors, "interrupted: "+ctx.Err().Error())
	}
	if len(r.Errors) > 0 {
		fmt.Fprintf(os.Stderr, "bench: %d scenario(s) failed:\n  %s\n", len(r.Errors), strings.Join(r.Errors, "\n  "))
		os.Exit(1)
	}
	logf("bench: every scenario ran and produced numbers (%v)", r.Elapsed.Round(time.Second))
}

// command is the command line that reproduces this run.
func command() string {
	args := append([]string{"cd bench && go run ."}, os.Args[1:]...)
	return strings.Join(args, " ")
}

// relImg is the image directory as the page links it.
func relImg(page, img string) string {
	rel, err := filepath.Rel(filepath.Dir(page), img)
	if err != nil {
		return img
	}
	return filepath.ToSlash(rel)
}

// machine describes where the run happened.
type machine struct {
	NumCPU     int
	GOMAXPROCS int
	CPUModel   string
	Kernel     string
	Go         string
	Redis      string
	Revision   string // rlock's commit, and whether its working tree differed
	Idle       string // how idle CPUs wait (describeIdle)
}

// describeIdle names the CPU idle driver and governor under root (""
// for this machine), and, when the driver in use is a KVM guest's
// haltpoll, how long a CPU polls before it halts (the module may be
// loaded under another driver, or none, where its setting does
// nothing). That setting triples every round trip on loopback, or cuts
// it to a third: with guest_halt_poll_ns at 0 every
// wait halts the virtual CPU and its wake-up goes through the host (PING
// p50 about 60 µs on a 2-core VM, and a Lock+Unlock's latency swings
// between two modes with the workload's pattern); with 200,000 the guest
// polls first (PING p50 20 µs on the same VM).
func describeIdle(root string) string {
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	drv := read("/sys/devices/system/cpu/cpuidle/current_driver")
	if drv == "" {
		return "unknown"
	}
	out := drv
	gov := read("/sys/devices/system/cpu/cpuidle/current_governor")
	if gov == "" {
		gov = read("/sys/devices/system/cpu/cpuidle/current_governor_ro")
	}
	if gov != "" && gov != drv {
		out += " (governor " + gov + ")"
	}
	// The module's setting acts only through its driver: with another
	// (or none) it is loaded but does nothing.
	if ns := read("/sys/module/haltpoll/parameters/guest_halt_poll_ns"); ns != "" && drv == "haltpoll" {
		out += ", guest_halt_poll_ns " + ns
	}
	return out
}

func describeMachine(ctx context.Context) machine {
	m := machine{NumCPU: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), Go: runtime.Version(), CPUModel: "unknown", Kernel: "unknown", Redis: "unknown", Idle: describeIdle("")}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = "Linux " + strings.TrimSpace(string(b))
	}
	m.Revision = revision(ctx)
	if s, err := startRedis(ctx); err == nil {
		if c, err := admin(s.Addr()); err == nil {
			m.Redis = redisVersion(ctx, c)
			c.Close()
		}
		s.Close()
	}
	return m
}

// revision names the rlock commit the run was built from (bench's replace
// points at ../), noting uncommitted changes outside bench/ and docs/.
func revision(ctx context.Context) string {
	out, err := exec.CommandContext(ctx, "git", "-C", "..", "log", "-1", "--format=%h").Output()
	if err != nil {
		return "unknown revision"
	}
	rev := "commit " + strings.TrimSpace(string(out))
	st, err := exec.CommandContext(ctx, "git", "-C", "..", "status", "--porcelain", "--", ".", ":(exclude)bench", ":(exclude)docs").Output()
	if err == nil && len(bytes.TrimSpace(st)) > 0 {
		rev += " with uncommitted changes in the working tree"
	}
	return rev
}
