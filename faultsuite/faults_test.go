package faultsuite

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/lock"
)

// faultKind is one kind of fault the scheduler injects.
type faultKind struct {
	name string
	// outside: the fault breaks an assumption of docs/safety.md, so
	// double grants may happen and only the fence protects the resource.
	outside bool
	clock   bool // needs the servers' fake clock
	mode    bool // a worker mode, with the proxy rules of the fault
}

// The kinds, inside the documented assumptions first. The order matters:
// a round's lead fault is picked by its seed from this list.
var kinds = []*faultKind{
	{name: "kill"},                     // kill, restart after more than the max lease, data kept or not
	{name: "restart-kept"},             // restart at once keeping the (persisted) data
	{name: "pause-short"},              // SIGSTOP or freeze the master for less than the lease
	{name: "pause-long"},               // ... for more than the lease
	{name: "partition-short"},          // cut every client off the master for less than the lease
	{name: "partition-long"},           // ... for more than the lease
	{name: "clock-drift", clock: true}, // master clock at 1 ± 0.5%, within the drift factor
	// Kinds that change how clients use the lock while they last (a
	// worker mode), with single lost or delayed commands: what the suite
	// could not see before (issue 13). All inside the assumptions.
	{name: "shared-owner", mode: true},               // 2-3 goroutines per worker share one owner (WithOwner), re-enter, pass Held contexts to nested goroutines
	{name: "reenter-short-lease", mode: true},        // a holder re-enters with a Lease shorter than a renew interval, unlocks it, holds on
	{name: "lost-request", mode: true},               // shared owners; one acquire/release/renew request dropped (the connection reset)
	{name: "lost-reply", mode: true},                 // shared owners; one acquire/release/renew reply dropped after Redis ran it
	{name: "ctx-deadline", mode: true},               // shared owners whose Lock deadlines (20-150ms) expire while an acquire's reply is delayed
	{name: "owner-ctx", mode: true},                  // Lock with a ctx carrying an owner (WithOwner kept across holds, another lock's Held ctx); lost requests/replies
	{name: "tight-timeout", mode: true},              // Clients with CommandTimeout + RenewInterval just under WatchdogTimeout, leases near CommandTimeout, replies delayed near it
	{name: "close-holding", mode: true},              // a holder's Clients (its own) are closed while it holds and writes; release replies delayed (one master; a RedLock's workers hold as usual)
	{name: "unlock-deadline", mode: true},            // shared owners whose Unlock deadlines (20-150ms) expire while a release's reply is delayed; after an Unlock error the holder writes while its Held's context is live
	{name: "ctx-cancel", mode: true},                 // shared owners whose Lock or Unlock ctx is cancelled (no deadline) 20-150ms into the call while acquire or release replies are delayed
	{name: "close-stopped", mode: true},              // Clients of the workers' own closed (20-150ms deadlines) while the masters are stopped, their Lock/TryLock/Unlock/ForceUnlock calls (20-150ms deadlines, or half of them cancelled as late) in flight
	{name: "restart-now-empty", outside: true},       // restart at once without data (a majority or one on RedLock)
	{name: "holder-pause", outside: true},            // a holder pauses past its explicit lease before writing
	{name: "clock-fast", outside: true, clock: true}, // master clock 5x fast (a majority on RedLock)
}

// available lists the kinds the cluster can inject, among those named in
// only (all when only is empty).
func available(clock bool, only []string) []*faultKind {
	var out []*faultKind
	for _, k := range kinds {
		if (clock || !k.clock) && (len(only) == 0 || slices.Contains(only, k.name)) {
			out = append(out, k)
		}
	}
	return out
}

// fault is one planned fault.
type fault struct {
	kind    *faultKind
	gap     time.Duration // waited before it, as the schedule says
	targets []int         // masters of the topology it hits
	d       time.Duration // how long it lasts (pause, partition, clock, restart delay)
	keep    bool          // a restart keeps the data
	rate    float64       // clock rate
	mode    workerMode    // the workers' mode while it lasts
	rules   []rule        // commands lost or delayed meanwhile, in order
	before  time.Duration // close-stopped: contention before the stop (which lasts d)
}

