package lock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rlock-go/rlock/observe"
	"github.com/rlock-go/rlock/reentrant"
)

// Held is one hold of a lock, returned by Lock and TryLock. Its Context
// carries the owner, so Lock with it re-enters (each re-entry is a Held of
// its own, released by its own Unlock).
//
// Context() keeps the values of the context given to Lock (the owner, a
// trace span) but not its deadline or cancellation: the context given to
// Lock bounds the wait, never the hold. It is cancelled when the hold
// ends, and only then: with cause ErrLockLost (a *LostError) when the
// lock was lost, plainly (context.Canceled) by this Held's own Unlock,
// with ErrClosed by Client.Close. Tell them apart with
// errors.Is(context.Cause(h.Context()), ErrLockLost). A re-entry taken
// with this Held's context is a hold of its own: it ends with its own
// Unlock, or with the loss of the lock, which ends every hold of it.
type Held struct {
	c       *Client
	l       *hold
	g       *gen // its generation: the Helds of its hold tracked by one watchdog entry
	owner   uint64
	at      time.Time
	fence   uint64
	lease   time.Duration // its lease (WatchdogTimeout when renewed)
	reentry bool
	renew   bool // taken without Lease: the watchdog renews it (guarded by its hold's turn)

	mu     sync.Mutex
	done   bool  // ended
	late   bool  // unlocked by the settlement of a failed Unlock: the next Unlock returns nil
	given  bool  // given up by an unconfirmed Unlock: its context has ended, its release is settled in the background
	reason error // why: nil (unlocked), ErrClosed, a *LostError; the unconfirmed Unlock's error once given up
	// ctx is the context given to Lock (carrying the owner) until the
	// first call of context, which replaces it with the hold's own,
	// cancel being set then: most holds end without anyone asking for
	// their context, and a cancellable one costs about 110 bytes for as
	// long as the hold lives. One made after the hold ended is cancelled
	// before it is returned.
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// valid reports whether h was returned by Lock or TryLock. A nil or zero
// Held (the one a failed TryLock returns) holds nothing: its Unlock
// returns ErrInvalid, its Context is already cancelled with cause
// ErrInvalid, and its other methods return zero values.
func (h *Held) valid() bool { return h != nil && h.c != nil && h.l != nil }

// invalidCtx is the Context of a nil or zero Held: cancelled, with cause
// ErrInvalid.
var invalidCtx = func() context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(invalidf("a nil or zero Held holds nothing"))
	return ctx
}()

// Context returns the hold's context; see Held.
func (h *Held) Context() context.Context {
	if !h.valid() {
		return invalidCtx
	}
	return h.context()
}

// context returns the hold's context, making it on the first call: the
// values of the context given to Lock, not its deadline or cancellation,
// and a child of its generation's, so that a loss or Close ends it
// without the hold's turn; cancelled already (with the cause its end
// recorded) when the hold has ended.
func (h *Held) context() context.Context {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cancel == nil {
		h.genEndLocked()
		if h.done || h.given {
			h.ctx, h.cancel = context.WithCancelCause(context.WithoutCancel(h.ctx))
			h.cancel(h.reason)
		} else {
			cctx, cancel := context.WithCancelCause(h.g.context())
			h.ctx, h.cancel = heldCtx{Context: cctx, vals: h.ctx}, cancel
		}
	}
	return h.ctx
}

// heldCtx is a live Held's context: the end of its own cancel context (a
// child of its generation's) and the values of the context given to Lock.
// Value asks the cancel context first, which answers only for the context
// package's own key (so Cause and children find it), then Lock's.
type heldCtx struct {
	context.Context
	vals context.Context
}

func (c heldCtx) Value(key any) any {
	if v := c.Context.Value(key); v != nil {
		return v
	}
	return c.vals.Value(key)
}

// genEndLocked ends h as its generation ended (a loss, Close), if it did
// and h had not ended before. Holding h.mu.
func (h *Held) genEndLocked() {
	if !h.done {
		if cause := h.g.cause(); cause != nil {
			h.endLocked(cause)
		}
	}
}

