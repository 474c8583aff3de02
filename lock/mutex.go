package lock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/internal/line"
	"github.com/rlock-go/rlock/observe"
	"github.com/rlock-go/rlock/pubsub"
	"github.com/rlock-go/rlock/reentrant"
)

// Mutex is a lock name on a Client: a cheap description, safe to copy
// and to share. All state of an acquisition lives in its Held.
type Mutex struct {
	c    *Client
	name string
	err  error        // a bad name, reported by every method
	p    *protocol    // its kind (kind.go), chosen when it is made
	spin *SpinBackoff // a spin lock's backoff (SpinMutex), else nil
}

// Mutex returns the lock called name. The name is Redisson's lock name
// as is: a Java service's redisson.getLock(name) is the same lock. With
// Config.NameMapper, the name is mapped first, as Redisson's nameMapper
// maps it: the mapped name is the key, and the channel, latch and token
// names derive from it. A bad name (empty, longer than 8 KiB, not UTF-8),
// before or after mapping, is reported by every method of the Mutex as
// ErrInvalid.
func (c *Client) Mutex(name string) *Mutex {
	m := &Mutex{c: c, name: name, p: plainProtocol}
	if bad := badName(name); bad != "" {
		m.err = invalidf("%s", bad)
		return m
	}
	if c != nil && c.cfg.NameMapper != nil {
		m.name = c.cfg.NameMapper(name)
		if bad := badName(m.name); bad != "" {
			m.err = invalidf("Config.NameMapper mapped lock name %q to a bad one: %s", name, bad)
		}
	}
	return m
}

// Name returns the lock name as Redis holds it: the name given to
// Client.Mutex, or with Config.NameMapper the mapped one ("" for a nil
// Mutex).
func (m *Mutex) Name() string {
	if m == nil {
		return ""
	}
	return m.name
}

// Option modifies one Lock or TryLock call, of a Mutex or of a
// multilock.Lock (which adds options of its own).
type Option func(*options) error