// rule is one command lost or delayed by a master's proxy: the first
// request (or reply) of a script of role on the round's lock once the
// rule is injected, at offset at into the fault.
type rule struct {
	at     time.Duration
	master int
	role   string // acquire, release, renew
	action integration.Action
	times  int // how many matching commands it acts on; 0 means 1
}

func (x rule) String() string {
	s := fmt.Sprintf("%v of %s on m%d at +%v", x.action, x.role, x.master, x.at.Round(time.Millisecond))
	if x.times > 1 {
		s += fmt.Sprintf(" x%d", x.times)
	}
	return s
}

func (f fault) String() string {
	s := fmt.Sprintf("%s on %v", f.kind.name, f.targets)
	switch f.kind.name {
	case "kill":
		s += fmt.Sprintf(" for %v, keep data %v", f.d.Round(time.Millisecond), f.keep)
	case "restart-kept":
		s += fmt.Sprintf(" after %v", f.d.Round(time.Millisecond))
	case "clock-drift", "clock-fast":
		s += fmt.Sprintf(" at rate %.4f for %v", f.rate, f.d.Round(time.Millisecond))
	case "holder-pause":
		s = fmt.Sprintf("holder-pause of %v past a lease of %v", f.d.Round(time.Millisecond), explicitLease)
	case "restart-now-empty":
	case "reenter-short-lease":
		s = fmt.Sprintf("%s (lease %v) for %v", f.kind.name, f.mode.shortLease.Round(time.Millisecond), f.d.Round(time.Millisecond))
	case "ctx-deadline":
		s = fmt.Sprintf("%s (Lock deadlines %v-%v) for %v", f.kind.name, f.mode.lockTimeout[0], f.mode.lockTimeout[1], f.d.Round(time.Millisecond))
	case "unlock-deadline":
		s = fmt.Sprintf("%s (Unlock deadlines %v-%v) for %v", f.kind.name, f.mode.unlockTimeout[0], f.mode.unlockTimeout[1], f.d.Round(time.Millisecond))
	case "ctx-cancel":
		s = fmt.Sprintf("%s (cancellations %v-%v into Lock or Unlock) for %v", f.kind.name, f.mode.cancelAfter[0], f.mode.cancelAfter[1], f.d.Round(time.Millisecond))
	case "close-stopped":
		s = fmt.Sprintf("%s on %v: stopped %v after %v, call and Close deadlines %v-%v", f.kind.name, f.targets, f.d.Round(time.Millisecond),
			f.before.Round(time.Millisecond), f.mode.callTimeout[0], f.mode.callTimeout[1])
	case "tight-timeout":
		s = fmt.Sprintf("%s (CommandTimeout %v, leases %v-%v) for %v", f.kind.name, tightCommandTimeout, f.mode.tightLease[0], f.mode.tightLease[1], f.d.Round(time.Millisecond))
	default:
		s += fmt.Sprintf(" for %v", f.d.Round(time.Millisecond))
	}
	if f.kind.mode && f.kind.name != "reenter-short-lease" && f.kind.name != "ctx-deadline" && f.kind.name != "unlock-deadline" && f.kind.name != "ctx-cancel" && f.kind.name != "tight-timeout" && f.kind.name != "close-stopped" {
		s = fmt.Sprintf("%s for %v", f.kind.name, f.d.Round(time.Millisecond))
	}
	for _, x := range f.rules {
		s += "; " + x.String()
	}
	return s
}

// wipes reports how many masters the fault restarts without their data.
func (f fault) wipes() int {
	switch {
	case f.kind.name == "restart-now-empty", f.kind.name == "kill" && !f.keep:
		return len(f.targets)
	}
	return 0
}

// plan draws a round's faults from its seed: the lead kind cycles with the
// seed (shifted by offset: the case's); a round inside the assumptions adds
// up to two more inside faults.
func plan(rng *rand.Rand, seed, offset uint64, topo topology, avail []*faultKind) []fault {
	lead := avail[(seed+offset)%uint64(len(avail))]
	fs := []fault{draw(rng, lead, topo)}
	if !lead.outside {
		var inside []*faultKind
		for _, k := range avail {
			if !k.outside {
				inside = append(inside, k)
			}
		}
		for range rng.IntN(3) * min(len(inside), 1) {
			fs = append(fs, draw(rng, inside[rng.IntN(len(inside))], topo))
		}
	}
	return fs
}

