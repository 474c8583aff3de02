package lock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/observe"
	"github.com/rlock-go/rlock/reentrant"
	"github.com/rlock-go/rlock/watchdog"
)

// A hold is the Client's account of one lock held by one holder field
// "<client id>:<owner>": the only place where the field's hold count is
// known, and the one order in which it changes.
//
// Order. Every Redis command that can change the field's count on this
// lock (an acquire, a re-entry, a release, the give-back of a cancelled
// Lock, the settlement of a request whose answer was lost) is sent by the
// goroutine holding the hold's turn, and the turn is kept until that
// command's outcome is known or recorded as unsettled. So no two such
// commands of one field are ever in flight together, and no reordering
// across rueidis connections can put one before another. Renewals do not
// change counts and are not ordered by the turn; the watchdog judges them.
//
// Ownership of the fields (docs/design.md, "One owner, one guard"):
//   - count, unsettled, p, fair, helds, renewing: the turn; only its
//     holder reads or writes them;
//   - g, the generation of the live Helds: written by the turn holder
//     only (a pointer, read by anyone); a generation's end is its own,
//     set once (gen);
//   - turn, busy and waiters: tmu, the turn's own mechanism;
//   - users: the holds map's guard (env.mu), with the map: a hold stays
//     in the map while it has a user, or keep says it must (written by
//     the turn holder);
//   - a Held's own state: Held.mu.
//
// A loss judged while someone else holds the turn (the watchdog does
// not wait for a long Unlock) ends the generation, and so every Held of
// it at once; the turn holder that comes next (or gives the turn)
// applies it to helds and the entry (current, the model's applyLost).
type hold struct {
	name, field string
	e           *env // its Client's, shared by all its holds
	// busy is set while the turn is taken. turn (capacity 1) is made
	// only when a take must wait, and give hands the turn over through
	// it; the give that leaves nobody waiting drops it: a channel costs
	// 96 bytes, and a lock's turn is free nearly always.
	turn chan struct{}
	tmu  sync.Mutex

	// guarded by the turn
	count     int       // the field's holds in Redis, as far as this Client knows
	unsettled *request  // the one request whose outcome is unknown, if any
	helds     []*Held   // the live Helds of g (those a loss ended stay until current applies it)
	renewing  int32     // live helds taken without Lease
	p         *protocol // the last acquisition's kind, which the field's releases follow
	// fair is the field's place in a fair lock's queue (FairMutex),
	// made by its first request that joins the queue.
	fair *fairPlace

	g atomic.Pointer[gen] // the live Helds' generation, nil when none: written holding the turn

	waiters int32       // guarded by tmu: takes waiting on turn (it is kept while any is)
	busy    bool        // guarded by tmu
	users   int32       // guarded by env.mu: goroutines using the hold; it is dropped when 0 and not keep
	keep    atomic.Bool // written holding the turn: a generation, an unsettled request or a pending leave: never drop the hold
}

// gen is one generation of a hold's Helds: made by the born of a first
// Held (the hold had none live), with the watchdog entry that tracks
// them, and ended when the last of them ends, the watchdog judges them
// lost, or the Client closes. Immutable but for its end, which is its
// own, in two atomics each set once: why, the end of its Helds (a
// *LostError, ErrClosed, or whyEnded once none is live), which is the
// one point at which a loss or Close happens for them and for the turn
// holder alike; and end, the hold's record of it (the loss, even one
// judged after Close, or genEnded), set after why. A Held of it that is
// asked for its context gets a child of the generation's, made then
// (context): so a loss or Close ends every Held at once, without the
// hold's turn, and a generation nobody asks a context of costs no
// context.
type gen struct {
	entry  *watchdog.Entry
	first  *Held                     // its first Held, for the observer's Loss
	end    atomic.Pointer[LostError] // its loss, or genEnded; nil while live
	why    atomic.Pointer[genWhy]    // why its Helds ended; nil while live
	parent atomic.Pointer[genCtx]    // its Helds' contexts' parent, made when first asked for
}

// genCtx is a generation's context and its cancel.
type genCtx struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// genWhy is why a generation's Helds ended.
type genWhy struct{ cause error }

// genEnded and whyEnded are a generation's end that is no loss: its last
// Held ended, or Close released it.
var (
	genEnded = &LostError{}
	whyEnded = &genWhy{ErrNotHeld}
)

// lossErr is the loss that ended g, nil if none (or g is nil): from why
// (the loss ended its Helds) or end (judged after Close ended them).
func (g *gen) lossErr() *LostError {
	if g == nil {
		return nil
	}
	if w := g.why.Load(); w != nil {
		if lost, ok := w.cause.(*LostError); ok {
			return lost
		}
	}
	if lost := g.end.Load(); lost != genEnded {
		return lost
	}
	return nil
}

// cause is why g's Helds ended (a *LostError, ErrClosed), nil while
// they may be live.
func (g *gen) cause() error {
	if w := g.why.Load(); w != nil && w != whyEnded {
		return w.cause
	}
	if lost := g.end.Load(); lost != nil && lost != genEnded {
		return lost
	}
	return nil
}

// whyLost reports whether a loss ended g's Helds (not Close, nor their
// plain end).
func (g *gen) whyLost() bool {
	w := g.why.Load()
	if w == nil {
		return false
	}
	_, lost := w.cause.(*LostError)
	return lost
}

// live reports whether g is a generation of live Helds: for readers
// without the turn (a generation's fields are its own).
func (g *gen) live() bool { return g != nil && g.why.Load() == nil && g.end.Load() == nil }

// stop ends g's Helds with cause, unless they ended before: the first
// cause is theirs; it reports whether this one was. (stop sets why, then
// reads parent; context sets parent, then reads why: one of them sees the
// other, and cancels.)
func (g *gen) stop(cause error) bool {
	if lost := g.end.Load(); lost != nil && lost != genEnded {
		cause = lost // recorded already: the loss came first
	}
	if !g.why.CompareAndSwap(nil, &genWhy{cause}) {
		return false
	}
	if p := g.parent.Load(); p != nil {
		p.cancel(cause)
	}
	return true
}

// context is the parent of g's Helds' contexts, made when first asked
// for; ended already if g's Helds have.
func (g *gen) context() context.Context {
	p := g.parent.Load()
	if p == nil {
		ctx, cancel := context.WithCancelCause(context.Background())
		if g.parent.CompareAndSwap(nil, &genCtx{ctx, cancel}) {
			p = g.parent.Load()
		} else {
			cancel(nil) // another made it first
			p = g.parent.Load()
		}
	}
	if w := g.why.Load(); w != nil {
		p.cancel(w.cause) // a no-op when stop cancelled it
	}
	return p.ctx
}

