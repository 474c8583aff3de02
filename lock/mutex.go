package lock

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/rlock-go/rlock/pubsub"
	"github.com/rlock-go/rlock/reentrant"
	"github.com/rlock-go/rlock/watchdog"
)

// Mutex is a lock name on a Client: a cheap description, safe to copy
// and to share. All state of an acquisition lives in its Held.
type Mutex struct {
	c    *Client
	name string
	err  error // a bad name, reported by every method
}

// Mutex returns the lock called name. The name is Redisson's lock name
// as is: a Java service's redisson.getLock(name) is the same lock. A bad
// name (empty, longer than MaxNameLen, not UTF-8) is reported by every
// method of the Mutex as ErrInvalid.
func (c *Client) Mutex(name string) *Mutex {
	m := &Mutex{c: c, name: name}
	switch {
	case name == "":
		m.err = invalidf("empty lock name")
	case len(name) > MaxNameLen:
		m.err = invalidf("lock name of %d bytes, more than %d", len(name), MaxNameLen)
	case !utf8.ValidString(name):
		m.err = invalidf("lock name is not UTF-8")
	}
	return m
}

// Name returns the lock name.
func (m *Mutex) Name() string { return m.name }

// Option modifies one Lock or TryLock call.
type Option func(*options) error

type options struct {
	wait    time.Duration
	hasWait bool
	lease   time.Duration
	fenced  bool
}

// Wait makes TryLock wait up to d for the lock (default 0: one attempt).
func Wait(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 {
			return invalidf("negative wait %v", d)
		}
		o.wait, o.hasWait = d, true
		return nil
	}
}

// Lease holds the lock for d without the watchdog: it expires d after it
// was acquired unless released before (Redisson's leaseTime). The Held's
// context is then cancelled with ErrLockLost when the lease ends.
// Without Lease, the watchdog keeps the lock for as long as it is held.
func Lease(d time.Duration) Option {
	return func(o *options) error {
		if d < MinLease {
			return invalidf("lease %v is shorter than %v", d, MinLease)
		}
		o.lease = d
		return nil
	}
}

// Fenced takes a fencing token with the acquisition (Redisson's
// RFencedLock counter "redisson_lock_token:{name}"), returned by
// Held.Fence. Give it to the resource you guard, which rejects tokens
// lower than one it has seen.
func Fenced() Option {
	return func(o *options) error { o.fenced = true; return nil }
}

// Lock acquires the lock, waiting until it is free or ctx ends. A ctx
// carrying an owner that holds the lock re-enters it. The lock is held
// until Unlock: the watchdog renews it (or, with Lease, it expires).
//
// May return ErrNotAcquired (joined with ctx's error), ErrClosed,
// ErrUnavailable, ErrInvalid.
func (m *Mutex) Lock(ctx context.Context, opts ...Option) (*Held, error) {
	return m.acquire(ctx, true, opts)
}

// TryLock acquires the lock if it is free, or waits for it up to the
// Wait option's duration (default: no wait).
//
// May return ErrNotAcquired, ErrClosed, ErrUnavailable, ErrInvalid.
func (m *Mutex) TryLock(ctx context.Context, opts ...Option) (*Held, error) {
	return m.acquire(ctx, false, opts)
}

func (m *Mutex) check(ctx context.Context) error {
	if ctx == nil {
		return invalidf("nil context")
	}
	if m == nil || m.c == nil {
		return invalidf("nil Mutex")
	}
	return m.err
}