// giveUp ends h's context with cause (an Unlock's unconfirmed error):
// its owner must stop relying on the lock when Unlock returns, while the
// release is settled in the background and h ends then (R3-9).
func (h *Held) giveUp(cause error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.genEndLocked()
	if !h.done && !h.given {
		h.given, h.reason = true, cause
	}
	if h.cancel != nil {
		h.cancel(h.reason)
	}
}

// ending is the channel that closes when h ends, for waits that must stop
// then: its context's Done, or nil once an unconfirmed Unlock gave it up
// (its context has ended, and its hold not yet).
func (h *Held) ending() <-chan struct{} {
	h.mu.Lock()
	given := h.given && !h.done
	h.mu.Unlock()
	if given {
		return nil
	}
	return h.context().Done()
}

// Done is closed when the hold ends: Context().Done().
func (h *Held) Done() <-chan struct{} { return h.Context().Done() }

// Name returns the lock name.
func (h *Held) Name() string {
	if !h.valid() {
		return ""
	}
	return h.l.name
}

// Fence returns the fencing token of this acquisition when it was taken
// with the Fenced option, 0 otherwise. Tokens of a name strictly increase
// across acquisitions, re-entries included.
func (h *Held) Fence() uint64 {
	if !h.valid() {
		return 0
	}
	return h.fence
}

// Reentrant reports whether the owner already held the lock when this hold
// was acquired.
func (h *Held) Reentrant() bool { return h.valid() && h.reentry }

// AcquiredAt returns when the hold was acquired.
func (h *Held) AcquiredAt() time.Time {
	if !h.valid() {
		return time.Time{}
	}
	return h.at
}

// Owner returns the owner token of the hold.
func (h *Held) Owner() uint64 {
	if !h.valid() {
		return 0
	}
	return h.owner
}

// finish ends the hold locally with cause (nil: a plain Unlock). The
// first end is the one that counts, for Unlock and for the context: its
// generation's end (a loss, Close) when that came first.
func (h *Held) finish(cause error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.genEndLocked()
	h.endLocked(cause)
}

// endLocked records h's end with cause unless it ended before, and ends
// its context; holding h.mu. When the generation's end reached the
// context first (it may, at any moment, without h.mu), that is the end
// recorded: the record and the context's cause never disagree.
func (h *Held) endLocked(cause error) {
	if h.done {
		return
	}
	h.done, h.reason = true, cause
	if h.cancel == nil {
		return // its context is made ended, with reason, when asked for
	}
	h.cancel(cause)
	if !h.given {
		if c := context.Cause(h.ctx); c != cause && !(cause == nil && c == context.Canceled) {
			h.reason = c
		}
	}
}

// ended returns whether the hold ended, and the error an Unlock of it
// returns then: its LostError, ErrClosed, or ErrNotHeld after an Unlock.
func (h *Held) ended() (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.genEndLocked()
	if !h.done {
		return false, nil
	}
	switch lost := lostIn(h.reason); {
	case lost != nil:
		return true, lost
	case errors.Is(h.reason, ErrClosed):
		return true, ErrClosed
	case h.late:
		h.late = false
		return true, nil // the failed Unlock's release went through
	}
	return true, ErrNotHeld
}

// lostIn returns the LostError in err's tree, or nil. (Its own function:
// the target errors.As writes to escapes, and ended runs on every Unlock.)
func lostIn(err error) *LostError {
	if err == nil {
		return nil
	}
	var lost *LostError
	if errors.As(err, &lost) {
		return lost
	}
	return nil
}