// env is what a hold uses of its Client, and nothing else: the hold has
// no *Client. One per Client, made by newClient, which fills in wd,
// publish and settleCtx as it makes them; no field changes once newClient
// has returned.
type env struct {
	rc      rueidis.Client
	cfg     Config
	wd      *watchdog.Registry
	obs     *observe.Observer
	publish string        // the command a release publishes with (Redisson's PUBLISH or SPUBLISH)
	done    chan struct{} // closed by Close

	// mu is the Client's guard of its holds map (index), which also
	// guards each hold's users.
	mu    *sync.Mutex
	index map[holdKey]*hold

	recordMin time.Duration // the least life of a request's record: unlockLatchTTL (tests shorten it)
	latches   chan string   // answered releases' unlock latches, for the cleaner
	// latchesFull wakes the cleaner before its delay when latches holds
	// latchWake (capacity 1: one wake-up pending is enough).
	latchesFull chan struct{}
	settleCtx   context.Context // ends settlers: cancelled by Close
	// ending is set by Close before it ends every generation (cause
	// ErrClosed), once the calls in flight returned or its ctx ended: a
	// generation born meanwhile is ended by Close or finds it set (born).
	ending   atomic.Bool
	settling *tally // settlers of unsettled requests, waited for by Close within its ctx

	at    func(name string) string // the master that owns name, for the watchdog
	errAt func(name string) string // the node named in errors about name
	// sync is the replica sync a request on name goes out with (replicas.go).
	sync  func(ctx context.Context, name string) (reentrant.Sync, error)
	acked func(name string, s reentrant.Sync, acked int) // a WAIT's answer, for the replica count
	kick  func(queueKey)                                 // wakes the head of this Client's queue of a lock
	spawn func(f func())                                 // runs f on one of the Client's workers (workers.go)
}

// fairPlace is a field's place in a fair lock's queue in Redis: how many
// of its acquisitions may be queued (goroutines sharing an owner share
// the one place), the wait it last joined with, and whether it must leave
// (the last of them gave up; it leaves once no request of the field may
// still run). Guarded by the hold's turn.
type fairPlace struct {
	queued int32
	leave  bool
	wait   time.Duration
}

// request is a count-changing request whose answer was lost.
type request struct {
	id      string
	release *Held     // the hold a release was for; nil for an acquire
	sent    time.Time // its first send
	// answered: every send of it got an answer (a refusal, OOM say): no
	// copy can reach Redis later, so its record is deleted once settled
	// (P1-87). Otherwise the record must outlive every copy (recordTTL).
	answered bool
}

// answeredOnly wraps the error of a release whose every send was answered
// (sendRelease): nothing of it is still on its way to Redis.
type answeredOnly struct{ error }

func (a answeredOnly) Unwrap() error { return a.error }

// allAnswered reports whether err is a release's whose every send was
// answered.
func allAnswered(err error) bool {
	var a answeredOnly
	return errors.As(err, &a)
}

// use returns the hold of (name, field), made with protocol p if it is
// new, counting the caller as a user until unuse.
func (c *Client) use(name, field string, p *protocol) *hold {
	k := key(name, field)
	c.mu.Lock()
	l := c.index[k]
	if l == nil {
		l = &hold{name: name, field: field, p: p, e: c.e}
		c.index[k] = l
	}
	l.users++
	c.mu.Unlock()
	return l
}

// useHold counts the caller as a user of a hold it already has.
func (l *hold) use() {
	l.e.mu.Lock()
	l.users++
	l.e.mu.Unlock()
}

// unuse ends a use; the hold is dropped when it has no user and holds
// nothing. A hold with an unsettled request keeps a user (its settler).
func (l *hold) unuse() {
	l.e.mu.Lock()
	l.users--
	if l.users == 0 && !l.keep.Load() {
		if l.e.index[key(l.name, l.field)] == l {
			delete(l.e.index, key(l.name, l.field))
		}
	}
	l.e.mu.Unlock()
}

// take takes l's turn, waiting until ctx ends, stop closes or lost closes.
// A free turn is taken with no channel; waiters wait on the turn channel
// (made by the first of them) and are served in the order they came (the
// channel's receive queue): give hands the turn to the first directly.
func (l *hold) take(ctx context.Context, stop, lost <-chan struct{}) error {
	l.tmu.Lock()
	if !l.busy {
		l.busy = true
		l.tmu.Unlock()
		return nil
	}
	if l.turn == nil {
		l.turn = make(chan struct{}, 1)
	}
	turn := l.turn
	l.waiters++
	l.tmu.Unlock()
	var err error
	select {
	case <-turn:
		// handed over by give: busy stayed set
	case <-ctx.Done():
		err = ctx.Err()
	case <-stop:
		err = ErrClosed
	case <-lost:
		err = errLostWhileWaiting
	}
	l.tmu.Lock()
	l.waiters--
	handed := false
	if err != nil {
		select {
		case <-turn: // handed over as this wait ended: pass it on
			handed = true
		default:
		}
	}
	l.tmu.Unlock()
	if handed {
		l.give() // as any turn holder: a loss judged meanwhile is applied first
	}
	return err
}

// tryTake takes the turn if it is free, without waiting.
func (l *hold) tryTake() bool {
	l.tmu.Lock()
	defer l.tmu.Unlock()
	if l.busy {
		return false
	}
	l.busy = true
	return true
}

var errLostWhileWaiting = errors.New("rlock: hold ended while waiting")

// give gives the turn back: to the first waiter, if any, else it frees it
// and drops the channel. A loss judged meanwhile is applied first
// (current), and checked again under tmu: lossJudged's tryTake, which
// failed while this turn was held, left it to this give.
func (l *hold) give() {
	for {
		l.current()
		l.tmu.Lock()
		if l.g.Load().lossErr() == nil {
			break
		}
		l.tmu.Unlock()
	}
	l.passLocked()
	l.tmu.Unlock()
}

// passLocked hands the taken turn to the first waiter, or frees it when
// nobody waits. Only the turn's holder calls it (give, or a waiter that
// was handed the turn as its wait ended), so the channel's one slot is
// empty. Holding tmu.
func (l *hold) passLocked() {
	if l.waiters > 0 {
		l.turn <- struct{}{}
		return
	}
	l.busy = false
	l.turn = nil
}

// recordTTL is how long a request's record (its unlock latch, or the
// settlement's fence) lives: longer than any retry of the request.
func (e *env) recordTTL() time.Duration {
	return max(e.recordMin, 4*e.cfg.WatchdogTimeout+4*e.cfg.CommandTimeout)
}

// retryHorizon is the last moment a request first sent at sent may be
// sent again: every copy sent until then runs (or never does) while the
// record the first copy left still lives, so that it is answered by that
// record rather than applied twice.
func (e *env) retryHorizon(sent time.Time) time.Time {
	return sent.Add(e.recordTTL() - 2*e.cfg.CommandTimeout)
}

