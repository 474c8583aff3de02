package faultsuite

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/lock"
)

// Bounds of a round. A round normally takes one to three seconds.
const (
	roundTimeout    = 90 * time.Second // everything, or the round fails
	recoveryTimeout = 10 * time.Second // for the grants after the last fault
	// grantsAround is how many grants a round waits for before its first
	// fault and after its last: contention without faults, and proof that
	// the lock works again.
	grantsAround = 4
)

// round is one lock name contended by every worker while the scheduler
// injects its faults.
type round struct {
	seed    uint64
	name    string
	topo    topology
	cl      *cluster
	servers []*integration.Server // the topology's masters
	faults  []fault
	hist    *history
	events  *events
	res     resource
	pauses  pauses
	// readings are the readers' holds (the rwlock topology).
	readings readings

	modeMu  sync.Mutex
	cur     workerMode
	clients atomic.Int64 // goroutine ids for porcupine, past the workers'
	// injected counts the proxy rules that acted (a request or a reply
	// lost, a reply delayed), by fault kind.
	injectMu sync.Mutex
	injected map[string]int
	// dls are the calls made with a ctx deadline, and those it cut
	// (slack_test.go).
	dls deadlines
	// stalled is the longest stall of one CPU of the suite's process
	// seen during the round (integration.LongestStall), set before check.
	stalled time.Duration
}

// stallOutside is the stall of the suite's process, seen during a round,
// that puts the round outside the assumptions: the holders run in this
// process, and one that is not scheduled for this long may see its lease
// (90 ms at the least, reenter-short-lease) run out before it can act, as
// holder-pause does on purpose. On a machine that does not stall no round
// is put outside by it; on one that does (stop 41's CI), a double grant or
// a loss never signalled in such a round is what the pause causes, not
// something the suite can judge.
const stallOutside = 50 * time.Millisecond

// workerMode is a fault kind that changes how the workers use the lock
// while it lasts; the zero mode is the suite's plain holds.
type workerMode struct {
	kind        string
	shortLease  time.Duration    // reenter-short-lease: the re-entry's Lease
	lockTimeout [2]time.Duration // ctx-deadline: the Lock deadlines' range
	// unlock-deadline: the Unlock deadlines' range
	unlockTimeout [2]time.Duration
	// ctx-cancel: when, into a Lock or an Unlock, its ctx is cancelled
	cancelAfter [2]time.Duration
	tightLease  [2]time.Duration // tight-timeout: the explicit leases' range
	// close-stopped: the deadlines' range of every call, and the fault's
	// signals (closestopped_test.go).
	callTimeout [2]time.Duration
	stop        *stopSignal
}

func (r *round) mode() workerMode {
	r.modeMu.Lock()
	defer r.modeMu.Unlock()
	return r.cur
}

func (r *round) setMode(m workerMode) {
	r.modeMu.Lock()
	r.cur = m
	r.modeMu.Unlock()
}

// newClient numbers a goroutine that takes holds, for porcupine's view.
func (r *round) newClient() int { return nWorkers + int(r.clients.Add(1)) }

// bound returns a context with the values of values (its owner), ended
// when values or the round's ctx ends: a Held's context or an owner kept
// across holds, which must not outlive the round.
func (r *round) bound(ctx, values context.Context) (context.Context, context.CancelFunc) {
	c, cancel := context.WithCancel(values)
	stop := context.AfterFunc(ctx, cancel)
	return c, func() { stop(); cancel() }
}

func (r *round) hit(kind string, n int) {
	r.injectMu.Lock()
	defer r.injectMu.Unlock()
	if r.injected == nil {
		r.injected = map[string]int{}
	}
	r.injected[kind] += n
}

// caseRun is one backend and topology: the workers of its rounds.
type caseRun struct {
	cl      *cluster
	topo    topology
	workers []*worker
	sink    *eventSink
	kinds   []string       // the fault kinds allowed; nil: all
	direct  *direct        // connections bypassing the proxies, for count reads
	readers []*lock.Client // the rwlock topology's readers, one Client each
}

