package faultsuite

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/rlock-go/rlock/integration"
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
}

// caseRun is one backend and topology: the workers of its rounds.
type caseRun struct {
	cl      *cluster
	topo    topology
	workers []*worker
	sink    *eventSink
	kinds   []string // the fault kinds allowed; nil: all
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
		faults:  plan(rng, seed, topo, available(cl.clock, c.kinds)),
		hist:    newHistory(),
	}
	r.events = &events{hist: r.hist}
	c.sink.reset(r.events)
	defer c.sink.reset(nil)
	ctx, cancel := context.WithTimeout(t.Context(), roundTimeout)
	defer cancel()
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Go(func() { w.run(wctx, r) })
	}
	err := r.schedule(ctx)
	stop()
	wg.Wait()
	if err != nil {
		return roundResult{}, errors.Join(err, r.repair(context.WithoutCancel(ctx)))
	}
	return r.check(), nil
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

// outside reports whether the round breaks an assumption of docs/safety.md.
func (r *round) outside() bool {
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