// settle resolves l's unsettled request, if any, holding the turn: after
// it, the request can no longer change the count, and the count is
// exact. It retries lost answers until ctx ends or st stops it. A settled
// release ends its Held as the release would have.
func (l *hold) settle(ctx context.Context, st stops) error {
	u := l.unsettled
	if u == nil {
		return nil
	}
	s := reentrant.Settle{Name: l.name, Field: l.field, RequestID: u.id, RecordTTL: l.e.recordTTL()}
	var out reentrant.Settled
	err := l.e.retry(ctx, l.name, "settle", st, func(actx context.Context) (err error) {
		out, err = s.Run(actx, l.e.rc)
		return err
	})
	if err != nil {
		return err
	}
	l.setUnsettled(nil)
	if u.answered {
		l.e.queueLatch(l.name, u.id) // no copy of it can arrive: its record fences nothing
	}
	if u.release != nil && out.Release != reentrant.Fenced {
		// The release ran: its hold is gone.
		u.release.mu.Lock()
		u.release.late = u.release.late || !u.release.done
		u.release.mu.Unlock()
		if l.endHeld(u.release, nil) > 0 && out.Release == reentrant.Released {
			l.loseAll(observe.LossNotHeld, "Redis released the lock while this owner had other holds of it")
		}
	}
	l.reconcile(out.Count)
	if u.release != nil && out.Release == reentrant.Fenced {
		if time.Now().After(l.e.retryHorizon(u.sent)) {
			// Its latch may have expired: "not run" cannot be told from
			// "ran, and its record is gone". Releasing again could take a
			// hold twice; report the loss instead.
			l.loseAll(observe.LossNotHeld, "the outcome of a release is unknown: its record expired before it could be settled")
			return nil
		}
		// The release never ran: its Unlock failed, and the hold is
		// still there. Release it now, as its Unlock asked.
		return l.finishRelease(ctx, u.release, st.caller)
	}
	return nil
}

// finishRelease releases h, whose Unlock failed and whose release was
// found not to have run, holding the turn. A lost answer leaves it
// unsettled again. caller: on a caller's goroutine, the send ends with
// its ctx (stops.caller).
func (l *hold) finishRelease(ctx context.Context, h *Held, caller bool) error {
	if done, _ := h.ended(); done {
		return nil
	}
	r := l.newRelease(l.partialLease(h))
	sent := time.Now()
	res, _, err := l.e.sendRelease(ctx, r, stops{held: h, caller: caller})
	if err != nil {
		if errors.Is(err, ErrUnavailable) {
			l.releaseLost(r.RequestID, h, sent, err)
		}
		return err
	}
	h.mu.Lock()
	h.late = !h.done
	h.mu.Unlock()
	l.releaseAnswered(ctx, h, res)
	return nil
}

// reconcile sets the count to what Redis says it is. Fewer holds than
// live Helds means some were lost: every live Held ends with a LostError
// (which one lost its hold cannot be told). More means stray holds
// nobody has (an acquire that ran after its caller gave up): they are
// releaseAnswered once no Held remains. Holding the turn.
func (l *hold) reconcile(count int) {
	l.count = count
	l.current()
	if count < len(l.helds) {
		l.loseAll(observe.LossNotHeld, "Redis holds fewer holds of this owner than it has")
	}
}

// loseAll ends every live Held of l with a LostError and stops tracking;
// the turn holder, or anyone (a force unlock of the name).
func (l *hold) loseAll(kind observe.LossKind, reason string) {
	g := l.g.Load()
	if g == nil {
		return // nothing live
	}
	if !l.e.wd.Lose(g.entry, kind, reason) {
		// Not tracked any more (or already judged): end it directly.
		l.lossJudged(g, &watchdog.LossError{Name: l.name, Kind: kind, Reason: reason})
	}
}

// lossJudged ends every Held of generation g with a LostError, at once,
// whoever holds the turn: the watchdog's report, or loseAll's (the
// model's lossJudged). The hold's helds and entry follow at the next
// turn's current; if the turn is free, here.
func (l *hold) lossJudged(g *gen, le *watchdog.LossError) {
	lost := &LostError{Name: l.name, Addr: l.e.at(l.name), Kind: le.Kind, Reason: le.Reason}
	if le.Err != nil {
		lost.Err = masterErr(l.e.errAt(l.name), "renew", le.Err)
	}
	// The Helds end first (why, which the turn holder reads too), then
	// the hold's record (end): a loss judged after Close ended the Helds
	// is recorded all the same (closeReleases stops at it).
	// One report per generation: by the judgement that ended the Helds,
	// or, when Close had ended them, by the one that recorded the loss.
	ended := g.stop(lost)
	recorded := g.end.CompareAndSwap(nil, lost)
	if !ended && (!recorded || g.whyLost()) {
		return // ended already: plainly, or judged before
	}
	if l.e.obs != nil && l.e.obs.Loss != nil {
		h := g.first
		l.e.obs.Loss(h.context(), observe.Loss{Name: l.name, Addr: l.e.at(l.name), Owner: h.owner, HeldFor: time.Since(h.at), Kind: lost.Kind, Reason: lost.Reason, Err: lost})
	}
	// Applied now if nobody holds the turn; else its holder's give
	// applies it (give checks, under tmu, after this tryTake's).
	l.use()
	if l.tryTake() {
		l.give()
	}
	l.unuse()
}

// current returns l's generation of live Helds, nil when none, first
// applying a loss judged since (the model's applyLost): the lost Helds
// (ended already, by their generation's context) are forgotten, and the
// entry with them. Holding the turn.
func (l *hold) current() *gen {
	g := l.g.Load()
	if g != nil && g.lossErr() != nil {
		l.endGen(g)
		return nil
	}
	return g
}

// newGen starts l's generation for its first live Held h, tracked by the
// watchdog; holding the turn.
func (l *hold) newGen(h *Held, wh reentrant.Hold, lease time.Duration, renew bool, sent time.Time) *gen {
	g := &gen{first: h}
	g.entry = l.e.wd.TrackHold(wh, lease, renew, sent, func(_ *watchdog.Entry, le *watchdog.LossError) { l.lossJudged(g, le) })
	l.g.Store(g)
	l.setKeep()
	return g
}

// endGen ends generation g of l, holding the turn: no Held of it is live
// any more (ended, lost, or closed). Its entry is no longer tracked.
func (l *hold) endGen(g *gen) {
	g.why.CompareAndSwap(nil, whyEnded)
	end := genEnded
	if lost := g.lossErr(); lost != nil {
		end = lost
	}
	g.end.CompareAndSwap(nil, end)
	l.e.wd.Remove(g.entry)
	l.g.Store(nil)
	l.helds, l.renewing = nil, 0
	l.setKeep()
}

// retry runs send until it returns nil or a server error, retrying
// network failures with a growing delay until ctx ends or st stops it.
// Each send is bounded by CommandTimeout.
func (e *env) retry(ctx context.Context, name, op string, st stops, send func(context.Context) error) error {
	return e.retryFor(ctx, name, op, 0, time.Time{}, st, send)
}

// stops are what ends a retry's waiting with ErrClosed: up to two
// channels, and the end of a hold, whose context (and channel) is made
// only when a retry must wait.
type stops struct {
	a, b <-chan struct{}
	held *Held
	// caller: each send is on the caller's behalf, and ends with its ctx
	// (sendCtx): the call returns when its ctx ends, and a request whose
	// answer did not come is settled in the background.
	caller bool
	// own: ctx is the application's own (a Lock's, an Unlock's), not one
	// the library bounded: a send cut by its end says so (inFlight).
	own bool
}

