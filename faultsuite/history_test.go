package faultsuite

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/observe"
)

// Times in a history are offsets from the round's start on the monotonic
// clock; every client is in this process, so they are comparable.
type instant = time.Duration

// never is an instant later than any in a round.
const never instant = 1<<63 - 1

// history records one round: every acquisition ("holding"), its writes
// and how it ended. It also tells the scheduler when holdings are granted.
type history struct {
	start time.Time

	mu       sync.Mutex
	holdings []*holding
	changed  chan struct{} // closed and replaced at every grant and every write
	// reads are the hold counts read from Redis (single master only).
	reads []countRead
	// failed are the acquisitions with an owner in their ctx that
	// returned an error other than a plain refusal: they may have run.
	failed []failedAcquire
	// probes are the loss signals checked against Redis: was the lock
	// still held when its loss was signalled?
	probes []lossProbe
	closed bool           // the round is over: no more background reads
	bg     sync.WaitGroup // background reads in flight
	// counter reads a field's hold count in Redis; nil: no reads.
	counter *counter
}

// countRead is one HGET of a holder field's count, made on a direct
// connection (no proxy, no fault), with its call and return times.
type countRead struct {
	lock      int // the index of the read's name in the round's names
	field     uint64
	call, ret instant
	count     int
}

// failedAcquire is an acquisition of field that returned an error: its
// request may have run in Redis (and be undone later, or not).
type failedAcquire struct {
	field     uint64
	call, ret instant
}

// lossProbe is what Redis held when a loss was signalled.
type lossProbe struct {
	holding int
	// held: Redis still held the lock for the field (on a quorum of
	// masters for RedLock); known: the read answered.
	held, known bool
}

func newHistory() *history {
	return &history{start: time.Now(), changed: make(chan struct{})}
}

func (h *history) now() instant { return time.Since(h.start) }

// holding is one acquisition by one worker. Its fields are written by its
// worker, except lostAt, which the hold's context callback may set; all
// are guarded by history.mu.
type holding struct {
	id     int
	worker int
	// client is the goroutine that made it, for porcupine's view; field
	// is its owner (the holder field on every master): holdings of one
	// field share the hold (re-entries, shared owners).
	client int
	field  uint64
	// lock is the index of its name in the round's names (the multi
	// topology's: a MultiLock's acquisition is one holding per name);
	// siblings are the holdings of its other names, on the first one
	// only, and sibling marks those. Siblings share the writes' moments,
	// the loss signal and the Unlock.
	lock     int
	siblings []*holding
	sibling  bool
	// lease is the explicit Lease; 0 for a watchdog hold.
	lease  time.Duration
	call   instant // Lock or TryLock called
	ret    instant // ... and returned the hold
	token  uint64
	paused bool // the holder paused past its lease before its last write

	writes []write

	lostAt instant // the hold's context was cancelled with ErrLockLost; never if not
	// closedAt: the hold's context was cancelled with ErrClosed (its
	// Client's Close ended it); never if not. The holder no longer relies
	// on the lock from then; Redis may keep it until its lease runs out.
	closedAt   instant
	unlockCall instant // never if Unlock was not called
	unlockRet  instant
	unlockErr  error
	// foundLost: Unlock answered ErrLockLost, so the lock had been lost
	// by then, signalled or not. foundInRedis: the loss was found in
	// Redis (the release found the lock gone, or taken), not judged by
	// the client's clock (a lease that ran out while the release was in
	// flight, which the watchdog judges before Redis lets the lock go).
	foundLost, foundInRedis bool
}

// write is one write to the resource by a holding.
type write struct {
	call, ret instant
	at        instant // when the resource applied or refused it, under its mutex
	// believed: the holder believed it held the lock: its context was not
	// cancelled at the instant of the write, or, for a paused holder, at
	// its last look before the pause.
	believed bool
	accepted bool
}

// all is x and its siblings: the holdings of one acquisition.
func (x *holding) all() []*holding { return append([]*holding{x}, x.siblings...) }

