package lock

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/rlock-go/rlock/reentrant"
	"github.com/rlock-go/rlock/watchdog"
)

// holding is one lock held by one holder field of a Client, whatever its
// hold count: one watchdog entry, one Held per hold.
type holding struct {
	name, field string
	entry       *watchdog.Entry
	lease       time.Duration // the last acquisition's lease, reset by releases
	since       time.Time     // first hold
	helds       []*Held       // live holds, oldest first; guarded by Client.mu
	lost        *LostError    // guarded by Client.mu
}

// Held is one hold of a lock, returned by Lock and TryLock. Its Context
// carries the owner, so Lock with it re-enters (each re-entry is a Held of
// its own, released by its own Unlock).
//
// Context() is cancelled when the hold ends: with cause ErrLockLost (a
// *LostError) when the lease was lost, context.Canceled after Unlock,
// ErrClosed when the Client closed. Tell them apart with
// errors.Is(context.Cause(h.Context()), ErrLockLost). It is derived from
// the context passed to Lock, so it also ends with that one: a context
// with a timeout meant for the wait bounds the hold's context too, and a
// re-entry taken with this Held's context ends when this Held is
// unlocked. Unlock re-entries in reverse order.
type Held struct {
	c        *Client
	h        *holding
	ctx      context.Context
	cancel   context.CancelCauseFunc
	owner    uint64
	at       time.Time
	fence    uint64
	reentry  bool
	mu       sync.Mutex
	done     bool   // released or finished
	unlocks  bool   // an Unlock is in flight
	request  string // release request id, kept across Unlock retries
	released error  // why done: nil (unlocked), ErrClosed, a *LostError
}

// Context returns the hold's context; see Held.
func (h *Held) Context() context.Context { return h.ctx }

// Done is closed when the hold ends: Context().Done().
func (h *Held) Done() <-chan struct{} { return h.ctx.Done() }

// Name returns the lock name.
func (h *Held) Name() string { return h.h.name }

// Fence returns the fencing token of this acquisition when it was taken
// with the Fenced option, 0 otherwise. Tokens of a name strictly increase
// across acquisitions, re-entries included.
func (h *Held) Fence() uint64 { return h.fence }

// Reentrant reports whether the owner already held the lock when this hold
// was acquired.
func (h *Held) Reentrant() bool { return h.reentry }

// AcquiredAt returns when the hold was acquired.
func (h *Held) AcquiredAt() time.Time { return h.at }

// Owner returns the owner token of the hold.
func (h *Held) Owner() uint64 { return h.owner }

// finish ends the hold locally with cause (nil: a plain Unlock).
func (h *Held) finish(cause error) {
	h.mu.Lock()
	if !h.done {
		h.done = true
		h.released = cause
	}
	h.mu.Unlock()
	h.cancel(cause)
}

// Unlock releases this hold: the hold count goes down by one, and the lock
// is free when it reaches 0 (one waiter is then woken, here or in a
// Redisson service). A release whose reply is lost is retried until ctx
// ends, with the same request id: Redis's unlock latch makes every retry
// return the first answer, so a hold is never released twice. A failed
// Unlock may be called again.
//
// May return ErrNotHeld (already unlocked), ErrLockLost (a *LostError: the
// lock was lost before), ErrClosed, ErrUnavailable, ErrInvalid.
func (h *Held) Unlock(ctx context.Context) error {
	if ctx == nil {
		return invalidf("nil context")
	}
	h.mu.Lock()
	if h.done || h.unlocks {
		why := h.released
		inflight := h.unlocks
		h.mu.Unlock()
		var lost *LostError
		switch {
		case errors.As(why, &lost):
			return lost
		case errors.Is(why, ErrClosed):
			return ErrClosed
		case inflight:
			return errors.Join(ErrNotHeld, errors.New("rlock: unlock already in progress"))
		}
		return ErrNotHeld
	}
	h.unlocks = true
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.unlocks = false
		h.mu.Unlock()
	}()

	c := h.c
	if err := c.enter(); err != nil {
		return err
	}
	defer c.exit()
	start := time.Now()
	released, err := c.unlock(ctx, h)
	if c.obs != nil && c.obs.Release != nil {
		c.obs.Release(ctx, Release{Name: h.h.name, Addr: c.addr, Owner: h.owner, Released: released, HeldFor: start.Sub(h.at), Duration: time.Since(start), Err: err})
	}
	return err
}