type options struct {
	wait    time.Duration
	hasWait bool
	lease   time.Duration
	fenced  bool
	p       *protocol // the Mutex's: the field's releases follow the last acquisition's
	// ext holds the settings of package multilock's options (through
	// internal/lockcore); a Mutex refuses them.
	ext any
	// fair is a waiting fair acquisition's place in the queue: its
	// requests ask to join it (nil: they never do).
	fair *fairWait
	// until is a TryLock's last moment to send (and to wait for) an
	// acquire: its start + max(Wait, CommandTimeout), and at least one
	// send of each request (P2-08); zero for Lock, which its ctx alone
	// bounds.
	until time.Time
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
// Lock returns when ctx ends, even with a request in flight to a master
// that does not answer: that request is settled in the background, and
// a grant it may have made is released (or expires with its lease); a
// fair Lock's place in the queue is left in the background too. This
// holds for a ctx cancelled as for one past its deadline, whatever else
// the Client has in flight, with one exception: on a Client of
// FromClient (whose connections are the application's), a ctx cancelled
// (rather than past its deadline) while the request is alone on its
// connection ends the call only at the request's answer or
// CommandTimeout, since rueidis bounds such a request by its deadline.
// A Client of FromClient on a rueidis client with AlwaysPipelining
// returns at the cancellation too, once its connections are made:
// rueidis then watches the ctx itself, at some cost in latency
// (FromClient).
//
// May return ErrNotAcquired (joined with ctx's error), ErrClosed,
// ErrUnavailable, ErrInvalid.
func (m *Mutex) Lock(ctx context.Context, opts ...Option) (*Held, error) {
	return m.acquire(ctx, true, opts)
}

// TryLock acquires the lock if it is free, or waits for it up to the
// Wait option's duration (default: no wait).
//
// TryLock returns when ctx ends, and otherwise, whatever the master does,
// at the latest one CommandTimeout after it began, or after its Wait ran
// out (with replica sync, plus the WAIT for replicas its request
// carries), plus, when an earlier request of its owner was left
// unsettled, the settling of that one first (at most two
// CommandTimeouts): a request whose answer did not come by then is
// settled in the background, as with Lock (with Lock's exception for a
// cancelled ctx).
//
// May return ErrNotAcquired, ErrClosed, ErrUnavailable, ErrInvalid.
func (m *Mutex) TryLock(ctx context.Context, opts ...Option) (*Held, error) {
	return m.acquire(ctx, false, opts)
}

func (m *Mutex) check(ctx context.Context) error {
	if ctx == nil {
		return invalidf("nil context")
	}
	if m == nil || !m.c.valid() {
		return invalidf("nil or zero Mutex, or one of a nil or zero Client: make Mutexes with Client.Mutex")
	}
	return m.err
}

// parseOptions applies opts to a Lock (blocking) or TryLock call.
func parseOptions(blocking bool, opts []Option) (options, error) {
	if len(opts) == 0 {
		return options{}, nil // o below escapes to the heap (opt(&o))
	}
	var o options
	for _, opt := range opts {
		if opt == nil {
			return o, invalidf("nil Option")
		}
		if err := opt(&o); err != nil {
			return o, err
		}
	}
	if blocking && o.hasWait {
		return o, invalidf("Wait is TryLock's option; Lock waits until ctx ends")
	}
	return o, nil
}

// lockOptions is parseOptions for a Mutex: it refuses multilock's options.
func lockOptions(blocking bool, opts []Option) (options, error) {
	o, err := parseOptions(blocking, opts)
	if err == nil && o.ext != nil {
		err = invalidf("an option of package multilock given to a Mutex")
	}
	return o, err
}

// acquisition is one Lock or TryLock call in progress.
type acquisition struct {
	m        *Mutex
	c        *Client
	ctx      context.Context // the caller's, carrying the owner
	octx     context.Context // the Observer's, from AcquireStart
	l        *hold
	owner    uint64
	o        options
	blocking bool
	start    time.Time
	deadline time.Time          // TryLock's; zero for Lock
	end      observe.AcquireEnd // the Observer's account, filled as it goes
}

func (m *Mutex) acquire(ctx context.Context, blocking bool, opts []Option) (held *Held, err error) {
	if err := m.check(ctx); err != nil {
		return nil, err
	}
	o, err := lockOptions(blocking, opts)
	if err != nil {
		return nil, err
	}
	o.p = m.p
	if o.fenced {
		if err := o.p.fenceable(); err != nil {
			return nil, err
		}
	}
	c := m.c
	if err := c.enter(); err != nil {
		return nil, err
	}
	defer c.exit()

	ctx, owner := ownerOf(ctx)
	if err := m.p.upgrade(m, owner); err != nil {
		return nil, err
	}
	l := c.use(m.name, m.p.field(c, owner), m.p)
	defer l.unuse()
	a := &acquisition{m: m, c: c, ctx: ctx, octx: ctx, l: l, owner: owner, o: o, blocking: blocking, start: time.Now()}
	if !blocking {
		a.deadline = a.start.Add(o.wait)
		a.o.until = a.start.Add(max(o.wait, c.cfg.CommandTimeout))
	}
	if c.obs != nil && c.obs.AcquireStart != nil {
		if x := c.obs.AcquireStart(ctx, observe.AcquireStart{Name: m.name, Addr: c.route.at(m.name), Owner: owner, Blocking: blocking, Wait: o.wait, Lease: o.lease}); x != nil {
			a.octx = x
		}
	}
	if c.obs != nil && c.obs.AcquireEnd != nil {
		defer func() { a.observeEnd(held, err) }()
	}
	return m.p.acquire(a)
}

// observeEnd reports the call's end to the Observer.
func (a *acquisition) observeEnd(held *Held, err error) {
	end := a.end
	end.Name, end.Addr, end.Acquired, end.Err = a.m.name, a.c.route.at(a.m.name), err == nil, err
	end.Duration = time.Since(a.start)
	if held != nil {
		end.Reentrant, end.Fence, end.AcquiredAt = held.reentry, held.fence, held.at
	}
	a.c.obs.AcquireEnd(a.octx, end)
}

// waiting reports a wait to the Observer; position is a fair waiter's
// place in the queue (else 0).
func (a *acquisition) waiting(ttl time.Duration, err error, position int) {
	if a.c.obs != nil && a.c.obs.Waiting != nil {
		a.c.obs.Waiting(a.octx, observe.Waiting{Name: a.m.name, Addr: a.c.route.at(a.m.name), TTL: ttl, Err: err, Position: position})
	}
}

// try makes one attempt, counted for the Observer.
func (a *acquisition) try() (outcome, error) {
	a.end.Attempts++
	return a.m.attempt(a.ctx, a.l, a.owner, a.o)
}

// tried is an attempt made before its call joined the queue (alone), if
// made.
type tried struct {
	made bool
	att  outcome
	err  error
}

// granted reports whether the attempt made alone took the lock.
func (t tried) granted() bool { return t.made && t.err == nil && t.att.held != nil }

// kept is t once its call joined the queue as mb, and the holder's TTL
// it saw (-1: none), should the call's turn not come. t is dropped when
// others joined meanwhile (its turn comes after them), and by a spin
// lock (polls): a release by this Client between its attempt and the
// join kicked no queue, and it would poll a step on a free lock.
func (t tried) kept(polls bool, mb *line.Member) (tried, time.Duration) {
	ttl := time.Duration(-1)
	if t.made && t.err == nil {
		ttl = t.att.TTL
	}
	t.made = t.made && !polls && mb.IsHead()
	return t, ttl
}

// alone makes a waiting call's first attempt before it joins the queue,
// when this Client has no queue of the lock: nobody of this
// process waits for it, so the attempt passes no waiter (an uncontended
// Lock then makes no queue at all). It makes none when there is a queue:
// the call joins it and attempts once it is its head. A call that
// attempted alone and must wait joins then, and starts from its attempt
// when it is head at once; behind others, it waits its turn (calls
// arriving together may each attempt alone once before they queue).
func (a *acquisition) alone() tried {
	if a.c.queues.has(a.m.p.queueKey(a.m.name)) {
		return tried{}
	}
	att, err := a.try()
	return tried{true, att, err}
}

// queued acquires a lock that was not free at once, in the queue of this
// Client's waiters for the name: woken by releases, or (with a spin
// policy) polling at its pace. first is an attempt made before joining
// (alone), if made.
func (a *acquisition) queued(spin *spinPolicy, first tried) (held *Held, err error) {
	if first.granted() {
		return first.att.held, nil
	}
	m, c := a.m, a.c
	q, mb := c.queues.join(m.p, m.name)
	defer c.queues.leave(q, mb)
	first, ttl := first.kept(spin != nil, mb)
	// A wake-up the head took and did not use is not passed on when it
	// leaves: the next member, now head, attempts at once, and every
	// other waiter of the channel in this process observed the message
	// itself (queue.go).
	var (
		subscribed bool
		outage     *backoff.ExponentialBackOff
	)
	for {
		var att outcome
		if first.made {
			att, err, first.made = first.att, first.err, false
		} else {
			if err := m.awaitHead(a.ctx, mb, a.deadline, ttl); err != nil {
				return nil, err
			}
			att, err = a.try()
		}
		if err != nil {
			if err := a.retryAfter(err, &outage); err != nil {
				return nil, err
			}
			continue
		}
		outage = nil
		if att.held != nil {
			return att.held, nil
		}
		ttl = att.TTL
		if spin != nil {
			err = a.poll(q, spin, att.TTL)
		} else {
			err = a.waitBusy(q, att.TTL, &subscribed)
		}
		if err != nil {
			return nil, err
		}
	}
}

// direct makes the one attempt of a re-entry, or of a TryLock that does
// not wait, without queueing: the owner holds the lock, or the caller
// asked only whether it is free now. done reports that the call ends
// with its result.
func (a *acquisition) direct() (held *Held, done bool, err error) {
	if !a.l.g.Load().live() && (a.blocking || a.o.wait != 0) {
		return nil, false, nil
	}
	att, err := a.try()
	if err != nil || att.held != nil {
		return att.held, true, err
	}
	if !a.blocking && a.o.wait == 0 {
		return nil, true, notAcquired(a.m.name, att.TTL)
	}
	return nil, false, nil
}

// waitBusy waits after an attempt found the lock held: the first time it
// subscribes (before the next attempt, so that a release between that
// attempt and the sleep still wakes us), later it sleeps until woken.
func (a *acquisition) waitBusy(q *queue, ttl time.Duration, subscribed *bool) error {
	left, err := a.left(ttl)
	if err != nil {
		return err
	}
	if !*subscribed {
		*subscribed = true
		return a.subscribe(q, left)
	}
	return a.sleep(q, ttl, left)
}

// retryAfter waits out a failed attempt of a blocking Lock (an outage),
// or returns err when the call must end with it.
func (a *acquisition) retryAfter(err error, outage **backoff.ExponentialBackOff) error {
	d, ok := a.c.rideOut(a.ctx, a.blocking, err, outage)
	if !ok {
		return err
	}
	a.waiting(d, err, 0)
	if _, _, err := a.m.sleep(a.octx, a.ctx, nil, nil, d, observe.WakeRetry); err != nil {
		return err
	}
	return nil
}

// left returns the time left before TryLock's deadline (no bound for
// Lock), or ErrNotAcquired when none is.
func (a *acquisition) left(ttl time.Duration) (time.Duration, error) {
	left := time.Duration(1<<63 - 1)
	if !a.deadline.IsZero() {
		if left = time.Until(a.deadline); left <= 0 {
			return 0, notAcquired(a.m.name, ttl)
		}
	}
	return left, nil
}

// subscribe has the queue subscribe to the lock's channel, bounded by
// left and CommandTimeout.
func (a *acquisition) subscribe(q *queue, left time.Duration) error {
	sctx, cancel := context.WithTimeout(a.ctx, min(left, a.c.cfg.CommandTimeout))
	a.c.queues.subscription(sctx, q)
	cancel()
	if a.ctx.Err() != nil {
		return join(ErrNotAcquired, context.Cause(a.ctx))
	}
	return nil
}

// sleep waits for a wake-up on the queue's subscription, at most the
// holder's TTL and the time left.
func (a *acquisition) sleep(q *queue, ttl, left time.Duration) error {
	c := a.c
	sctx, cancel := context.WithTimeout(a.ctx, min(left, c.cfg.CommandTimeout))
	w := c.queues.subscription(sctx, q) // nil: sleep on the lease alone, slower but never wrong
	cancel()
	if !a.deadline.IsZero() {
		left = max(time.Until(a.deadline), 0) // after the subscription's time
	}
	sleep := ttl
	if sleep < 0 { // the key has no expiry: only a message ends the wait
		sleep = left
		if w == nil {
			sleep = min(left, time.Second)
		}
	}
	sleep = min(sleep, left)
	a.waiting(ttl, nil, 0)
	slept, _, err := a.m.sleep(a.octx, a.ctx, w, q.kick, sleep, observe.WakeTimeout)
	a.end.Waited += slept
	return err
}

// awaitHead waits until mb heads its queue, ctx ends, the Client closes
// or the deadline (if any) passes.
func (m *Mutex) awaitHead(ctx context.Context, mb *line.Member, deadline time.Time, ttl time.Duration) error {
	if mb.IsHead() {
		return nil
	}
	var timeout <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-mb.Head():
		return nil
	case <-ctx.Done():
		return join(ErrNotAcquired, context.Cause(ctx))
	case <-m.c.done:
		return ErrClosed
	case <-timeout:
		return notAcquired(m.name, ttl)
	}
}