// acquired records a grant returned to worker at ret, for a call made at
// call, covering the names of spans (one holding each, the first
// returned), and wakes whoever waits for a grant.
func (h *history) acquired(worker, client int, call instant, hd held, lease time.Duration, spans []span) *holding {
	ret := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	var first *holding
	for _, sp := range spans {
		x := &holding{
			id: len(h.holdings), worker: worker, client: client, field: hd.Owner(), lock: sp.lock, lease: lease,
			call: call, ret: ret, token: sp.token,
			lostAt: never, closedAt: never, unlockCall: never, unlockRet: never,
		}
		h.holdings = append(h.holdings, x)
		if first == nil {
			first = x
		} else {
			x.sibling = true
			first.siblings = append(first.siblings, x)
		}
		h.watchLoss(x, hd.Context())
	}
	h.changedLocked()
	return first
}

// watchLoss notes x's loss when ctx, its hold's context, is cancelled
// with ErrLockLost.
func (h *history) watchLoss(x *holding, ctx context.Context) {
	// The loss signal: the context callback runs as soon as the context
	// is cancelled. Its time is an upper bound; the worker also notes a
	// loss it sees itself (noteLoss keeps the earliest). Redis is asked
	// at once whether it still held the lock then (a false loss).
	context.AfterFunc(ctx, func() {
		switch cause := context.Cause(ctx); {
		case errors.Is(cause, lock.ErrLockLost):
			h.noteLoss(x, h.now())
			h.probeLoss(x)
		case errors.Is(cause, lock.ErrClosed):
			h.noteClosed(x, h.now())
		}
	})
}

// read reads the hold counts of x's field on each of its names from
// Redis now, in the history.
func (h *history) read(x *holding) {
	if h.counter == nil || !h.counter.single() {
		return
	}
	for _, y := range x.all() {
		call := h.now()
		n, ok := h.counter.count(y.lock, y.field)
		ret := h.now()
		if !ok {
			continue
		}
		h.mu.Lock()
		h.reads = append(h.reads, countRead{lock: y.lock, field: y.field, call: call, ret: ret, count: n})
		h.mu.Unlock()
	}
}

// probeLoss reads, in the background, whether Redis still holds x's
// field, for the false-loss rate; on a single master it is also a read.
func (h *history) probeLoss(x *holding) {
	h.mu.Lock()
	if h.closed || h.counter == nil {
		h.mu.Unlock()
		return
	}
	h.bg.Add(1)
	h.mu.Unlock()
	go func() {
		defer h.bg.Done()
		call := h.now()
		held, known, n := h.counter.held(x.lock, x.field)
		ret := h.now()
		h.mu.Lock()
		defer h.mu.Unlock()
		h.probes = append(h.probes, lossProbe{holding: x.id, held: held, known: known})
		if known && h.counter.single() {
			h.reads = append(h.reads, countRead{lock: x.lock, field: x.field, call: call, ret: ret, count: n})
		}
	}()
}

// failedAcquire records an acquisition of field that failed at ret.
func (h *history) failedAcquire(field uint64, call instant) {
	ret := h.now()
	h.mu.Lock()
	h.failed = append(h.failed, failedAcquire{field: field, call: call, ret: ret})
	h.mu.Unlock()
}

// close ends the background reads, before the checks.
func (h *history) close() {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.bg.Wait()
}

// noteLoss records that x's context (and its siblings') was found
// cancelled with ErrLockLost at or before at.
func (h *history) noteLoss(x *holding, at instant) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, y := range x.all() {
		y.lostAt = min(y.lostAt, at)
	}
}

// noteClosed records that x's context (and its siblings') was cancelled
// with ErrClosed at at.
func (h *history) noteClosed(x *holding, at instant) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, y := range x.all() {
		y.closedAt = min(y.closedAt, at)
	}
}

// checkLoss notes a loss if ctx says so, now.
func (h *history) checkLoss(x *holding, ctx context.Context) {
	if errors.Is(context.Cause(ctx), lock.ErrLockLost) {
		h.noteLoss(x, h.now())
	}
}