// lost is the held's Done channel, nil without one.
func (s stops) lost() <-chan struct{} {
	if s.held == nil {
		return nil
	}
	return s.held.ending()
}

// retryFor is retry whose every attempt may take extra beyond
// CommandTimeout (a WAIT for replicas sent with the request), and which
// sends nothing after until (unless zero): as with a deadline on ctx, but
// with no timer unless a send fails.
func (e *env) retryFor(ctx context.Context, name, op string, extra time.Duration, until time.Time, st stops, send func(context.Context) error) error {
	delay := 5 * time.Millisecond
	for {
		actx := newSendCtx(ctx, e.cfg.CommandTimeout+extra, until, st.caller)
		err := send(actx)
		actx.stop()
		if err == nil {
			return nil
		}
		var a answered
		if errors.As(err, &a) {
			return masterErr(e.errAt(name), op, a.err)
		}
		if st.own {
			if cut := actx.cutByCaller(err); cut != nil {
				return masterErr(e.errAt(name), op, cut)
			}
		}
		err = masterErr(e.errAt(name), op, err)
		if !errors.Is(err, ErrUnavailable) {
			return err
		}
		if perr := pauseRetry(ctx, delay, until, st); perr != nil {
			return join(err, perr)
		}
		delay = min(2*delay, time.Second)
	}
}