// round runs one round and returns what it showed. Problems with the
// harness itself (a fault that could not be injected, no grant at all)
// are returned as an error.
func (c *caseRun) round(t *testing.T, seed uint64) (roundResult, error) {
	cl, topo, ws := c.cl, c.topo, c.workers
	rng := rand.New(rand.NewPCG(seed, 0))
	r := &round{
		seed:    seed,
		name:    lockName(cl.backend, topo, seed),
		topo:    topo,
		cl:      cl,
		servers: cl.servers[:topo.masters],
		faults:  plan(rng, seed, topo.offset+backendOffset(cl.backend), topo, available(cl.clock, c.kinds)),
		hist:    newHistory(),
	}
	r.hist.counter = c.direct.counter(r.name, topo)
	r.events = &events{hist: r.hist}
	c.sink.reset(r.events)
	defer c.sink.reset(nil)
	ctx, cancel := context.WithTimeout(t.Context(), roundTimeout)
	defer cancel()
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	started := time.Now()
	for _, w := range ws {
		wg.Go(func() { w.run(wctx, r) })
	}
	for i, c := range c.readers {
		wg.Go(func() { r.read(wctx, i, c) })
	}
	err := r.schedule(ctx)
	stop()
	wg.Wait()
	r.hist.close()
	r.stalled = integration.LongestStall(started, time.Now())
	if err != nil {
		return roundResult{}, errors.Join(err, r.repair(context.WithoutCancel(ctx)))
	}
	res := r.check()
	if topo.fair {
		res.queued = c.direct.leftQueued(ctx, r.name)
	}
	return res, nil
}

// schedule waits for the first grant, injects the round's faults one after
// the other, then waits for a grant after the last one: the lock must be
// usable again.
func (r *round) schedule(ctx context.Context) error {
	wctx, cancel := context.WithTimeout(ctx, recoveryTimeout)
	err := r.hist.waitGrants(wctx, 0, grantsAround)
	cancel()
	if err != nil {
		return fmt.Errorf("before the faults: %w", err)
	}
	for _, f := range r.faults {
		if err := sleepCtx(ctx, f.gap); err != nil {
			return err
		}
		if err := r.inject(ctx, f); err != nil {
			return fmt.Errorf("inject %v: %w", f, err)
		}
	}
	end := r.hist.now()
	wctx, cancel = context.WithTimeout(ctx, recoveryTimeout)
	defer cancel()
	if err := r.hist.waitGrants(wctx, end, grantsAround); err != nil {
		return fmt.Errorf("within %v after the last fault (%s): %w", recoveryTimeout, describe(r.faults), err)
	}
	return nil
}

// backendOffset shifts the lead faults of a backend's cases past the
// process backend's, so that a bounded run over both backends (four cases
// of defaultRounds) leads with every kind.
func backendOffset(b integration.Backend) uint64 {
	if b == integration.BackendProcess {
		return 0
	}
	return 2 * defaultRounds
}

// outside reports whether the round breaks an assumption of docs/safety.md:
// one of its faults does, or the suite's process stalled (stallOutside).
func (r *round) outside() bool {
	return r.stalled >= stallOutside || r.faultOutside()
}

// faultOutside reports whether one of the round's faults breaks an
// assumption.
func (r *round) faultOutside() bool {
	for _, f := range r.faults {
		if f.kind.outside {
			return true
		}
	}
	return false
}

// countersLost reports whether a fault may have lost the fencing counter:
// on one master any restart without data; on RedLock, masters wiped at
// once beyond what the raise to every master tolerates (docs/safety.md:
// with all five raised, up to two may lose their data).
func (r *round) countersLost() bool {
	for _, f := range r.faults {
		if n := f.wipes(); n > 0 && (r.topo.masters == 1 || n > r.topo.masters-r.topo.quorum) {
			return true
		}
	}
	return false
}