// rideOut decides whether a blocking Lock waits out a failed attempt: an
// outage (Redis unreachable, a failover in progress) is transient until
// ctx ends. It returns the jittered delay before the next attempt.
func (c *Client) rideOut(ctx context.Context, blocking bool, err error, bo **backoff.ExponentialBackOff) (time.Duration, bool) {
	if !blocking || !errors.Is(err, ErrUnavailable) || ctx.Err() != nil || c.e.closed() {
		return 0, false
	}
	if *bo == nil {
		*bo = backoff.NewExponentialBackOff(
			backoff.WithInitialInterval(50*time.Millisecond),
			backoff.WithMaxInterval(time.Second),
			backoff.WithRandomizationFactor(0.5),
			backoff.WithMultiplier(2),
			backoff.WithMaxElapsedTime(0))
	}
	if isReadOnly(err) && (*bo).GetElapsedTime() > c.failoverWindow() {
		// Not a failover in progress: the configured master is a replica.
		return 0, false
	}
	return (*bo).NextBackOff(), true
}

// failoverWindow is how long a blocking Lock takes a master answering
// READONLY (a replica: a failover in progress) for an outage before it
// reports the error: the longer of 10s and the watchdog's lease.
func (c *Client) failoverWindow() time.Duration {
	return max(10*time.Second, c.cfg.WatchdogTimeout)
}

