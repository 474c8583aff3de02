package multilock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rlock-go/rlock/internal/oneline"
	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/observe"
	"github.com/rlock-go/rlock/watchdog"
)

// Held is one acquisition of a Lock: one lock.Held per master that
// granted it, all of the same owner.
//
// Context() carries that owner, so Lock or TryLock with it re-enters the
// lock on every master (hold counts go up by one there). It is cancelled
// when the acquisition ends: with a *lock.LostError cause (matching
// lock.ErrLockLost) once fewer than a quorum of masters still hold it —
// each master's loss is its own watchdog's finding, its Client's Close, or
// a release on that master from outside this Held —, with an explicit
// Lease when its Validity is over, and plainly after Unlock. It keeps the
// values of the context passed to Lock, not its deadline or cancellation.
type Held struct {
	l        *Lock
	ctx      context.Context
	cancel   context.CancelCauseFunc
	owner    uint64
	fences   []uint64 // per fencing group (fence.go), nil without Fenced
	at       time.Time
	validity time.Duration

	mu        sync.Mutex
	slots     []*slot
	alive     int             // slots neither lost nor released
	lost      *lock.LostError // set once the quorum was lost
	unlocking bool
	unlocked  bool        // an Unlock ran
	expire    *time.Timer // ends an explicit lease's acquisition at its validity

	unhold func() // ends the acquisition's record in the local queue's entry

	settled <-chan struct{} // closed once the acquiring round's attempts are dealt with
}

// slot is the hold on one master.
type slot struct {
	i        int
	h        *lock.Held
	stop     func() bool // stops the loss watch on h's context
	gone     error       // why it ended without our release (loss, Close)
	released bool
}

func newHeld(ctx context.Context, l *Lock, o *options, grants []reply, fences []uint64, at time.Time, validity time.Duration) *Held {
	owner, _ := lock.OwnerFrom(ctx)
	hctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	h := &Held{l: l, ctx: hctx, cancel: cancel, owner: owner, fences: fences, at: at, validity: validity}
	if o.lease != 0 {
		// An explicit lease is relied on only for its validity: the
		// acquisition ends one round trip before it, as each master's
		// hold is judged before its own lease ends (watchdog.Margin).
		h.expire = time.AfterFunc(time.Until(at.Add(validity-watchdog.DefaultRoundTrip)), h.validityEnded)
	}
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

// adopt adds a grant that came after its round acquired, while the
// acquisition is live (no Unlock begun, no loss, validity not over): the
// master then counts among those that hold it, is released by Unlock, and
// its loss counts against the quorum. It reports whether it did;
// otherwise the caller releases the grant.
func (h *Held) adopt(g reply) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.unlocking || h.unlocked || h.lost != nil {
		return false
	}
	s := &slot{i: g.i, h: g.h}
	h.slots = append(h.slots, s)
	h.alive++
	s.stop = context.AfterFunc(g.h.Context(), func() { h.masterEnded(s) })
	return true
}

// validityEnded ends an acquisition taken with an explicit lease when its
// validity is over.
func (h *Held) validityEnded() {
	h.mu.Lock()
	var lost *lock.LostError
	if h.lost == nil && !h.unlocking && !h.unlocked {
		h.lost = &lock.LostError{Name: h.l.names(), Addr: strings.Join(slices.Compact(slices.Sorted(slices.Values(h.l.addrs))), ","), Kind: observe.LossLeaseExpired,
			Reason: fmt.Sprintf("validity of %v ran out", h.validity)}
		lost = h.lost
	}
	h.mu.Unlock()
	if lost != nil {
		h.cancel(lost)
	}
}

// errReleasedElsewhere is the cause of a master's hold ended plainly by
// an end that was not this acquisition's own Unlock nor a loss.
var errReleasedElsewhere = errors.New("rlock: released on this master outside the multi-master lock")

// masterEnded runs when a master's hold context ends without our own
// release (which stops this watch first): a loss, a Client's Close, or a
// release from outside all count against the quorum.
func (h *Held) masterEnded(s *slot) {
	cause := context.Cause(s.h.Context())
	if !errors.Is(cause, lock.ErrLockLost) && !errors.Is(cause, lock.ErrClosed) {
		cause = oneline.Join(lock.ErrLockLost, errReleasedElsewhere)
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
		Kind: observe.LossQuorum,
		Reason: fmt.Sprintf("%s held on %d of %d %s, %d needed",
			h.l.kind, h.alive, len(h.l.ms), h.l.parts, h.l.quorum),
		Err: oneline.Join(causes...),
	}
}