func (h *history) unlocked(x *holding, call, ret instant, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, y := range x.all() {
		y.unlockCall, y.unlockRet, y.unlockErr = call, ret, err
		y.foundLost = errors.Is(err, lock.ErrLockLost)
		if le, ok := errors.AsType[*lock.LostError](err); ok {
			y.foundInRedis = le.Kind != observe.LossRenewFailed && le.Kind != observe.LossLeaseExpired
		}
	}
}

// pause marks x and its siblings as paused past their lease.
func (h *history) pause(x *holding) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, y := range x.all() {
		y.paused = true
	}
}

// changedLocked wakes the waits below; h.mu is held.
func (h *history) changedLocked() {
	close(h.changed)
	h.changed = make(chan struct{})
}

// await waits until cond, called with h.mu held, is true: it is asked
// again at every grant and every write.
func (h *history) await(ctx context.Context, cond func() bool) error {
	for {
		h.mu.Lock()
		ch, ok := h.changed, cond()
		h.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// waitGrants waits until n holdings have been granted at or after from.
func (h *history) waitGrants(ctx context.Context, from instant, n int) error {
	got := 0
	err := h.await(ctx, func() bool {
		got = 0
		for _, x := range h.holdings {
			if x.ret >= from && !x.sibling {
				got++
			}
		}
		return got >= n
	})
	if err != nil {
		return fmt.Errorf("%d of %d grants: %w", got, n, err)
	}
	return nil
}

// waitWrite waits until a holding of another field than field, granted
// at or after from, has written.
func (h *history) waitWrite(ctx context.Context, from instant, field uint64) error {
	return h.await(ctx, func() bool {
		for _, x := range h.holdings {
			if x.ret >= from && !x.sibling && x.field != field && len(x.writes) > 0 {
				return true
			}
		}
		return false
	})
}

// waitHeld waits until some holding is held: granted, not unlocked, not
// known lost.
func (h *history) waitHeld(ctx context.Context) error {
	return h.await(ctx, func() bool {
		for _, x := range h.holdings {
			if x.unlockCall == never && x.lostAt == never {
				return true
			}
		}
		return false
	})
}

// snapshot returns copies of the holdings, for the checks once the
// workers are gone.
func (h *history) snapshot() []holding {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]holding, len(h.holdings))
	for i, x := range h.holdings {
		out[i] = *x
		out[i].writes = append([]write(nil), x.writes...)
	}
	return out
}

// observations returns the count reads, failed acquisitions and loss
// probes, once the workers and background reads are gone.
func (h *history) observations() ([]countRead, []failedAcquire, []lossProbe) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]countRead(nil), h.reads...), append([]failedAcquire(nil), h.failed...), append([]lossProbe(nil), h.probes...)
}

// resource is the guarded resource, one per name of the round: each
// accepts a write only with a token at least as high as any it accepted
// before, in one atomic step.
type resource struct {
	mu  sync.Mutex
	max [nNames]uint64
}

// write offers x's token to the resource, and each sibling's to its
// name's, in one step. alive, when not nil, is the
// holder's context: the write is made only if it is not cancelled at that
// instant (a holder writes only while it believes it holds the lock), and
// reports false otherwise. A nil alive is a holder that looked before and
// believed what it saw then (believed).
func (r *resource) write(h *history, x *holding, alive context.Context, believed bool) (made bool) {
	call := h.now()
	r.mu.Lock()
	at := h.now()
	if alive != nil {
		if alive.Err() != nil {
			r.mu.Unlock()
			h.checkLoss(x, alive)
			return false
		}
		believed = true
	}
	xs := x.all()
	accepted := make([]bool, len(xs))
	for i, y := range xs {
		accepted[i] = y.token >= r.max[y.lock]
		if accepted[i] {
			r.max[y.lock] = y.token
		}
	}
	r.mu.Unlock()
	ret := h.now()
	h.mu.Lock()
	for i, y := range xs {
		y.writes = append(y.writes, write{call: call, ret: ret, at: at, believed: believed, accepted: accepted[i]})
	}
	h.changedLocked()
	h.mu.Unlock()
	return true
}