// Unlock releases this hold: the hold count goes down by one, and the lock
// is free when it reaches 0 (one waiter is then woken, here or in a
// Redisson service). A release whose reply is lost is asked again with
// the same request id until ctx ends, and answered, not applied twice.
// Unlock returns when ctx ends (with Lock's exception for a cancelled
// ctx), even with its release in flight to a master that does not
// answer: it then returns ErrUnavailable (the
// unlock is unconfirmed), the hold's context has ended with that error
// as its cause, and the Client completes the release in the background:
// it settles what the request did and releases the hold if it did not
// run; the last hold of a lock is no longer renewed meanwhile. Calling
// Unlock again waits, within its ctx, for that outcome (nil once
// released, a *LostError if the lock was lost first or its lease was
// judged run out before Redis answered), and never releases twice.
// Unlock never waits longer than the lock's lease: when the lease must
// have run out unanswered, the hold is lost and Unlock returns its
// *LostError.
//
// Holds of one owner change their count one at a time: Unlock waits for a
// re-entry in flight of the same owner.
//
// With Config.ReplicaSyncTimeout and a master that has replicas, a
// release is sent again (answered by its latch) until a replica
// acknowledged it; when none did, the hold has still ended, released on
// the master, and Unlock returns an ErrUnavailable saying so: a failover
// before a replica has the release could bring the key back until its
// lease runs out. Likewise when the server refused the release's unlock
// message (an ACL without PUBLISH on the lock's channel): the lock is
// free and the hold has ended, and Unlock returns an ErrAuth saying it
// went without its message (waiters elsewhere wake when their lease ends).
//
// May return ErrNotHeld (already unlocked), ErrLockLost (a *LostError: the
// lock was lost), ErrClosed, ErrUnavailable, ErrAuth, ErrInvalid.
func (h *Held) Unlock(ctx context.Context) error {
	if !h.valid() {
		return invalidf("Unlock of a nil or zero Held (a failed Lock or TryLock returns nil): it holds nothing")
	}
	if ctx == nil {
		return invalidf("nil context")
	}
	if done, err := h.ended(); done {
		return err
	}
	c := h.c
	if err := c.enter(); err != nil {
		return err
	}
	defer c.exit()
	start := time.Now()
	released, err := c.unlock(ctx, h)
	if c.obs != nil && c.obs.Release != nil {
		c.obs.Release(ctx, observe.Release{Name: h.l.name, Addr: c.route.at(h.l.name), Owner: h.owner, Released: released, HeldFor: start.Sub(h.at), Duration: time.Since(start), Err: err})
	}
	return err
}

// unlock releases one hold of h, holding the hold's turn.
func (c *Client) unlock(ctx context.Context, h *Held) (released bool, err error) {
	l := h.l
	l.use()
	defer l.unuse()
	if taken, err := l.takeForUnlock(ctx, h); !taken {
		return false, err
	}
	defer l.give()
	if err := l.settle(ctx, stops{held: h, b: c.done, caller: true}); err != nil {
		if done, herr := h.ended(); done {
			return false, join(herr, err)
		}
		return false, join(err, ctx.Err())
	}
	if done, herr := h.ended(); done {
		if herr == nil { // the earlier Unlock's release went through
			rctx, cancel := c.e.releaseCtx(ctx, l.name)
			l.releaseStrays(rctx, stops{caller: true})
			cancel()
		}
		return false, herr
	}
	g := l.current()
	lease := l.partialLease(h)
	if l.count <= 1 && g != nil {
		entry := g.entry
		// The last hold: no renewal may land after the release, or it
		// would read as a loss. The entry is still judged meanwhile.
		if err := c.wd.Begin(ctx, entry); err != nil {
			return false, join(masterErr(c.route.errAt(l.name), "release", err), ctx.Err())
		}
		defer c.wd.End(entry)
	}
	r := l.newRelease(lease)
	sent := time.Now()
	var (
		res      reentrant.ReleaseResult
		unsynced error
	)
	res, unsynced, err = c.e.sendRelease(ctx, r, stops{held: h, b: c.done, caller: true, own: true}) // Close takes over
	if err != nil {
		return false, l.unconfirmed(h, &request{id: r.RequestID, release: h, sent: sent}, err)
	}
	if res == reentrant.Fenced {
		return false, masterErr(c.route.errAt(l.name), "release", fmt.Errorf("%w: a new request was fenced", reentrant.ErrUnexpectedReply))
	}
	l.releaseAnswered(ctx, h, res)
	if _, herr := h.ended(); !errors.Is(herr, ErrNotHeld) {
		return false, herr
	}
	// Released on the master, and the hold has ended; a failover before
	// a replica has the release could bring the key back until its lease
	// runs out: say so.
	return res == reentrant.Released, unsynced
}

func without(hs []*Held, h *Held) []*Held {
	for i, x := range hs {
		if x == h {
			return append(hs[:i:i], hs[i+1:]...)
		}
	}
	return hs
}

// holdKey identifies a lock held by one field. A struct of the two strings,
// not their concatenation: a map key that allocates nothing.
type holdKey struct{ name, field string }

func key(name, field string) holdKey { return holdKey{name, field} }