func (m *Mutex) acquire(ctx context.Context, blocking bool, opts []Option) (held *Held, err error) {
	if err := m.check(ctx); err != nil {
		return nil, err
	}
	var o options
	for _, opt := range opts {
		if opt == nil {
			return nil, invalidf("nil Option")
		}
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if blocking && o.hasWait {
		return nil, invalidf("Wait is TryLock's option; Lock waits until ctx ends")
	}
	c := m.c
	if err := c.enter(); err != nil {
		return nil, err
	}
	defer c.exit()

	ctx, owner := ownerOf(ctx)
	field := reentrant.Field(c.id, owner)
	start := time.Now()
	var end AcquireEnd
	octx := ctx
	if c.obs != nil {
		if c.obs.AcquireStart != nil {
			if x := c.obs.AcquireStart(ctx, AcquireStart{Name: m.name, Addr: c.addr, Owner: owner, Blocking: blocking, Wait: o.wait, Lease: o.lease}); x != nil {
				octx = x
			}
		}
		if c.obs.AcquireEnd != nil {
			defer func() {
				end.Name, end.Addr, end.Acquired, end.Err = m.name, c.addr, err == nil, err
				end.Duration = time.Since(start)
				if held != nil {
					end.Reentrant, end.Fence, end.AcquiredAt = held.reentry, held.fence, held.at
				}
				c.obs.AcquireEnd(octx, end)
			}()
		}
	}

	var deadline time.Time
	if !blocking {
		deadline = start.Add(o.wait)
	}
	var w *pubsub.Waiter
	subscribed := false
	defer func() {
		if w != nil {
			w.Close()
		}
	}()
	for {
		att, sent, err := m.attempt(ctx, field, o)
		end.Attempts++
		if err != nil {
			return nil, err
		}
		if att.Acquired {
			return m.hold(ctx, owner, field, o, sent, att)
		}
		left := time.Duration(1<<63 - 1)
		if !deadline.IsZero() {
			if left = time.Until(deadline); left <= 0 {
				return nil, notAcquired(m.name, att.TTL)
			}
		}
		if !subscribed {
			subscribed = true
			// Subscribe before the next attempt, so that a release
			// between that attempt and the sleep still wakes us.
			sctx, cancel := context.WithTimeout(ctx, min(left, c.cfg.CommandTimeout))
			w, err = c.hub.Subscribe(sctx, reentrant.ChannelName(m.name))
			cancel()
			if err != nil {
				w = nil // sleep on the lease alone: slower, never wrong
				if ctx.Err() != nil {
					return nil, errors.Join(ErrNotAcquired, ctx.Err())
				}
			}
			continue
		}
		sleep := att.TTL
		if sleep < 0 { // the key has no expiry: only a message ends the wait
			sleep = left
			if w == nil {
				sleep = min(left, time.Second)
			}
		}
		sleep = min(sleep, left)
		slept, err := m.sleep(octx, ctx, w, sleep, att.TTL)
		end.Waited += slept
		if err != nil {
			return nil, err
		}
	}
}

func notAcquired(name string, ttl time.Duration) error {
	return &ConflictError{Name: name, TTL: ttl}
}

// ConflictError is TryLock's ErrNotAcquired when another owner held the
// lock at the last attempt. errors.Is(err, ErrNotAcquired) holds for it.
type ConflictError struct {
	Name string
	// TTL is the holder's remaining lease at the last attempt; negative
	// when the key had no expiry.
	TTL time.Duration
}

func (e *ConflictError) Error() string {
	if e.TTL >= 0 {
		return fmt.Sprintf("rlock: lock not acquired: %q is held by another owner for %v more", e.Name, e.TTL)
	}
	return fmt.Sprintf("rlock: lock not acquired: %q is held by another owner", e.Name)
}

// Unwrap returns ErrNotAcquired.
func (e *ConflictError) Unwrap() error { return ErrNotAcquired }

// sleep waits for a wake-up, the timeout, ctx or Close.
func (m *Mutex) sleep(octx, ctx context.Context, w *pubsub.Waiter, d, ttl time.Duration) (time.Duration, error) {
	c := m.c
	if c.obs != nil && c.obs.Waiting != nil {
		c.obs.Waiting(octx, Waiting{Name: m.name, Addr: c.addr, TTL: ttl})
	}
	var wake <-chan pubsub.Reason
	if w != nil {
		wake = w.C()
	}
	start := time.Now()
	t := time.NewTimer(d)
	defer t.Stop()
	var reason WakeReason
	select {
	case r := <-wake:
		reason = WakeMessage
		if r == pubsub.Reconnect {
			reason = WakeReconnect
		}
	case <-t.C:
		reason = WakeTimeout
	case <-ctx.Done():
		return time.Since(start), errors.Join(ErrNotAcquired, ctx.Err())
	case <-c.done:
		return time.Since(start), ErrClosed
	}
	slept := time.Since(start)
	if c.obs != nil && c.obs.WakeUp != nil {
		c.obs.WakeUp(octx, WakeUp{Name: m.name, Addr: c.addr, Reason: reason, Slept: slept})
	}
	return slept, nil
}

// attempt sends one acquire script. It is not cancelled by ctx's
// cancellation: its outcome must be known (see hold). It is bounded by
// CommandTimeout and by ctx's deadline; past either, the outcome is
// unknown and compensate undoes it in the background.
func (m *Mutex) attempt(ctx context.Context, field string, o options) (reentrant.Attempt, time.Time, error) {
	c := m.c
	select {
	case <-ctx.Done():
		return reentrant.Attempt{}, time.Time{}, errors.Join(ErrNotAcquired, ctx.Err())
	case <-c.done:
		return reentrant.Attempt{}, time.Time{}, ErrClosed
	default:
	}
	lease := o.lease
	if lease == 0 {
		lease = c.cfg.WatchdogTimeout
	}
	actx, cancel := c.cmdCtx(context.WithoutCancel(ctx))
	defer cancel()
	if dl, ok := ctx.Deadline(); ok {
		var cancelDl context.CancelFunc
		actx, cancelDl = context.WithDeadline(actx, dl)
		defer cancelDl()
	}
	sent := time.Now()
	var att reentrant.Attempt
	var err error
	if o.fenced {
		att, err = reentrant.AcquireFenced(actx, c.rc, m.name, field, lease)
	} else {
		att, err = reentrant.Acquire(actx, c.rc, m.name, field, lease)
	}
	if err != nil {
		err = masterErr(c.addr, "acquire", err)
		if errors.Is(err, ErrUnavailable) {
			m.compensate(field)
		}
		if ctx.Err() != nil {
			err = errors.Join(ErrNotAcquired, err, ctx.Err())
		}
		return att, sent, err
	}
	return att, sent, nil
}

// compensate undoes an acquire whose reply was lost, when the owner held
// no hold before it: if the script ran, the field holds exactly that one
// hold, and a release takes it back; if it did not, the release finds
// nothing. Best effort, bounded by CommandTimeout: failing that, the hold
// expires with its lease (nothing renews it).
func (m *Mutex) compensate(field string) {
	c := m.c
	c.mu.Lock()
	_, held := c.holdings[key(m.name, field)]
	c.mu.Unlock()
	if held {
		return // a re-entry's count cannot be told apart: leave it to the lease
	}
	r := reentrant.Release{
		Name: m.name, Field: field, Lease: c.cfg.WatchdogTimeout,
		RequestID: reentrant.NewRequestID(), Publish: c.publish, LatchTTL: unlockLatchTTL,
	}
	// In the background, so the caller's deadline is not spent twice; the
	// call is in flight (enter/exit), so Close has not started waiting for
	// background work yet.
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		rctx, cancel := c.cmdCtx(context.Background())
		defer cancel()
		if _, err := r.Run(rctx, c.rc); err == nil {
			select {
			case c.latches <- reentrant.LatchName(r.Name, r.RequestID):
			default:
			}
		}
	}()
}