func draw(rng *rand.Rand, k *faultKind, topo topology) fault {
	f := fault{kind: k, gap: randDuration(rng, 50*time.Millisecond, 250*time.Millisecond)}
	n := 1
	if topo.masters > 1 {
		n = 1 + rng.IntN(topo.masters-topo.quorum+1) // inside: 1 to 3 of 5
	}
	// Shorter and longer than the lease, up to its edges, where a loss
	// is decided.
	short := func() time.Duration { return randDuration(rng, watchdogLease/4, watchdogLease-10*time.Millisecond) }
	long := func() time.Duration { return randDuration(rng, watchdogLease+10*time.Millisecond, watchdogLease*2) }
	switch k.name {
	case "kill":
		// Longer than the max lease, as docs/safety.md asks: half of
		// them less than a renew interval longer, where a holder's
		// watchdog decides the loss, the others up to 300ms longer.
		f.d = randDuration(rng, watchdogLease+20*time.Millisecond, watchdogLease+watchdogLease/3)
		if rng.IntN(2) == 0 {
			f.d = randDuration(rng, watchdogLease+watchdogLease/3, watchdogLease+300*time.Millisecond)
		}
		f.keep = rng.IntN(2) == 0
	case "restart-kept":
		f.d, f.keep = randDuration(rng, 0, watchdogLease/2), true
	case "pause-short", "partition-short":
		f.d = short()
	case "pause-long", "partition-long":
		f.d = long()
	case "clock-drift":
		f.rate = 1 + float64(1+rng.IntN(5))/1000*float64(1-2*rng.IntN(2))
		f.d = randDuration(rng, watchdogLease, 3*watchdogLease)
	case "restart-now-empty":
		if topo.masters > 1 {
			n = []int{1, topo.quorum}[rng.IntN(2)] // one master, or enough to break the quorum's intersection
		}
	case "holder-pause":
		n = 0
		f.d = explicitLease + randDuration(rng, 150*time.Millisecond, 350*time.Millisecond)
	case "clock-fast":
		f.rate = 5
		f.d = randDuration(rng, 2*watchdogLease, 4*watchdogLease)
		if topo.masters > 1 {
			n = topo.quorum
		}
	case "close-stopped":
		// Stopped shorter and longer than the lease; the Closes come
		// 0-60 ms into the stop, with deadlines of 20-150 ms.
		f.d = randDuration(rng, 250*time.Millisecond, 2*watchdogLease)
		f.before = randDuration(rng, 50*time.Millisecond, 200*time.Millisecond)
		f.mode = workerMode{kind: k.name, callTimeout: [2]time.Duration{20 * time.Millisecond, 150 * time.Millisecond}, stop: newStopSignal()}
	}
	if k.mode && k.name != "close-stopped" {
		return drawMode(rng, f, topo)
	}
	f.targets = rng.Perm(topo.masters)[:n]
	slices.Sort(f.targets)
	return f
}