// Context returns the acquisition's context; see Held.
func (h *Held) Context() context.Context {
	if !h.valid() {
		return invalidCtx
	}
	return h.ctx
}

// valid reports whether h was returned by Lock or TryLock. A nil or zero
// Held (the one a failed TryLock returns) holds nothing: its Unlock
// returns lock.ErrInvalid, its Context is already cancelled with cause
// lock.ErrInvalid, and its other methods return zero values.
func (h *Held) valid() bool { return h != nil && h.l != nil && h.ctx != nil }

// invalidCtx is the Context of a nil or zero Held.
var invalidCtx = func() context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(invalidf("a nil or zero Held holds nothing"))
	return ctx
}()

// Done is closed when the acquisition ends: Context().Done().
func (h *Held) Done() <-chan struct{} { return h.Context().Done() }

// Owner returns the owner token, the same on every master.
func (h *Held) Owner() uint64 {
	if !h.valid() {
		return 0
	}
	return h.owner
}

// AcquiredAt returns when the round that acquired the lock began: each
// master's lease runs from about then.
func (h *Held) AcquiredAt() time.Time {
	if !h.valid() {
		return time.Time{}
	}
	return h.at
}

// Validity returns lease − elapsed − drift at the acquisition: how long
// after AcquiredAt the holder may rely on the lock when it took an
// explicit Lease. With the watchdog the lock lasts until Unlock or loss.
func (h *Held) Validity() time.Duration {
	if !h.valid() {
		return 0
	}
	return h.validity
}

