package multilock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rlock-go/rlock/lock"
)

// Held is one acquisition of a Lock: one lock.Held per master that
// granted it, all of the same owner.
//
// Context() carries that owner, so Lock or TryLock with it re-enters the
// lock on every master (hold counts go up by one there). It is cancelled
// when the acquisition ends: with a *lock.LostError cause (matching
// lock.ErrLockLost) once fewer than a quorum of masters still hold it —
// each master's loss is its own watchdog's finding, or its Client's
// Close —, and plainly after Unlock. It is derived from the context passed
// to Lock, so it also ends with that one.
type Held struct {
	l        *Lock
	ctx      context.Context
	cancel   context.CancelCauseFunc
	owner    uint64
	fence    uint64
	at       time.Time
	validity time.Duration

	mu        sync.Mutex
	slots     []*slot
	alive     int             // slots neither lost nor released
	lost      *lock.LostError // set once the quorum was lost
	unlocking bool
	unlocked  bool // an Unlock ran
}

// slot is the hold on one master.
type slot struct {
	i        int
	h        *lock.Held
	stop     func() bool // stops the loss watch on h's context
	gone     error       // why it ended without our release (loss, Close)
	released bool
}

func newHeld(ctx context.Context, l *Lock, o *options, grants []reply, fence uint64, at time.Time, validity time.Duration) *Held {
	owner, _ := lock.OwnerFrom(ctx)
	hctx, cancel := context.WithCancelCause(ctx)
	h := &Held{l: l, ctx: hctx, cancel: cancel, owner: owner, fence: fence, at: at, validity: validity}
	h.slots = make([]*slot, len(grants))
	h.alive = len(grants)
	h.mu.Lock() // a loss reported before the loop ends waits for it
	for k, g := range grants {
		s := &slot{i: g.i, h: g.h}
		h.slots[k] = s
		s.stop = context.AfterFunc(g.h.Context(), func() { h.masterEnded(s) })
	}
	h.mu.Unlock()
	return h
}

// masterEnded runs when a master's hold context ends. Our own release
// cancels it plainly; a loss or a Client's Close counts against the
// quorum.
func (h *Held) masterEnded(s *slot) {
	cause := context.Cause(s.h.Context())
	if !errors.Is(cause, lock.ErrLockLost) && !errors.Is(cause, lock.ErrClosed) {
		return
	}
	h.mu.Lock()
	if s.gone != nil || s.released {
		h.mu.Unlock()
		return
	}
	s.gone = cause
	h.alive--
	var lost *lock.LostError
	if h.alive < h.l.quorum && h.lost == nil && !h.unlocking && !h.unlocked {
		h.lost = h.lostError()
		lost = h.lost
	}
	h.mu.Unlock()
	if lost != nil {
		h.cancel(lost)
	}
}

// lostError describes the quorum's loss; h.mu is held.
func (h *Held) lostError() *lock.LostError {
	var names, addrs []string
	var causes []error
	for _, s := range h.slots {
		if s.gone == nil {
			continue
		}
		if n := h.l.ms[s.i].Name(); !slices.Contains(names, n) {
			names = append(names, n)
		}
		addrs = append(addrs, h.l.addrs[s.i])
		causes = append(causes, s.gone)
	}
	return &lock.LostError{
		Name: strings.Join(names, ","),
		Addr: strings.Join(addrs, ","),
		Kind: lock.LossQuorum,
		Reason: fmt.Sprintf("%s held on %d of %d masters, %d needed",
			h.l.kind, h.alive, len(h.l.ms), h.l.quorum),
		Err: errors.Join(causes...),
	}
}

// Context returns the acquisition's context; see Held.
func (h *Held) Context() context.Context { return h.ctx }

// Done is closed when the acquisition ends: Context().Done().
func (h *Held) Done() <-chan struct{} { return h.ctx.Done() }

// Owner returns the owner token, the same on every master.
func (h *Held) Owner() uint64 { return h.owner }