// drawMode draws a worker mode and its proxy rules.
func drawMode(rng *rand.Rand, f fault, topo topology) fault {
	f.d = randDuration(rng, 2*watchdogLease, 4*watchdogLease)
	f.mode = workerMode{kind: f.kind.name}
	roles := []string{"acquire", "release", "renew"}
	add := func(role string, a integration.Action) {
		f.rules = append(f.rules, rule{at: randDuration(rng, 0, f.d*2/3), master: rng.IntN(topo.masters), role: role, action: a})
	}
	switch f.kind.name {
	case "reenter-short-lease":
		// Shorter than every renew interval: a key cut to it expires
		// before the outer hold's next renewal.
		f.mode.shortLease = randDuration(rng, lock.MinLease, 100*time.Millisecond)
	case "lost-request":
		for range 1 + rng.IntN(3) {
			add(roles[rng.IntN(3)], integration.DropRequest)
		}
	case "lost-reply":
		for range 1 + rng.IntN(3) {
			add(roles[rng.IntN(3)], integration.DropReply)
		}
	case "ctx-deadline":
		f.mode.lockTimeout = [2]time.Duration{20 * time.Millisecond, 150 * time.Millisecond}
		for range 1 + rng.IntN(3) {
			add("acquire", integration.DelayReply(randDuration(rng, 30*time.Millisecond, 300*time.Millisecond)))
		}
	case "unlock-deadline":
		// The release ran; its answer comes after the Unlock's deadline:
		// another Client may be granted before the holder knows.
		f.mode.unlockTimeout = [2]time.Duration{20 * time.Millisecond, 150 * time.Millisecond}
		for range 1 + rng.IntN(3) {
			add("release", integration.DelayReply(randDuration(rng, 30*time.Millisecond, 300*time.Millisecond)))
		}
	case "ctx-cancel":
		// The caller's ctx is cancelled (no deadline) with the request
		// in flight: the call returns at the cancellation and its
		// request's outcome is settled in the background.
		f.mode.cancelAfter = [2]time.Duration{20 * time.Millisecond, 150 * time.Millisecond}
		for range 1 + rng.IntN(3) {
			add([]string{"acquire", "release"}[rng.IntN(2)], integration.DelayReply(randDuration(rng, 30*time.Millisecond, 300*time.Millisecond)))
		}
	case "owner-ctx":
		for range 2 + rng.IntN(3) {
			role, a := []string{"acquire", "acquire", "release"}[rng.IntN(3)], []integration.Action{integration.DropRequest, integration.DropReply}[rng.IntN(2)]
			add(role, a)
			if role == "release" && a == integration.DropReply {
				// The release ran and its answer was lost; the next 2-5
				// release requests to that master are lost too (each a
				// reset), so that its retries fail for a while and the
				// owner's next round or call can act meanwhile.
				x := &f.rules[len(f.rules)-1]
				f.rules = append(f.rules, rule{at: x.at + time.Millisecond, master: x.master, role: "release",
					action: integration.DropRequest, times: 2 + rng.IntN(4)})
			}
		}
	case "close-holding":
		// Close's release answered late: another Client may be granted
		// meanwhile, and the closing holder must know by then.
		for range 1 + rng.IntN(3) {
			add("release", integration.DelayReply(randDuration(rng, 50*time.Millisecond, 300*time.Millisecond)))
		}
	case "tight-timeout":
		f.mode.tightLease = [2]time.Duration{tightCommandTimeout - 65*time.Millisecond, tightCommandTimeout + 15*time.Millisecond}
		// Around CommandTimeout: answered just in time, or, past it, a
		// lost reply whose request ran.
		for range 1 + rng.IntN(3) {
			add("acquire", integration.DelayReply(randDuration(rng, tightCommandTimeout-65*time.Millisecond, tightCommandTimeout+55*time.Millisecond)))
		}
		if rng.IntN(2) == 0 {
			add("renew", integration.DelayReply(randDuration(rng, tightCommandTimeout-60*time.Millisecond, tightCommandTimeout-5*time.Millisecond)))
		}
	}
	slices.SortFunc(f.rules, func(a, b rule) int { return int(a.at - b.at) })
	for _, x := range f.rules {
		if !slices.Contains(f.targets, x.master) {
			f.targets = append(f.targets, x.master)
		}
	}
	slices.Sort(f.targets)
	return f
}

// injectMode turns the workers' mode on for f.d and injects f's rules at
// their moments, each until it acts once or the fault ends.
func (r *round) injectMode(ctx context.Context, f fault) error {
	if f.kind.name == "close-stopped" {
		return r.injectCloseStopped(ctx, f)
	}
	r.setMode(f.mode)
	defer r.setMode(workerMode{})
	start := time.Now()
	end := start.Add(f.d)
	for _, x := range f.rules {
		if err := sleepCtx(ctx, time.Until(start.Add(x.at))); err != nil {
			return err
		}
		fa, err := r.servers[x.master].Inject(integration.Rule{Match: scriptMatcher(x.role, r.name), Action: x.action, Times: max(x.times, 1)})
		if err != nil {
			return fmt.Errorf("%v: %w", x, err)
		}
		wctx, cancel := context.WithDeadline(ctx, end)
		_ = fa.Wait(wctx)
		cancel()
		fa.Remove()
		r.hit(f.kind.name, fa.Hits())
	}
	return sleepCtx(ctx, time.Until(end))
}