// isReply reports whether err is an error reply from the server: the
// command was answered, and a script answered so changed nothing.
func isReply(err error) bool {
	var re *rueidis.RedisError
	return errors.As(err, &re)
}

// isReadOnly reports whether err is a replica's READONLY answer.
func isReadOnly(err error) bool {
	return strings.Contains(err.Error(), "READONLY")
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

// sleep waits for a wake-up (an unlock message, or a release by this
// Client: kick), the timeout, ctx or Close.
func (m *Mutex) sleep(octx, ctx context.Context, w *pubsub.Waiter, kick <-chan struct{}, d time.Duration, onTimer observe.WakeReason) (time.Duration, observe.WakeReason, error) {
	c := m.c
	var wake <-chan pubsub.Reason
	if w != nil {
		wake = w.C()
	}
	start := time.Now()
	t := time.NewTimer(d)
	defer t.Stop()
	var reason observe.WakeReason
	select {
	case r := <-wake:
		reason = observe.WakeMessage
		if r == pubsub.Reconnect {
			reason = observe.WakeReconnect
		}
	case <-kick:
		reason = observe.WakeRelease
	case <-t.C:
		reason = onTimer
	case <-ctx.Done():
		return time.Since(start), "", join(ErrNotAcquired, context.Cause(ctx))
	case <-c.done:
		return time.Since(start), "", ErrClosed
	}
	slept := time.Since(start)
	if c.obs != nil && c.obs.WakeUp != nil {
		c.obs.WakeUp(octx, observe.WakeUp{Name: m.name, Addr: c.route.at(m.name), Reason: reason, Slept: slept})
	}
	return slept, reason, nil
}

// outcome is one attempt's result: a Held, or the holder's TTL (and a
// fair waiter's place in the queue).
type outcome struct {
	held     *Held
	TTL      time.Duration
	position int
}

// attempt makes one acquisition attempt, holding the hold's turn from
// before the request is sent until its outcome is known, or recorded as
// unsettled and handed to a settler. A lost reply is asked again with the
// same request id (its answer is the request's own, never a second hold)
// until ctx ends, the Client closes, or the lease the request would set
// must have run out.
func (m *Mutex) attempt(ctx context.Context, l *hold, owner uint64, o options) (outcome, error) {
	c := m.c
	if err := l.take(ctx, c.done, nil); err != nil {
		if errors.Is(err, ErrClosed) {
			return outcome{}, ErrClosed
		}
		return outcome{}, join(ErrNotAcquired, err)
	}
	defer l.give()
	if ctx.Err() != nil {
		// Ended before anything was sent (the turn was free): no request
		// whose grant would only be given back.
		return outcome{}, join(ErrNotAcquired, context.Cause(ctx))
	}
	if !l.p.layout(o.p) {
		// One field, two layouts (a reader's field is the plain lock's):
		// the other kind's script would read this owner's holds as its
		// own, and its release would end them all. Checked holding the
		// turn.
		if l.live() {
			return outcome{}, invalidf("%q: this owner holds it as a %s lock and cannot take it as a %s lock too", m.name, l.p.mode, o.p.mode)
		}
		if err := l.retire(ctx); err != nil {
			return outcome{}, join(ErrNotAcquired, err, context.Cause(ctx))
		}
	}
	l.p = o.p
	if err := o.p.reenter(m.name, l.live()); err != nil {
		// Checked holding the turn: two goroutines of one owner cannot
		// both pass it.
		return outcome{}, join(ErrNotAcquired, err)
	}
	if err := l.before(ctx); err != nil {
		return outcome{}, join(ErrNotAcquired, err)
	}
	lease := o.lease
	if lease == 0 {
		lease = c.cfg.WatchdogTimeout
	}
	for unsynced := 0; ; {
		out, again, err := m.request(ctx, l, owner, o, lease, &unsynced)
		if err != nil || !again {
			return out, err
		}
	}
}

// request sends one acquire request of attempt, holding the turn, and
// applies its answer; again reports that attempt must send a new one
// (holds were found lost, or a grant was given back: it came too late, or
// no replica acknowledged it, which unsynced counts).
func (m *Mutex) request(ctx context.Context, l *hold, owner uint64, o options, lease time.Duration, unsynced *int) (out outcome, again bool, err error) {
	c := m.c
	s, known, err := m.prepare(ctx, l, o.fenced)
	if err != nil {
		return outcome{}, false, err
	}
	req := reentrant.AcquireRequest{Name: m.name, Field: l.field, Lease: lease, Known: known,
		RequestID: reentrant.NewRequestID(), Fenced: o.fenced, Sync: s, Mode: o.p.mode,
		Wait: c.cfg.FairLockWaitTimeout}
	if o.fair != nil {
		l.joinFair(o.fair)
		req.Queue, req.Wait = true, l.fair.wait
		// A fair waiter sleeps at most WatchdogTimeout between attempts
		// (sleepFair): while it waits, it keeps its place (R3-5).
		req.KeepPlace = c.cfg.WatchdogTimeout
	}
	sent := time.Now()
	res, sends, err := m.send(ctx, l, req, sent, o.until)
	if err != nil {
		return outcome{}, false, err
	}
	switch res.Status {
	case reentrant.Busy:
		return outcome{TTL: res.TTL, position: res.Position}, false, nil
	case reentrant.Fewer:
		// Holds of this owner were lost (expired, deleted, taken):
		// tell their Helds, then acquire afresh.
		l.reconcile(res.Count)
		if ctx.Err() != nil { // a re-entry with the lost hold's context
			return outcome{}, false, join(ErrNotAcquired, context.Cause(ctx))
		}
		return outcome{}, true, nil
	case reentrant.Cancelled:
		return outcome{}, false, masterErr(c.route.errAt(m.name), "acquire", fmt.Errorf("%w: a new request was cancelled", reentrant.ErrUnexpectedReply))
	}
	l.count = res.Count
	late := time.Since(sent) >= lease-c.wd.Margin(lease)
	// With replicas, the hold counts once one acknowledged it: a WAIT
	// that timed out, or one after a copy sent again (the copy that ran
	// was not the one it followed), leaves it unconfirmed.
	unconfirmed := req.Sync.Replicas > 0 && (res.Acked <= 0 || sends > 1)
	if ctx.Err() == nil && !late && !unconfirmed {
		// nil once the Client is closed: born checks it after making
		// its generation, which Close ends.
		if held := l.born(ctx, c, owner, o, lease, sent, res); held != nil {
			l.leftFair(o.fair) // granted: out of the queue
			return outcome{held: held}, false, nil
		}
	}
	return m.unusable(ctx, l, req, o.fair, unconfirmed && !late, unsynced)
}

// unusable gives back a grant that cannot be used (see request); again
// reports that attempt must send a new request.
func (m *Mutex) unusable(ctx context.Context, l *hold, req reentrant.AcquireRequest, fw *fairWait, unconfirmed bool, unsynced *int) (out outcome, again bool, err error) {
	c := m.c
	s := req.Sync
	// A grant given back while its caller still waits keeps its place (a
	// fair lock's field heads the queue again, and stays counted as
	// queued: if the call ends without the lock, it leaves the queue as
	// any waiter does; issue 29, stage 4). One whose caller gave up (ctx,
	// Close) leaves the queue with the grant and wakes the next.
	keep := req.Wait
	if ctx.Err() != nil || c.e.closed() {
		keep = 0
		l.leftFair(fw)
	}
	if err := l.unwanted(ctx, keep); err != nil {
		return outcome{}, false, err
	}
	if unconfirmed {
		if *unsynced++; *unsynced == maxUnsynced {
			return outcome{}, false, join(ErrNotAcquired, masterErr(c.route.errAt(m.name), "acquire", notSynced(s)))
		}
	}
	return outcome{}, true, nil // late or unconfirmed: try again at once
}

// send sends an acquire request, asking again after a lost reply until
// the lease it would set must have run out: a later answer could not be
// used. A request whose answer could not be had is recorded as unsettled.
func (m *Mutex) send(ctx context.Context, l *hold, req reentrant.AcquireRequest, sent, last time.Time) (reentrant.AcquireResult, int, error) {
	c := m.c
	until := sent.Add(req.Lease - c.wd.Margin(req.Lease))
	if !last.IsZero() {
		// A TryLock's last moment, and never less than one send of this
		// request (CommandTimeout and the WAIT for replicas it carries).
		last = latest(last, sent.Add(c.cfg.CommandTimeout)).Add(req.Sync.Extra())
		if last.Before(until) {
			until = last
		}
	}
	var res reentrant.AcquireResult
	sends := 0
	unknown := false // some send's outcome is unknown: it may have run
	err := c.e.retryFor(ctx, m.name, "acquire", req.Sync.Extra(), until, stops{a: c.done, caller: true, own: true}, func(actx context.Context) (err error) {
		sends++
		res, err = req.Run(actx, c.crc)
		if err != nil && isReply(err) {
			// Answered (READONLY, LOADING, ...): the script changed
			// nothing, and whether to ask again is the caller's
			// wait to decide, not a resend's.
			return answered{err}
		}
		unknown = unknown || err != nil
		return err
	})
	if err == nil {
		c.reps.acked(m.name, req.Sync, res.Acked)
		if sends > 1 {
			l.fence(ctx, req.RequestID, sent)
		}
		return res, sends, nil
	}
	if errors.Is(err, ErrUnavailable) && unknown {
		// The request may still run: record it; a settler orders
		// its fate before any later request of this field. (A send
		// answered with an error reply, such as a replica's
		// READONLY, did not run: the script changes nothing before
		// the last command Redis could refuse.)
		l.requestLost(req.RequestID, sent, nil)
		l.settleLater()
	}
	if errors.Is(err, ErrClosed) {
		return res, sends, err
	}
	return res, sends, join(ErrNotAcquired, err, context.Cause(ctx))
}

// prepare returns what an acquire of l goes out with, holding the turn:
// its replica sync, and the count it tells the script (known). It fails
// when known's release of holds nobody has got no answer (the caller's
// ctx cut it, or the master did not answer): no request of the field
// goes out before that release is settled, which a settler now does;
// landing after this acquire, it would take its hold (a double grant
// found by review).
func (m *Mutex) prepare(ctx context.Context, l *hold, fenced bool) (reentrant.Sync, int, error) {
	s, err := m.c.reps.sync(ctx, m.name)
	if err != nil {
		return s, 0, join(ErrNotAcquired, masterErr(m.c.route.at(m.name), "acquire", err))
	}
	known := l.known(ctx, fenced)
	if l.unsettled == nil {
		return s, known, nil
	}
	err = masterErr(m.c.route.errAt(m.name), "acquire", fmt.Errorf("%w: a release of this owner's holds nobody has is unanswered", ErrUnavailable))
	return s, 0, join(ErrNotAcquired, err, context.Cause(ctx))
}

// isClosed reports whether Close has begun.
func (e *env) closed() bool {
	select {
	case <-e.done:
		return true
	default:
		return false
	}
}