// AcquiredAt returns when the round that acquired the lock began: each
// master's lease runs from about then.
func (h *Held) AcquiredAt() time.Time { return h.at }

// Validity returns lease − elapsed − drift at the acquisition: how long
// after AcquiredAt the holder may rely on the lock when it took an
// explicit Lease. With the watchdog the lock lasts until Unlock or loss.
func (h *Held) Validity() time.Duration { return h.validity }

// Masters returns on how many masters the lock is held now: neither lost
// nor released.
func (h *Held) Masters() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.alive
}

// Fence returns the fencing token of this acquisition when it was taken
// with the Fenced option, 0 otherwise. Tokens of a name strictly increase
// across acquisitions, re-entries included, whoever holds the lock, as
// long as the masters keep their counters (docs/safety.md).
//
// Pass it with every write to the resource the lock guards; the resource
// must remember the highest token it accepted and reject lower ones, in
// the same atomic step as the write. That stops a holder that lost the
// lock without knowing it — paused (GC, SIGSTOP) past its lease, its
// requests delayed in the network, its masters expiring the lock after a
// clock jump — from overwriting the work of a later holder. It does not
// stop two holders from working at once: the later holder's writes are
// only ordered after the earlier's, the earlier's are rejected once the
// resource has seen the later token. It protects nothing the resource
// does not check, and tokens may repeat if too many masters lose their
// counters (restarts without persistence).
func (h *Held) Fence() uint64 { return h.fence }

// Unlock releases this acquisition on every master that still holds it,
// in parallel: hold counts go down by one, and where they reach 0 the lock
// is free and a waiter is woken. Each master's release is retried until
// ctx ends (lock.Held.Unlock). Failures are joined, each naming its
// master; a failed Unlock may be called again for the masters it could not
// release.
//
// May return ErrNotHeld (already unlocked), ErrLockLost (a *LostError: the
// quorum was lost before; the masters still holding are released anyway),
// ErrUnavailable, ErrInvalid.
func (h *Held) Unlock(ctx context.Context) error {
	if ctx == nil {
		return invalidf("nil context")
	}
	h.mu.Lock()
	if h.unlocking {
		h.mu.Unlock()
		return errors.Join(lock.ErrNotHeld, errors.New("rlock: unlock already in progress"))
	}
	var todo []*slot
	for _, s := range h.slots {
		if s.gone == nil && !s.released {
			todo = append(todo, s)
		}
	}
	if len(todo) == 0 && (h.unlocked || h.lost != nil) {
		lost := h.lost
		h.mu.Unlock()
		if lost != nil {
			return lost
		}
		return lock.ErrNotHeld
	}
	h.unlocking = true
	h.mu.Unlock()

	for _, s := range todo {
		s.stop() // our release must not count as a loss
	}
	errs := make([]error, len(todo))
	var wg sync.WaitGroup
	for k := 1; k < len(todo); k++ {
		wg.Go(func() { errs[k] = todo[k].h.Unlock(ctx) })
	}
	if len(todo) > 0 {
		errs[0] = todo[0].h.Unlock(ctx)
	}
	wg.Wait()

	var failed []error
	h.mu.Lock()
	for k, s := range todo {
		if s.gone != nil {
			continue // lost while we released: counted then
		}
		err := errs[k]
		switch {
		case err == nil:
		case errors.Is(err, lock.ErrLockLost), errors.Is(err, lock.ErrNotHeld), errors.Is(err, lock.ErrClosed):
			// Already gone on that master: nothing left to release.
		default:
			failed = append(failed, h.l.onMaster(s.i, "release", err))
			continue
		}
		s.released = true
		h.alive--
	}
	h.unlocking = false
	h.unlocked = true
	lost := h.lost
	h.mu.Unlock()
	h.cancel(nil)
	if lost != nil {
		return errors.Join(append([]error{lost}, failed...)...)
	}
	return errors.Join(failed...)
}