// Masters returns on how many masters the lock is held now: neither lost
// nor released (for a MultiLock over names of one Client, how many of its
// Mutexes).
func (h *Held) Masters() int {
	if !h.valid() {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.alive
}

// Settled is closed once every master the acquiring round asked has
// answered, or its attempt has ended, and each grant that came after Lock
// or TryLock returned has joined this acquisition or is being given back
// (after Unlock began, or a loss): from then on Masters does not grow. Lock
// returns as soon as a quorum granted, so Masters may grow until then; an
// attempt on a master that does not answer ends within about twice its
// Client's CommandTimeout. A nil or zero Held returns a closed channel.
func (h *Held) Settled() <-chan struct{} {
	if !h.valid() || h.settled == nil {
		return closedChan
	}
	return h.settled
}

// closedChan is the Settled of a Held with nothing to wait for.
var closedChan = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

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
//
// A MultiLock over several names (of one Client, say) has a token per
// name, which FenceOf returns; its Fence returns 0.
func (h *Held) Fence() uint64 {
	if !h.valid() || len(h.fences) != 1 {
		return 0
	}
	return h.fences[0]
}

// FenceOf returns the fencing token of the lock name in this acquisition,
// 0 when it was taken without the Fenced option or name is not one of its
// Mutexes' names. A MultiLock over several names has a token per name,
// the one its own counter gave (written back to the name's other masters,
// if it has several): it strictly increases across acquisitions of that
// name by anyone — a fenced lock.Mutex of the name, Redisson's
// RFencedLock, another MultiLock — as Fence describes, and one name's
// counter is never raised to another's. A RedLock's names, and a lock
// over one name, share one token: FenceOf returns Fence for each.
func (h *Held) FenceOf(name string) uint64 {
	if !h.valid() || h.fences == nil {
		return 0
	}
	for i, m := range h.l.ms {
		if m.Name() == name {
			return h.fences[h.l.group[i]]
		}
	}
	return 0
}

// Unlock releases this acquisition on every master that still holds it,
// in parallel (a grant still in flight is released when it comes): hold
// counts go down by one, and where they reach 0 the lock is free and a
// waiter is woken. Each master's release is retried until
// ctx ends (lock.Held.Unlock). Failures are joined, each naming its
// master; a failed Unlock may be called again for the masters it could not
// release, except those whose Client is closed (ErrClosed again).
//
// May return ErrNotHeld (already unlocked), ErrLockLost (a *LostError: the
// quorum was lost before, and the masters still holding are released
// anyway; or a master's release found its hold lost, or went unanswered
// until its lease was judged run out, as lock.Held.Unlock reports it),
// ErrUnavailable, ErrClosed (this Unlock still had to release a master
// whose Client was closed, as after an Unlock cut by its ctx: that Close
// released the hold or left it to expire with its lease), ErrInvalid. A
// Client closed while the acquisition was live, before any Unlock, counts
// as a lost master instead (ErrLockLost when too few are left).
func (h *Held) Unlock(ctx context.Context) error {
	if !h.valid() {
		return invalidf("Unlock of a nil or zero Held (a failed Lock or TryLock returns nil): it holds nothing")
	}
	if ctx == nil {
		return invalidf("nil context")
	}
	todo, err := h.beginUnlock()
	if err != nil {
		return err
	}
	if h.expire != nil {
		h.expire.Stop()
	}

	for _, s := range todo {
		s.stop() // our release must not count as a loss
	}
	errs := make([]error, len(todo))
	var wg sync.WaitGroup
	for k := 1; k < len(todo); k++ {
		// On the master's Client's worker; inline once it no longer
		// lends (closed: the release returns at once).
		wg.Add(1)
		f := func() {
			defer wg.Done()
			errs[k] = todo[k].h.Unlock(ctx)
		}
		if !core.Go(h.l.ms[todo[k].i].Client(), f) {
			f()
		}
	}
	if len(todo) > 0 {
		errs[0] = todo[0].h.Unlock(ctx)
	}
	wg.Wait()

	h.mu.Lock()
	gone, failed := h.releasedLocked(todo, errs)
	h.unlocking = false
	h.unlocked = true
	lost := h.lost
	h.mu.Unlock()
	h.cancel(nil)
	if h.unhold != nil {
		h.unhold() // now, not when the context's AfterFunc runs: the next local waiter's turn
	}
	if lost != nil {
		gone = append([]error{lost}, gone...)
	}
	return oneline.Join(append(gone, failed...)...)
}

// beginUnlock marks an Unlock in progress and returns the masters it
// must release, or the error Unlock returns at once: another Unlock in
// progress, or nothing left to release (ErrNotHeld, or the quorum's
// loss).
func (h *Held) beginUnlock() ([]*slot, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.unlocking {
		return nil, oneline.Join(lock.ErrNotHeld, errors.New("rlock: unlock already in progress"))
	}
	var todo []*slot
	for _, s := range h.slots {
		if s.gone == nil && !s.released {
			todo = append(todo, s)
		}
	}
	if len(todo) == 0 && (h.unlocked || h.lost != nil) {
		if h.lost != nil {
			return nil, h.lost
		}
		return nil, lock.ErrNotHeld
	}
	h.unlocking = true
	return todo, nil
}

// releasedLocked applies the masters' release errors (errs[k] for
// todo[k]) and returns the losses the releases found (gone) and the
// failures (failed), each naming its master. h.mu is held.
func (h *Held) releasedLocked(todo []*slot, errs []error) (gone, failed []error) {
	for k, s := range todo {
		if s.gone != nil {
			continue // lost while we released: counted then
		}
		err := errs[k]
		switch {
		case err == nil:
		case errors.Is(err, lock.ErrLockLost):
			// Gone on that master: nothing left to release. Said as
			// lock.Held.Unlock says it: a lease judged run out while the
			// release was unanswered leaves the key up to the
			// judgement's margin after this Unlock (found by the fault
			// suite: Unlock returned nil, and the count was still read).
			gone = append(gone, h.l.onMaster(s.i, "release", err))
		case errors.Is(err, lock.ErrNotHeld):
			// Already gone on that master: nothing left to release.
		default:
			// ErrClosed among them: the master's Client was closed, and
			// its Close released the hold or left it to expire; nothing
			// tells which (found by the fault suite: counted as released,
			// a second Unlock said nil while the master, stopped, still
			// held the names). As lock.Held.Unlock, say ErrClosed.
			failed = append(failed, h.l.onMaster(s.i, "release", err))
			continue
		}
		s.released = true
		h.alive--
	}
	return gone, failed
}