// onTargets runs do on each of f's masters at once, and joins their
// errors.
func (r *round) onTargets(f fault, do func(s *integration.Server) error) error {
	errs := make([]error, len(f.targets))
	var wg sync.WaitGroup
	for i, m := range f.targets {
		wg.Go(func() {
			if err := do(r.servers[m]); err != nil {
				errs[i] = fmt.Errorf("master %d: %w", m, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// inject applies f to the round's masters and undoes it: when it returns,
// every master runs, reachable, at clock rate 1.
func (r *round) inject(ctx context.Context, f fault) error {
	on := func(do func(s *integration.Server) error) error { return r.onTargets(f, do) }
	// The fault's duration is part of the schedule: time itself, not a
	// wait for another goroutine.
	last := func() error { return sleepCtx(ctx, f.d) }
	if f.kind.mode {
		return r.injectMode(ctx, f)
	}
	switch f.kind.name {
	case "kill", "restart-kept":
		return on(func(s *integration.Server) error {
			return s.Restart(ctx, integration.RestartOptions{KeepData: f.keep, Delay: f.d})
		})
	case "restart-now-empty":
		// Hit a holder, not an idle lock.
		if err := r.hist.waitHeld(ctx); err != nil {
			return fmt.Errorf("waiting for a holder: %w", err)
		}
		return on(func(s *integration.Server) error {
			return s.Restart(ctx, integration.RestartOptions{})
		})
	case "pause-short", "pause-long":
		if err := on(func(s *integration.Server) error { return s.Pause(ctx) }); err != nil {
			return err
		}
		return errors.Join(last(), on(func(s *integration.Server) error { return s.Resume(context.WithoutCancel(ctx)) }))
	case "partition-short", "partition-long":
		if err := on(func(s *integration.Server) error { return s.Partition(ctx) }); err != nil {
			return err
		}
		return errors.Join(last(), on(func(s *integration.Server) error { return s.Heal(context.WithoutCancel(ctx)) }))
	case "clock-drift", "clock-fast":
		if err := on(func(s *integration.Server) error { return s.SetClockRate(ctx, f.rate) }); err != nil {
			return err
		}
		return errors.Join(last(), on(func(s *integration.Server) error { return s.SetClockRate(context.WithoutCancel(ctx), 1) }))
	case "holder-pause":
		pr := r.requestPause(f.d)
		select {
		case <-pr.done:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("no holder took the pause: %w", context.Cause(ctx))
		}
	}
	return fmt.Errorf("unknown fault %q", f.kind.name)
}

// repair brings every master of the round back, whatever a failed
// injection left: resumed, healed, clock at rate 1, running.
func (r *round) repair(ctx context.Context) error {
	var errs []error
	for i, s := range r.servers {
		_ = s.Resume(ctx) // ErrNotRunning when killed: restarted below
		if err := s.Heal(ctx); err != nil {
			errs = append(errs, fmt.Errorf("master %d: heal: %w", i, err))
		}
		if r.cl.clock {
			if err := s.SetClockRate(ctx, 1); err != nil {
				errs = append(errs, fmt.Errorf("master %d: clock: %w", i, err))
			}
		}
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := s.Ping(pctx)
		cancel()
		if err != nil {
			if err := s.Restart(ctx, integration.RestartOptions{KeepData: true}); err != nil {
				errs = append(errs, fmt.Errorf("master %d: restart: %w", i, err))
			}
		}
	}
	return errors.Join(errs...)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// describe lists faults for a log line.
func describe(fs []fault) string {
	s := make([]string, len(fs))
	for i, f := range fs {
		s[i] = f.String()
	}
	return strings.Join(s, "; ")
}