// pauseRetry waits d before a send is retried; it returns ctx's error
// when ctx ends, context.DeadlineExceeded when until comes first, and
// ErrClosed when st stops it.
func pauseRetry(ctx context.Context, d time.Duration, until time.Time, st stops) error {
	last := false
	if !until.IsZero() {
		if left := time.Until(until); left <= d {
			d, last = max(left, 0), true
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		if last {
			return context.DeadlineExceeded
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-st.a:
		return ErrClosed
	case <-st.b:
		return ErrClosed
	case <-st.lost():
		return ErrClosed
	}
}

// answered is what a send returns for a request the server answered with
// an error reply that retry must not send again: retry returns the reply.
type answered struct{ err error }

func (a answered) Error() string { return a.err.Error() }
func (a answered) Unwrap() error { return a.err }

// settleLater settles l's unsettled request in the background, on one of
// the Client's workers: the caller that left it has returned. It waits
// for the turn like any other user, and gives up when the Client closes;
// the request then stays recorded and the next operation of the field
// settles it.
func (l *hold) settleLater() { l.finishLater(nil) }

// finishLater is settleLater, which also sends the field's pending leave of a
// fair lock's queue once settled, first uncounting fw (a fair acquisition
// that gave up without the turn) when not nil.
func (l *hold) finishLater(fw *fairWait) {
	l.use()
	l.e.settling.Add(1)
	l.e.spawn(func() {
		defer l.e.settling.Done()
		defer l.unuse()
		ctx := l.e.settleCtx
		if err := l.take(ctx, nil, nil); err != nil {
			return
		}
		defer l.give()
		if fw != nil && fw.queued {
			l.leftFair(fw)
			l.setLeave(l.fair.queued == 0)
		}
		if l.unsettled == nil && !l.leaving() && !l.strays() {
			return
		}
		hctx, cancel := context.WithDeadline(ctx, l.settleUntil())
		defer cancel()
		for l.unsettled != nil && hctx.Err() == nil {
			if l.settle(hctx, stops{}) != nil {
				return
			}
		}
		_ = l.leaveNow(hctx, stops{})
		l.releaseStrays(hctx, stops{})
	})
}

// settleUntil is how long a settler works on l, holding the turn: until
// the unsettled request's lease must have run out (and a little more):
// past that, whatever it did has expired, unless it was a re-entry, which
// the next operation settles. A release (of a Held that waits for its
// outcome) is settled for as long from now. A pending leave of a fair
// queue is sent for as long as the place may live: the wait it joined
// with beyond the one ahead, whose own is bounded by a lease.
func (l *hold) settleUntil() time.Time {
	var until time.Time
	if u := l.unsettled; u != nil {
		from := u.sent
		if u.release != nil {
			from = time.Now()
		}
		until = from.Add(l.e.cfg.WatchdogTimeout + l.e.cfg.CommandTimeout)
	}
	if l.leaving() {
		until = latest(until, time.Now().Add(l.fair.wait+l.e.cfg.WatchdogTimeout+l.e.cfg.CommandTimeout))
	}
	if l.strays() {
		// Holds nobody has, left by a caller whose ctx ended: released
		// for as long as they may live (a lease).
		until = latest(until, time.Now().Add(l.e.cfg.WatchdogTimeout))
	}
	return until
}

// strays reports whether Redis counts holds of l that no live Held has,
// with nothing unsettled: releaseStrays's work. The caller holds the turn.
func (l *hold) strays() bool {
	return l.count > 0 && l.unsettled == nil && l.current() == nil
}

// latest returns the later of a and b.
func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// releaseStrays releases holds Redis counts beyond the live Helds when no
// Held is left, holding the turn: they belong to nobody. On a caller's
// goroutine st says so (stops.caller): a release its ctx cuts is left
// unsettled, for a settler.
func (l *hold) releaseStrays(ctx context.Context, st stops) {
	if st.caller {
		// Those a caller's ctx leaves (it ended between two releases)
		// are a settler's to release.
		defer func() {
			if ctx.Err() != nil && l.strays() {
				l.settleLater()
			}
		}()
	}
	for l.strays() && ctx.Err() == nil {
		r := l.newRelease(l.e.cfg.WatchdogTimeout)
		res, _, err := l.e.sendRelease(ctx, r, st)
		if err != nil {
			if errors.Is(err, ErrUnavailable) {
				l.requestLost(r.RequestID, time.Now(), err)
				l.settleLater()
			}
			return
		}
		switch res {
		case reentrant.StillHeld:
			l.count = max(l.count-1, 1)
		default:
			l.count = 0
		}
	}
}

// sendRelease sends r, asking again after a lost answer (see retry) until
// its retry horizon (a copy sent later could outlive the latch that makes
// it answered rather than applied: the outcome then stays unknown, an
// ErrUnavailable for the caller to record as unsettled), and returns its
// answer. The latch of a release whose every send was answered (a
// refusal such as OOM is an answer) is deleted by the cleaner; that of a
// release with a send that got no answer is left to expire (recordTTL),
// since a late copy of that send must still find it (P1-85, P1-87).
//
// When the master has replicas (Config.ReplicaSyncTimeout), a release
// that ran is sent again, answered by its latch, until a replica
// acknowledged it, maxUnsynced times in all; unsynced is then the error
// to report, the release having taken effect on the master. So is an
// ErrAuth when the release took the last hold but the server refused its
// unlock message (P1-77).
func (e *env) sendRelease(ctx context.Context, r reentrant.Release, st stops) (res reentrant.ReleaseResult, unsynced, err error) {
	// A release goes out even when ROLE is refused: with a WAIT.
	r.Sync, _ = e.sync(ctx, r.Name)
	unknown := 0         // sends with no answer: a copy may still reach Redis
	unannounced := false // released, but the server refused the unlock message
	latch := ""          // the latch key, as the sends built it
	until := e.retryHorizon(time.Now())
	for tries := 1; ; tries++ {
		acked := -1
		err = e.retryFor(ctx, r.Name, "release", r.Sync.Extra(), until, st, func(actx context.Context) (err error) {
			var o reentrant.ReleaseOutcome
			o, err = r.RunOutcome(actx, e.rc)
			res, acked, latch = o.Result, o.Acked, o.Latch
			if o.Unannounced {
				unannounced = true
			}
			if err != nil {
				if _, answered := rueidis.IsRedisErr(err); !answered {
					unknown++
				}
			}
			return err
		})
		if err != nil {
			if unknown == 0 {
				err = answeredOnly{err}
			}
			return res, nil, err
		}
		e.acked(r.Name, r.Sync, acked)
		ran := res == reentrant.StillHeld || res == reentrant.Released
		if r.Sync.Replicas == 0 || !ran || acked > 0 {
			break
		}
		if tries == maxUnsynced {
			unsynced = masterErr(e.errAt(r.Name), "release", notSynced(r.Sync))
			break
		}
		// Sent again: to as many replicas as the master has now (a
		// failover may have left it none).
		if r.Sync, _ = e.sync(ctx, r.Name); r.Sync.Replicas == 0 {
			break
		}
	}
	if unknown == 0 {
		e.queueLatchKey(latch) // every send ran RunOutcome, which names it
	}
	if unannounced {
		unsynced = join(unsynced, unannouncedErr(e.errAt(r.Name), "release", "released", r.Name, r.Publish))
	}
	return res, unsynced, nil
}

// unannouncedErr is the ErrAuth of a release or force unlock (op) that
// freed the lock name (did: "released", "deleted"), but whose unlock
// message the server refused (publish, to the lock's channel: its ACL;
// P1-77).
func unannouncedErr(addr, op, did, name, publish string) error {
	return &MasterError{Addr: addr, Op: op, kind: ErrAuth,
		Err: fmt.Errorf("%q %s without its unlock message: the server refused %s to the lock's channel (its ACL); "+
			"waiters elsewhere wake only when the lease they saw ends (docs/safety.md: the ACL rlock needs)", name, did, publish)}
}

// queueLatch hands the latch (record) of request id on lock name to the
// cleaner: an answered release's, or a settled request's that nothing can
// reach any more.
func (e *env) queueLatch(name, id string) { e.queueLatchKey(reentrant.LatchName(name, id)) }

// queueLatchKey is queueLatch of the latch key latch.
func (e *env) queueLatchKey(latch string) {
	select {
	case e.latches <- latch:
		if len(e.latches) >= latchWake {
			select {
			case e.latchesFull <- struct{}{}:
			default:
			}
		}
	default: // the latch expires by itself
	}
}

// requestLost records a request no Held waits for (an acquire, a
// give-back, a stray's or Close's release) whose outcome is unknown, and
// releaseLost a Held's release whose outcome is unknown: the hold's one
// unsettled request, which its next turn settles first (the model's
// acquireLost and releaseLost). The caller holds the turn.
func (l *hold) requestLost(id string, sent time.Time, err error) {
	l.setUnsettled(&request{id: id, sent: sent, answered: allAnswered(err)})
}

// releaseLost: see requestLost.
func (l *hold) releaseLost(id string, h *Held, sent time.Time, err error) {
	l.setUnsettled(&request{id: id, release: h, sent: sent, answered: allAnswered(err)})
}

// setUnsettled records (or, with nil, clears) l's unsettled request;
// the caller holds the turn.
func (l *hold) setUnsettled(u *request) {
	l.unsettled = u
	l.setKeep()
}

// setKeep keeps l in its Client's map while it has live Helds, an
// unsettled request or a pending leave of a fair queue (their settler
// needs it); the caller holds the turn.
func (l *hold) setKeep() {
	l.keep.Store(l.g.Load() != nil || l.unsettled != nil || l.leaving())
}

// ---- Close's steps on one hold (Client.Close calls them).

// closeHold releases every hold of l for Close, holding its turn, once
// its Helds have ended (Close ended every generation). Releases stop
// when ctx ends or when the lock is lost (its lease ran out unanswered):
// Close never waits longer than the leases of what it holds.
func (l *hold) closeHold(ctx context.Context) error {
	if err := l.take(ctx, nil, nil); err != nil {
		// A call or a settler holds the turn past Close's ctx, its
		// request in flight: what the request does is theirs to settle
		// or give back; what stays in Redis expires within its lease.
		// Its Helds have ended (their generation's context).
		err = wrapf(err, "close: %q: a request of a call or a settler was still in flight, left to it (a hold left in Redis expires within its lease)", l.name)
		if lost := l.g.Load().lossErr(); lost != nil {
			return join(err, lost)
		}
		return err
	}
	defer l.give()
	g := l.g.Load()
	if lost := g.lossErr(); lost != nil {
		return lost // lost before Close: nothing to release (give applies it)
	}
	if err := l.closeSettle(ctx); err != nil {
		l.endClosed(g)
		return err
	}
	if lost := g.lossErr(); lost != nil {
		return lost // the settlement found it lost
	}
	if g != nil {
		// No renewal may land after the last release (it would read as
		// a loss); the entry is still judged.
		if err := l.e.wd.Begin(ctx, g.entry); err != nil {
			l.endClosed(g)
			return err
		}
		defer l.e.wd.End(g.entry) // after endClosed's Remove
	}
	helds := append([]*Held(nil), l.helds...)
	for i := len(helds) - 1; i >= 0; i-- {
		helds[i].finish(ErrClosed) // ended already, by their generation
	}
	err := l.closeReleases(ctx, g, helds)
	l.endClosed(g)
	return err
}

// closeSettle settles l's unsettled request for Close and sends a fair
// queue's place its waiters left, holding the turn, within ctx: each send
// is Close's own (stops.caller). It returns what is left behind: the
// request, and the place, which expires by itself within
// FairLockWaitTimeout.
func (l *hold) closeSettle(ctx context.Context) error {
	sctx, cancel := context.WithTimeout(ctx, 2*l.e.cfg.CommandTimeout)
	defer cancel()
	err := l.settle(sctx, stops{caller: true})
	if err == nil {
		err = l.leaveNow(sctx, stops{caller: true})
	}
	if err != nil && l.leaving() {
		err = wrapf(err, "left the place of %q in its fair queue (it expires within FairLockWaitTimeout, %v)", l.name, l.e.cfg.FairLockWaitTimeout)
	}
	return err
}

// closeReleases releases what l holds for Close, holding the turn, once
// its Helds have ended: until the count is 0, ctx ends, or the lease of
// generation g (nil: strays only) must have run out, which is then
// reported as the loss the watchdog judged.
func (l *hold) closeReleases(ctx context.Context, g *gen, helds []*Held) (err error) {
	bound := 2 * l.e.cfg.CommandTimeout
	if g != nil {
		// Releases stop when the lease must have run out: Close never
		// waits longer than the leases of what it holds.
		if bound = time.Until(l.e.wd.Deadline(g.entry)); bound <= 0 {
			// Run out already, and not judged yet (the watchdog is late).
			l.loseAll(observe.LossLeaseExpired, "its lease ran out before Close could release it")
		}
	} // else strays only: nobody's lease bounds their release, so one
	// attempt's worth of time does; they expire by themselves.
	rctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	var notes error // releases that ran unacknowledged or unannounced
	defer func() { err = join(err, notes) }()
	for l.count > 0 && err == nil && bound > 0 && g.lossErr() == nil {
		var note error
		note, err = l.closeRelease(rctx, helds)
		notes = join(notes, note)
	}
	if lost := g.lossErr(); l.count > 0 && lost != nil {
		err = join(err, lost) // its lease ran out before Close could release it
	}
	return err
}

// closeRelease sends one of Close's releases of l, holding the turn, and
// applies its answer. note is what an Unlock would have said of a release
// that ran: no replica acknowledged it, or it went without its unlock
// message (P1-77).
func (l *hold) closeRelease(ctx context.Context, helds []*Held) (note, err error) {
	r := l.newRelease(l.e.cfg.WatchdogTimeout)
	start := time.Now()
	res, note, err := l.e.sendRelease(ctx, r, stops{caller: true}) // within Close's ctx
	if l.e.obs != nil && l.e.obs.Release != nil && len(helds) > 0 {
		h := helds[len(helds)-1]
		l.e.obs.Release(ctx, observe.Release{Name: l.name, Addr: l.e.at(l.name), Owner: h.owner, Released: err == nil && res == reentrant.Released,
			HeldFor: start.Sub(h.at), Duration: time.Since(start), Closed: true, Err: err})
	}
	if err != nil {
		if errors.Is(err, ErrUnavailable) {
			l.requestLost(r.RequestID, start, err)
		}
		return nil, err
	}
	if res == reentrant.StillHeld {
		l.count = max(l.count-1, 1)
	} else {
		l.count = 0
	}
	return note, nil
}

// endClosed ends generation g (nil: none) for Close, holding the turn,
// if it is still l's: its Helds ended already.
func (l *hold) endClosed(g *gen) {
	if g != nil && l.g.Load() == g {
		l.endGen(g)
	}
}

// ---- The fair lock's place in its queue (fairPlace).

// joinFair counts a request of a fair acquisition that asks to join the
// queue, holding the turn: from now on it may be queued, and a pending
// leave of the field is moot (its place is kept).
func (l *hold) joinFair(fw *fairWait) {
	if l.fair == nil {
		l.fair = &fairPlace{}
	}
	if !fw.queued {
		if l.fair.queued == 0 && !l.fair.leave {
			// The field's place is new: its timeout in Redis will be
			// set with this wait, which every request of the field then
			// sends (a grant lowers the others' timeouts by it, a leave
			// the ones behind), whatever wait a later goroutine of the
			// owner asked for.
			l.fair.wait = fw.wait
		}
		fw.queued = true
		l.fair.queued++
	}
	l.fair.leave = false
}

// leaving reports whether the field must still leave a fair queue; the
// caller holds the turn.
func (l *hold) leaving() bool { return l.fair != nil && l.fair.leave }

// leftFair uncounts a fair acquisition that left the queue (acquired: the
// script took it out), holding the turn.
func (l *hold) leftFair(fw *fairWait) {
	if fw != nil && fw.queued {
		fw.queued = false
		l.fair.queued--
		fw.others = l.fair.queued > 0
	}
}

// leaveFair takes a fair acquisition that ends without the lock out of
// the queue: when it was the field's last queued acquisition, after any
// request of the field that may still run is settled (or it could queue
// the field again), the field leaves the queue, and holds nobody has (a
// grant whose answer was lost) are released. It waits at most two command
// timeouts, and no longer than the caller's ctx and a TryLock's last
// moment (until, when not zero) allow: what it could not finish then, a
// settler finishes in the background (R3-8: a fair Lock whose ctx ended
// while the master did not answer returned two command timeouts late). It
// reports whether other acquisitions of the field still wait (or may: the
// turn could not be had), which one of them should be woken for.
func (l *hold) leaveFair(ctx context.Context, fw *fairWait, until time.Time) (others bool) {
	if !fw.queued {
		return fw.others // granted (then given back), or never queued
	}
	closing := l.e.closed()
	if closing || ctx.Err() != nil || (!until.IsZero() && !time.Now().Before(until)) {
		return l.leaveFairLater(fw, closing)
	}
	tctx, cancel := context.WithTimeout(ctx, 2*l.e.cfg.CommandTimeout)
	defer cancel()
	if err := l.take(tctx, nil, nil); err != nil {
		l.finishLater(fw)
		return true
	}
	defer l.give()
	if l.leftLast(fw) {
		return true
	}
	// Within the caller's ctx: each send ends with it (stops.caller).
	if l.settle(tctx, stops{caller: true}) != nil {
		l.finishLater(nil)
		return false
	}
	l.releaseStrays(tctx, stops{caller: true})
	if l.leaveNow(tctx, stops{caller: true}) != nil {
		l.finishLater(nil)
	}
	return false
}

// leftLast uncounts fw, holding the turn, and, when it was the field's
// last queued acquisition, records the field's leave as pending; it
// reports whether others of the field are still queued.
func (l *hold) leftLast(fw *fairWait) (others bool) {
	l.leftFair(fw)
	if l.fair.queued > 0 {
		return true
	}
	l.setLeave(true)
	return false
}

// leaveFairLater is leaveFair when the caller's time is up or the Client
// is closing: nothing is sent now. The acquisition is uncounted and the
// field's leave recorded as pending, which a settler sends, or Close
// (closeHold) when it is closing; when the turn is busy, all of it is
// the settler's.
func (l *hold) leaveFairLater(fw *fairWait, closing bool) (others bool) {
	if !l.tryTake() {
		l.finishLater(fw)
		return true
	}
	defer l.give()
	if l.leftLast(fw) {
		return true
	}
	if !closing {
		l.finishLater(nil)
	}
	return false
}

// leaveNow sends the field's pending leave, holding the turn, once no
// request of it may still run and none of its acquisitions is queued.
func (l *hold) leaveNow(ctx context.Context, st stops) error {
	if !l.leaving() || l.fair.queued > 0 || l.unsettled != nil {
		return nil
	}
	lv := reentrant.LeaveFair{Name: l.name, Field: l.field, Wait: l.fair.wait, Publish: l.e.publish}
	err := l.e.retry(ctx, l.name, "leave fair queue", st, func(actx context.Context) error {
		_, err := lv.Run(actx, l.e.rc)
		return err
	})
	if err != nil && !errors.Is(err, ErrUnavailable) {
		// Refused (the script is not the field's to run, an ACL): no
		// retry would change that; the waiter is pruned at its timeout.
		err = nil
	}
	if err == nil {
		l.setLeave(false)
	}
	return err
}

// setLeave records (or clears) l's pending leave; the caller holds the
// turn. Like an unsettled request, it keeps the hold.
func (l *hold) setLeave(leave bool) {
	l.fair.leave = leave
	l.setKeep()
}

// ---- A Held's release (Held.Unlock and Client.unlock call them).

// takeForUnlock takes l's turn for a release of h, waiting until ctx
// ends, the Client closes or h ends; it reports whether it took it, and
// otherwise Unlock's error (nil when h ended plainly meanwhile). The
// hold's context (and its channel) is made only when the turn is busy and
// its end must be able to stop the wait.
func (l *hold) takeForUnlock(ctx context.Context, h *Held) (bool, error) {
	if l.tryTake() {
		return true, nil
	}
	err := l.take(ctx, l.e.done, h.ending())
	if errors.Is(err, errLostWhileWaiting) {
		if done, _ := h.ended(); !done {
			// Given up by a concurrent Unlock meanwhile (giveUp), not
			// ended: wait for its outcome as any second Unlock does.
			err = l.take(ctx, l.e.done, h.ending())
		}
	}
	if err == nil {
		return true, nil
	}
	if done, herr := h.ended(); done {
		return false, herr
	}
	if errors.Is(err, ErrClosed) {
		return false, ErrClosed // Close releases it
	}
	return false, wrapf(err, "unlock of %q not sent: another operation of its owner is in flight", l.name)
}

// unconfirmed handles a release of h that got no answer (err), holding
// the turn, and returns Unlock's error. A refusal by the server changed
// nothing. Otherwise the release may still run: it is recorded for the
// settler, which finds out what it did and completes it; meanwhile the
// hold is not renewed if it was the last. Its context ends now (giveUp),
// with the returned error as its cause; the Held itself ends when the
// settler is done: plainly, or with a LostError if the lock was lost first
// (or its lease is judged run out before an answer).
func (l *hold) unconfirmed(h *Held, u *request, err error) error {
	if !errors.Is(err, ErrUnavailable) {
		return err
	}
	l.releaseLost(u.id, u.release, u.sent, err)
	defer l.settleLater()
	if done, herr := h.ended(); done {
		return join(herr, ErrUnavailable)
	}
	if g := l.current(); l.count <= 1 && g != nil {
		if h.renew {
			h.renew = false
			l.renewing--
		}
		l.e.wd.SetRenew(g.entry, l.renewing > 0)
	}
	err = wrapf(err, "unlock of %q unconfirmed (it is completed in the background; the hold's context has ended)", l.name)
	h.giveUp(err)
	return err
}

// partialLease is the lease a partial release of h sends: leaseAfter,
// and at least what the watchdog believes the hold's key has left. A
// read lock's release sets the remaining holds' timeout keys, and so the
// hash, to it: it must not cut them below the deadline by which the
// watchdog would judge a loss, or another owner could be granted while a
// Held of this one is live. (A plain release never shortens the key.)
func (l *hold) partialLease(h *Held) time.Duration {
	g := l.current()
	lease := l.leaseAfter(h)
	if g != nil {
		if left := time.Until(l.e.wd.Deadline(g.entry)); left > lease {
			lease = left.Truncate(time.Millisecond) + time.Millisecond
		}
	}
	return lease
}

// leaseAfter is the lease a partial release of h sets (never shortening
// the key's expiry): the longest among the other live holds. Holding
// the turn.
func (l *hold) leaseAfter(h *Held) time.Duration {
	lease := time.Duration(0)
	for _, o := range l.helds {
		if o != h {
			lease = max(lease, o.lease)
		}
	}
	if lease == 0 {
		lease = l.e.cfg.WatchdogTimeout
	}
	return lease
}

// releaseAnswered applies a release's answer for h, holding the turn.
func (l *hold) releaseAnswered(ctx context.Context, h *Held, res reentrant.ReleaseResult) {
	switch res {
	case reentrant.StillHeld:
		l.count = max(l.count-1, 1) // a hold remains in Redis, known or not
		if l.endHeld(h, nil) == 0 && l.count > 0 {
			rctx, cancel := l.e.releaseCtx(ctx, l.name)
			l.releaseStrays(rctx, stops{caller: true})
			cancel()
		}
	case reentrant.Released:
		l.count = 0
		l.e.kick(l.p.queueKey(l.name))
		if l.endHeld(h, nil) > 0 {
			l.loseAll(observe.LossNotHeld, "Redis released the lock while this owner had other holds of it")
		}
	default:
		l.count = 0
		l.loseAll(observe.LossNotHeld, "release found the lock no longer held")
	}
}

// endHeld ends h with cause and returns how many live holds remain; the
// last one ends the generation, and the watchdog's tracking with it.
// Holding the turn.
func (l *hold) endHeld(h *Held, cause error) int {
	g := l.current()
	if g == nil {
		h.finish(cause) // lost (its generation ended it) or never live
		return 0
	}
	before := len(l.helds)
	l.helds = without(l.helds, h)
	if len(l.helds) < before && h.renew {
		l.renewing--
	}
	n := len(l.helds)
	h.finish(cause)
	if n == 0 {
		l.endGen(g)
	} else {
		l.e.wd.SetRenew(g.entry, l.renewing > 0)
	}
	return n
}

// ---- The request a release of this hold's kind sends.

// newRelease is a release of one of l's holds, by the protocol of l's
// last acquisition; the caller holds l's turn.
func (l *hold) newRelease(lease time.Duration) reentrant.Release {
	return reentrant.Release{Name: l.name, Field: l.field, Lease: lease,
		RequestID: reentrant.NewRequestID(), Publish: l.p.publish(l.e.publish), LatchTTL: l.e.recordTTL(), Mode: l.p.mode}
}

// ---- An acquisition's steps (Mutex.attempt and request call them).

// live reports whether l's owner holds the lock, as far as this Client
// knows; holding the turn.
func (l *hold) live() bool { return l.current() != nil }

// before orders what must precede an acquire of l's field, holding the
// turn: an earlier request's fate, for as long as one command may take
// (an outage is the caller's to ride out, not this attempt's); and, for a
// new acquisition (no live Held), every renewal of the field the watchdog
// gave up on, within ctx: landing after this acquire, it would stretch
// its lease (R3-6).
func (l *hold) before(ctx context.Context) error {
	if l.unsettled != nil { // (no timer for the common case)
		sctx, cancel := context.WithTimeout(ctx, 2*l.e.cfg.CommandTimeout)
		err := l.settle(sctx, stops{a: l.e.done, caller: true})
		cancel()
		if err != nil {
			return err
		}
	}
	if !l.e.wd.Straying() || l.live() {
		return nil
	}
	if err := l.e.wd.Quiet(ctx, l.name, l.field); err != nil {
		return masterErr(l.e.at(l.name), "acquire", fmt.Errorf("%w: a renewal of this owner's earlier hold is still unanswered: %w", ErrUnavailable, err))
	}
	return nil
}

// dropOtherKind resolves, holding the turn, what l's field left as another
// kind of lock before it is acquired as a new kind: its unsettled request
// is settled, and its strays (holds nobody has) are released, with their
// own kind's scripts, since the new kind's would count them as its own.
// The field keeps its kind while anything is left: that is an error.
func (l *hold) retire(ctx context.Context) error {
	if l.unsettled == nil && l.count == 0 {
		return nil
	}
	sctx, cancel := context.WithTimeout(ctx, 2*l.e.cfg.CommandTimeout+l.e.syncExtra())
	defer cancel()
	if err := l.settle(sctx, stops{a: l.e.done, caller: true}); err != nil {
		l.settleLater()
		return err
	}
	l.releaseStrays(sctx, stops{caller: true})
	if l.unsettled != nil || l.count > 0 {
		return masterErr(l.e.at(l.name), "acquire", fmt.Errorf("%w: holds this owner took as a %s lock are still in Redis and could not be released yet", ErrUnavailable, l.p.mode))
	}
	return nil
}

// fence settles an acquire answered after it was sent more than once,
// holding the turn: a copy given up on may still be in the network, and
// would otherwise run later as a request of its own (after a release: a
// hold nobody knows of, keeping everyone out for a lease). Settled, such a
// copy finds its record and changes nothing. A lost answer leaves it to a
// settler, before any later request of the field.
func (l *hold) fence(ctx context.Context, id string, sent time.Time) {
	l.requestLost(id, sent, nil)
	sctx, cancel := context.WithTimeout(ctx, 2*l.e.cfg.CommandTimeout)
	err := l.settle(sctx, stops{a: l.e.done, caller: true})
	cancel()
	if err != nil && l.unsettled != nil {
		l.settleLater()
	}
}

// unwanted gives back the hold an acquire just added when its caller
// asked for no more (ctx ended, the Client closing) or its answer came
// too late to be used, before anyone else can act on this field. It
// returns the call's error, or nil when a late answer is to be tried
// again.
func (l *hold) unwanted(ctx context.Context, keep time.Duration) error {
	gerr := l.giveBack(ctx, keep)
	switch {
	case l.e.closed():
		return join(ErrClosed, gerr)
	case ctx.Err() != nil:
		// A give-back cut by the same ctx (or never sent) is a
		// settler's, not the caller's error; a refusal (ErrAuth) is.
		if errors.Is(gerr, ErrUnavailable) {
			gerr = nil
		}
		return join(ErrNotAcquired, context.Cause(ctx), gerr)
	case gerr != nil:
		return join(ErrNotAcquired, gerr)
	}
	return nil
}

// known is the count an acquire tells the script the field has, holding
// the turn. With no live Held, holds Redis still counts (an acquire that
// ran after its caller gave up, settled since) belong to nobody: one is
// adopted by this acquisition — told the script as "one less", which it
// answers as this request's own hold, without adding one — and more are
// releaseAnswered first. So the count stays that of the live Helds. A fenced
// acquisition adopts nothing (it must take a token of its own): it
// releases every stray first.
func (l *hold) known(ctx context.Context, fenced bool) int {
	if l.count == 0 || l.live() {
		return l.count
	}
	if l.count > 1 || fenced {
		rctx, cancel := l.e.releaseCtx(ctx, l.name)
		l.releaseStrays(rctx, stops{caller: true})
		cancel()
		if l.count != 1 || l.unsettled != nil || fenced {
			return l.count
		}
	}
	return l.count - 1
}

// born makes the Held of an acquisition, holding the turn, and has the
// watchdog track it: a new generation (and entry) for a first hold, the
// same one for a re-entry. It returns nil once Close has begun: the grant
// is then the caller's to give back. A Held is either among those Close
// ends (its generation's) or never born.
func (l *hold) born(ctx context.Context, c *Client, owner uint64, o options, lease time.Duration, sent time.Time, res reentrant.AcquireResult) *Held {
	if l.e.closed() {
		return nil
	}
	held := &Held{c: c, l: l, ctx: ctx, owner: owner, at: sent, fence: res.Token,
		reentry: res.Count > 1, renew: o.lease == 0, lease: lease}
	g := l.current()
	l.helds = append(l.helds, held)
	if held.renew {
		l.renewing++
	}
	renew := l.renewing > 0
	if g == nil {
		g = l.newGen(held, reentrant.Hold{Name: l.name, Field: l.field, Read: o.p.shared()}, lease, renew, sent)
	} else {
		l.e.wd.Extend(g.entry, lease, sent)
		l.e.wd.SetRenew(g.entry, renew)
	}
	held.g = g
	if l.e.ending.Load() || !g.live() {
		// Close ended the generations since the check above (its ctx
		// ended while this call held the turn), or is about to: never
		// born. (Close sets ending, then reads every hold's generation;
		// born stores the generation, then reads ending: one of them
		// sees the other.) Or a loss was judged since current.
		l.endHeld(held, ErrClosed)
		return nil
	}
	return held
}

// giveBack releases the hold an acquire just added, holding the turn: a
// Lock whose ctx ended (or whose Client closed) while its request was in
// flight. A lost answer leaves the release unsettled, for a settler.
// An earlier copy of the acquire that may still run (its fence was not
// answered) is settled first, as before any later request of the field:
// releaseAnswered before that, the copy could run afterwards and take a hold, or
// (a fair lock) queue the field, that nobody has. When it cannot be
// settled now, the grant is left to the settler, which settles and then
// releases it as a hold nobody has. keep, when not zero, is the fair wait
// of a grant tried again at once: a fair lock's field then heads its
// queue again instead of waking the next waiter (reentrant.Release's
// KeepPlace; other kinds' scripts have no queue to keep).
func (l *hold) giveBack(ctx context.Context, keep time.Duration) error {
	if l.unsettled != nil {
		sctx, cancel := context.WithTimeout(ctx, 2*l.e.cfg.CommandTimeout)
		err := l.settle(sctx, stops{a: l.e.done, caller: true})
		cancel()
		if err != nil {
			l.settleLater()
			return err
		}
	}
	r := l.newRelease(l.e.cfg.WatchdogTimeout)
	r.KeepPlace = keep
	sent := time.Now()
	// Within the caller's ctx, which may have ended already: a release
	// it cuts (or never lets out) is recorded as unsettled, and the
	// settler settles it and releases the grant as a hold nobody has.
	rctx, cancel := l.e.releaseCtx(ctx, l.name)
	defer cancel()
	res, _, err := l.e.sendRelease(rctx, r, stops{caller: true})
	if err != nil {
		if errors.Is(err, ErrUnavailable) {
			l.requestLost(r.RequestID, sent, err)
			l.settleLater()
		}
		return err
	}
	if res == reentrant.StillHeld {
		l.count = max(l.count-1, 1)
	} else {
		l.count = 0
	}
	return nil
}
