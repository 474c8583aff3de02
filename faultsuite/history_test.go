package faultsuite

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rlock-go/rlock/lock"
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
	granted  chan struct{} // closed and replaced at every grant
}

func newHistory() *history {
	return &history{start: time.Now(), granted: make(chan struct{})}
}

func (h *history) now() instant { return time.Since(h.start) }

// holding is one acquisition by one worker. Its fields are written by its
// worker, except lostAt, which the hold's context callback may set; all
// are guarded by history.mu.
type holding struct {
	id     int
	worker int
	call   instant // Lock or TryLock called
	ret    instant // ... and returned the hold
	token  uint64
	paused bool // the holder paused past its lease before its last write

	writes []write

	lostAt     instant // the hold's context was cancelled with ErrLockLost; never if not
	unlockCall instant // never if Unlock was not called
	unlockRet  instant
	unlockErr  error
	// foundLost: Unlock answered ErrLockLost, so the lock had been lost
	// by then, signalled or not.
	foundLost bool
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

// acquired records a grant returned to worker at ret, for a call made at
// call, and wakes whoever waits for a grant.
func (h *history) acquired(worker int, call instant, hd held) *holding {
	ret := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	x := &holding{
		id: len(h.holdings), worker: worker, call: call, ret: ret, token: hd.Fence(),
		lostAt: never, unlockCall: never, unlockRet: never,
	}
	h.holdings = append(h.holdings, x)
	close(h.granted)
	h.granted = make(chan struct{})
	// The loss signal: the context callback runs as soon as the context
	// is cancelled. Its time is an upper bound; the worker also notes a
	// loss it sees itself (noteLoss keeps the earliest).
	ctx := hd.Context()
	context.AfterFunc(ctx, func() {
		if errors.Is(context.Cause(ctx), lock.ErrLockLost) {
			h.noteLoss(x, h.now())
		}
	})
	return x
}

// noteLoss records that x's context was found cancelled with ErrLockLost
// at or before at.
func (h *history) noteLoss(x *holding, at instant) {
	h.mu.Lock()
	defer h.mu.Unlock()
	x.lostAt = min(x.lostAt, at)
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
	x.unlockCall, x.unlockRet, x.unlockErr = call, ret, err
	x.foundLost = errors.Is(err, lock.ErrLockLost)
}

// waitGrants waits until n holdings have been granted at or after from.
func (h *history) waitGrants(ctx context.Context, from instant, n int) error {
	for {
		h.mu.Lock()
		ch := h.granted
		got := 0
		for _, x := range h.holdings {
			if x.ret >= from {
				got++
			}
		}
		h.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%d of %d grants: %w", got, n, context.Cause(ctx))
		}
	}
}

// waitHeld waits until some holding is held: granted, not unlocked, not
// known lost.
func (h *history) waitHeld(ctx context.Context) error {
	for {
		h.mu.Lock()
		ch := h.granted
		ok := false
		for _, x := range h.holdings {
			if x.unlockCall == never && x.lostAt == never {
				ok = true
			}
		}
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

// resource is the guarded resource: it accepts a write only with a token at
// least as high as any it accepted before, in one atomic step.
type resource struct {
	mu  sync.Mutex
	max uint64
}

// write offers x's token to the resource. alive, when not nil, is the
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
	accepted := x.token >= r.max
	if accepted {
		r.max = x.token
	}
	r.mu.Unlock()
	ret := h.now()
	h.mu.Lock()
	x.writes = append(x.writes, write{call: call, ret: ret, at: at, believed: believed, accepted: accepted})
	h.mu.Unlock()
	return true
}