// unlock releases one hold of held and updates the local state.
func (c *Client) unlock(ctx context.Context, held *Held) (released bool, err error) {
	hd := held.h
	c.mu.Lock()
	lost := hd.lost
	c.mu.Unlock()
	if lost != nil {
		return false, lost
	}
	if err := c.wd.Begin(ctx, hd.entry); err != nil {
		return false, errors.Join(masterErr(c.addr, "release", err), ctx.Err())
	}
	defer c.wd.End(hd.entry)
	res, err := c.release(ctx, held, c.done)
	if err != nil {
		return false, err
	}
	if res == reentrant.StillHeld {
		c.mu.Lock()
		hd.helds = without(hd.helds, held)
		last := len(hd.helds) == 0
		c.mu.Unlock()
		if !last {
			held.finish(nil)
			return false, nil
		}
		// Redis counts more holds than there are Helds (a re-entry whose
		// reply was lost): nobody here holds the lock any more, so give
		// the extra holds back rather than renew them forever.
		res, err = c.releaseExtra(ctx, held)
		if err != nil {
			return false, err
		}
	}
	switch res {
	case reentrant.StillHeld:
		held.finish(nil)
		return false, nil
	case reentrant.Released:
		c.mu.Lock()
		helds := hd.helds
		hd.helds = nil
		if c.holdings[key(hd.name, hd.field)] == hd {
			delete(c.holdings, key(hd.name, hd.field))
		}
		c.mu.Unlock()
		c.wd.Remove(hd.entry)
		held.finish(nil)
		for _, o := range helds { // holds released out of band (Redis said the count was 1)
			if o != held {
				o.finish(nil)
			}
		}
		return true, nil
	}
	// Not held: the key is gone or another holder took it.
	c.wd.Lose(hd.entry, watchdog.NotHeld, "release found the lock no longer held")
	c.mu.Lock()
	lost = hd.lost
	c.mu.Unlock()
	if lost == nil {
		lost = &LostError{Name: hd.name, Addr: c.addr, Kind: LossNotHeld, Reason: "release found the lock no longer held"}
		held.finish(lost)
	}
	return false, lost
}

// releaseExtra releases the holds Redis counts beyond the local ones, each
// with a request id of its own, until the lock is free.
func (c *Client) releaseExtra(ctx context.Context, held *Held) (reentrant.ReleaseResult, error) {
	res := reentrant.StillHeld
	for i := 0; i < 16 && res == reentrant.StillHeld; i++ {
		held.mu.Lock()
		held.request = ""
		held.mu.Unlock()
		var err error
		if res, err = c.release(ctx, held, c.done); err != nil {
			return res, err
		}
	}
	return res, nil
}

// release sends the release script for one hold, retrying lost replies
// with the hold's request id until ctx ends or stop closes.
func (c *Client) release(ctx context.Context, held *Held, stop <-chan struct{}) (reentrant.ReleaseResult, error) {
	held.mu.Lock()
	if held.request == "" {
		held.request = reentrant.NewRequestID()
	}
	req := held.request
	held.mu.Unlock()
	c.mu.Lock()
	lease := held.h.lease
	c.mu.Unlock()
	r := reentrant.Release{
		Name: held.h.name, Field: held.h.field, Lease: lease,
		RequestID: req, Publish: c.publish, LatchTTL: unlockLatchTTL,
	}
	delay := 5 * time.Millisecond
	for {
		actx, cancel := c.cmdCtx(context.WithoutCancel(ctx))
		res, err := r.Run(actx, c.rc)
		cancel()
		if err == nil {
			select {
			case c.latches <- reentrant.LatchName(r.Name, r.RequestID):
			default: // the latch expires by itself
			}
			return res, nil
		}
		err = masterErr(c.addr, "release", err)
		if !errors.Is(err, ErrUnavailable) {
			return res, err // the server refused it: retrying cannot help
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return res, errors.Join(err, ctx.Err())
		case <-stop:
			t.Stop()
			return res, errors.Join(err, ErrClosed)
		}
		delay = min(2*delay, time.Second)
	}
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

// onLost is the watchdog's report that hd was lost.
func (c *Client) onLost(hd *holding, le *watchdog.LossError) {
	lost := &LostError{Name: hd.name, Addr: c.addr, Kind: LossKind(le.Kind), Reason: le.Reason, Err: le.Err}
	if le.Err != nil {
		lost.Err = masterErr(c.addr, "renew", le.Err)
	}
	c.mu.Lock()
	if hd.lost != nil {
		c.mu.Unlock()
		return
	}
	hd.lost = lost
	if c.holdings[key(hd.name, hd.field)] == hd {
		delete(c.holdings, key(hd.name, hd.field))
	}
	helds := hd.helds
	hd.helds = nil
	c.mu.Unlock()
	for _, h := range helds {
		h.finish(lost)
	}
	if c.obs != nil && c.obs.Loss != nil && len(helds) > 0 {
		c.obs.Loss(helds[0].ctx, Loss{Name: hd.name, Addr: c.addr, Owner: helds[0].owner, HeldFor: time.Since(hd.since), Err: lost})
	}
}