// hold records an acquired hold. When ctx ended (or the Client closed)
// while the acquire was in flight, it gives the hold back at once, so a
// cancelled Lock leaves nothing behind.
func (m *Mutex) hold(ctx context.Context, owner uint64, field string, o options, sent time.Time, att reentrant.Attempt) (*Held, error) {
	c := m.c
	lease := o.lease
	if lease == 0 {
		lease = c.cfg.WatchdogTimeout
	}
	k := key(m.name, field)
	c.mu.Lock()
	hd := c.holdings[k]
	reentry := hd != nil
	if hd == nil {
		hd = &holding{name: m.name, field: field, since: sent}
		c.holdings[k] = hd
		h := hd
		hd.entry = c.wd.Track(m.name, field, lease, o.lease == 0, sent, func(le *watchdog.LossError) { c.onLost(h, le) })
	} else {
		c.wd.Track(m.name, field, lease, o.lease == 0, sent, nil)
	}
	hd.lease = lease
	hctx, cancel := context.WithCancelCause(ctx)
	held := &Held{c: c, h: hd, ctx: hctx, cancel: cancel, owner: owner, at: sent, fence: att.Token, reentry: reentry}
	hd.helds = append(hd.helds, held)
	closed := c.closed
	c.mu.Unlock()

	if cause := ctx.Err(); cause != nil || closed {
		rctx, rcancel := c.cmdCtx(context.WithoutCancel(ctx))
		_, rerr := c.unlock(rctx, held)
		rcancel()
		if closed {
			return nil, errors.Join(ErrClosed, rerr)
		}
		return nil, errors.Join(ErrNotAcquired, cause, rerr)
	}
	return held, nil
}
