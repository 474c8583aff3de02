package multilock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/rlock-go/rlock/internal/line"
	"github.com/rlock-go/rlock/internal/lockcore"
	"github.com/rlock-go/rlock/internal/oneline"
	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/observe"
)

// The kinds of Lock, as errors and events name them.
const (
	kindRedLock   = "RedLock"
	kindMultiLock = "MultiLock"
)

// core is what multilock uses of package lock beyond lock's API
// (internal/lockcore).
var core = lockcore.Get[*lock.Mutex, *lock.Client, lock.Option]()

// ErrQuorum is returned (in a *QuorumError) when too few masters granted
// the lock in time; it comes with lock.ErrNotAcquired.
var ErrQuorum = errors.New("rlock: quorum not reached")

// Lock is one lock over several independent Redis masters, made of one
// lock.Mutex per master: a cheap description, safe for concurrent use.
// All state of an acquisition lives in its Held.
type Lock struct {
	ms            []*lock.Mutex
	addrs         []string
	quorum        int
	kind          string
	watchdogLease time.Duration               // the shortest WatchdogTimeout of the masters
	sleeper       func() func() time.Duration // the first member's that must poll (lockcore.Mutex.Sleeper), or nil
	err           error                       // bad input, reported by every method

	// The masters in canonical order (queue.go): key names the local
	// queue, canon[i] is the canonical position of ms[i], cms and caddrs
	// are ms and addrs in that order.
	key    string
	canon  []int
	cms    []*lock.Mutex
	caddrs []string
	shared bool // every member is a read half: readers of this process share

	// Fencing groups (fence.go): a RedLock's masters are one group, whose
	// counters are raised to one token; a MultiLock's Mutexes form one
	// group per lock name. group[i] is ms[i]'s.
	groups [][]int
	group  []int
	// parts is what errors call the members: "masters" when each is on a
	// master of its own, "locks" when some share one (names of one Client).
	parts string

	// bg counts the per-master calls that outlived the round that started
	// them: an attempt whose answer came after the round decided (a grant
	// is given back), a release that took longer than the round waited.
	// Each is bounded (by its Client's CommandTimeout, or by the lease)
	// and undoes what it did.
	bg sync.WaitGroup
}

// NewRedLock returns the Redlock algorithm over the masters of ms: the
// lock is held once a majority, len(ms)/2+1, granted it within its
// validity. Each Mutex must come from its own lock.Client, on its own
// independent master (not a replica of another); the names may differ.
// Bad input (no Mutex, a nil one, a bad name, two on one Client or one
// address: the algorithm's safety rests on independent masters) is
// reported as lock.ErrInvalid by every method. Addresses are compared as
// the Clients give them (Client.Addr): one master under two spellings
// (localhost and 127.0.0.1) is not recognised.
func NewRedLock(ms ...*lock.Mutex) *Lock {
	return newLock(kindRedLock, len(ms)/2+1, ms)
}

// NewMultiLock returns a lock held only when every Mutex of ms granted it,
// all or nothing (Redisson's RedissonMultiLock): one master down makes it
// unavailable. The Mutexes may be several names of one Client, as
// Redisson's getMultiLock(a, b, c) (on a Cluster Client, their masters
// are the names' slots' owners), Mutexes of other Clients, or both, of any
// kinds. Bad input (no Mutex, a nil one, a bad name, a name given twice on
// one Client or one address, a read and a write half of one name among
// them) is reported as lock.ErrInvalid by every method.
func NewMultiLock(ms ...*lock.Mutex) *Lock {
	return newLock(kindMultiLock, len(ms), ms)
}

func newLock(kind string, quorum int, ms []*lock.Mutex) *Lock {
	l := &Lock{ms: append([]*lock.Mutex(nil), ms...), quorum: quorum, kind: kind}
	if len(ms) == 0 {
		l.err = invalidf("%s of no mutexes", kind)
		return l
	}
	l.addrs = make([]string, len(ms))
	for i, m := range ms {
		c := m.Client()
		if c == nil {
			l.err = invalidf("%s: mutex %d is nil or has no Client", kind, i)
			return l
		}
		d := core.Describe(m)
		if err := d.Err; err != nil {
			l.err = oneline.Wrapf(err, "%s: mutex %d", kind, i)
			return l
		}
		l.addrs[i] = c.Addr()
		if l.sleeper == nil {
			l.sleeper = d.Sleeper
		}
		if wd := d.WatchdogTimeout; l.watchdogLease == 0 || wd < l.watchdogLease {
			l.watchdogLease = wd
		}
	}
	if l.err = l.distinct(); l.err != nil {
		return l
	}
	l.keyOf()
	l.groupNames()
	return l
}

// distinct checks that no two members are one lock, and sets what errors
// call the members (parts). A RedLock's members are on independent
// masters: never two on one Client or one address. A MultiLock's may share
// a Client (Redisson's getMultiLock over names of one client) or an
// address, but not a name there: one owner cannot hold a name twice under
// two holders, and a read and a write half of one name exclude each other.
func (l *Lock) distinct() error {
	l.parts = "masters"
	for i, m := range l.ms {
		for j, o := range l.ms[:i] {
			sameMaster := m.Client() == o.Client() || l.addrs[i] == l.addrs[j]
			if sameMaster {
				l.parts = "locks"
			}
			switch {
			case l.kind == kindRedLock && sameMaster:
				return invalidf("RedLock needs independent masters, one Mutex each: mutexes %d and %d are both on %s "+
					"(for several names of one Client, use NewMultiLock)", j, i, l.addrs[i])
			case sameMaster && m.Name() == o.Name():
				return invalidf("%s: lock name %q given twice on %s (mutexes %d and %d)", l.kind, m.Name(), l.addrs[i], j, i)
			}
		}
	}
	return nil
}

// names returns the lock's distinct names, comma-separated.
func (l *Lock) names() string {
	var ns []string
	for _, m := range l.ms {
		if !slices.Contains(ns, m.Name()) {
			ns = append(ns, m.Name())
		}
	}
	return strings.Join(ns, ",")
}

// Quorum returns how many masters must grant the lock.
func (l *Lock) Quorum() int {
	if l == nil {
		return 0
	}
	return l.quorum
}

// Masters returns how many masters the lock spans: how many Mutexes it
// was made of (a MultiLock may have several names on one master).
func (l *Lock) Masters() int {
	if l == nil {
		return 0
	}
	return len(l.ms)
}

// Lock acquires the lock, retrying until it is acquired or ctx ends. A ctx
// carrying an owner that holds the lock (a Held's Context) re-enters it on
// every master. Without the Lease option each master's watchdog renews it
// until Unlock. Cut by ctx, it returns then: the grants of the round it
// cut are given back in the background.
//
// May return ErrQuorum (a *QuorumError, also matching ErrNotAcquired, joined
// with ctx's error), ErrClosed (too many masters' Clients closed),
// ErrInvalid.
func (l *Lock) Lock(ctx context.Context, opts ...lock.Option) (*Held, error) {
	return l.acquire(ctx, true, opts)
}

// TryLock makes one round of attempts, or retries for up to the Wait
// option's duration. It returns once the round in flight when the Wait
// runs out has decided (at most the per-master timeout; with Fenced, its
// fence raises at most one more) and, when it failed, its grants are
// given back (at most the per-master timeout more, so that a call right
// after finds them free; slower give-backs finish in the background), or
// when ctx ends.
//
// May return ErrQuorum (a *QuorumError, also matching ErrNotAcquired),
// ErrClosed, ErrInvalid.
func (l *Lock) TryLock(ctx context.Context, opts ...lock.Option) (*Held, error) {
	return l.acquire(ctx, false, opts)
}

// heldBy reports whether ctx's owner holds this lock on some master.
func (l *Lock) heldBy(ctx context.Context) bool {
	owner, ok := lock.OwnerFrom(ctx)
	if !ok {
		return false
	}
	for _, m := range l.ms {
		if core.HeldBy(m, owner) {
			return true
		}
	}
	return false
}

func (l *Lock) check(ctx context.Context) error {
	if ctx == nil {
		return invalidf("nil context")
	}
	if l == nil || (l.err == nil && len(l.ms) == 0) {
		return invalidf("nil or zero Lock: make Locks with NewRedLock or NewMultiLock")
	}
	return l.err
}

// acquire runs rounds until one acquires, the wait or ctx ends, or too
// many masters failed for good. A call that may wait queues behind this
// process's other waiters for the lock and runs rounds only as the head
// (queue.go); between rounds it sleeps on the masters' unlock channels
// (wait.go).
func (l *Lock) acquire(ctx context.Context, blocking bool, opts []lock.Option) (held *Held, err error) {
	if err := l.check(ctx); err != nil {
		return nil, err
	}
	o, err := l.options(blocking, opts)
	if err != nil {
		return nil, err
	}
	// A call that does not re-enter takes a fresh owner for every round
	// (the same owner on every master of that round): a release of an
	// earlier round's grant that is still in flight on a slow master must
	// not land on a later round's grant there as if it were the same hold.
	// It re-enters only when its owner holds this lock on some master,
	// not merely because its ctx carries an owner.
	a := &acquirer{l: l, o: o, reenter: l.heldBy(ctx), ctx: ctx, base: ctx, out: outcome{ttl: -1}, spin: l.spinSleeper()}
	a.c = newCall(l, o)
	if !blocking {
		a.deadline = time.Now().Add(o.wait)
	}
	if !blocking && o.wait > 0 { // without a wait, one round decides: nothing waits for expired
		t := time.NewTimer(o.wait)
		defer t.Stop()
		a.expired = t.C
	}
	// A re-entry, and a TryLock that does not wait, do not queue.
	if !a.reenter && (blocking || o.wait > 0) {
		a.e, a.mb = l.join()
		defer a.e.leave(a.mb)
	}
	defer func() {
		if a.e == nil {
			a.ws.close()
		}
	}()
	if a.e != nil {
		a.kick = a.e.kick
	}
	return a.run()
}

// acquirer is the state of one acquire call between its rounds.
type acquirer struct {
	l       *Lock
	o       *options
	c       *call
	reenter bool
	base    context.Context // the caller's ctx
	ctx     context.Context // base, with the current round's owner unless the call re-enters

	deadline time.Time        // TryLock's: the end of its wait
	expired  <-chan time.Time // fires at deadline

	e  *entry       // the local queue, unless the call does not queue
	mb *line.Member // the call's place in it

	ws     *watches // the queue's subscription, or the call's own
	out    outcome  // the last failed round's
	rounds int
	kick   <-chan struct{}
	bo     *backoff.ExponentialBackOff // after a round the quorum was in reach of
	split  *backoff.ExponentialBackOff // after rounds that collided with other contenders
	woken  observe.WakeReason          // what ended the last sleep
	spin   func() time.Duration        // a spin lock member's next poll, nil without one
}

// run is acquire's loop: the call's turn in the queue, a round, and the
// subscription or the sleep before the next one.
func (a *acquirer) run() (*Held, error) {
	for {
		if err := a.turn(); err != nil {
			return a.fail(err)
		}
		if h := a.try(); h != nil {
			return h, nil
		}
		left, over, cause := a.settle()
		if over {
			return a.fail(cause)
		}
		if a.ws == nil {
			a.subscribe(left)
			continue
		}
		if err := a.wait(left); err != nil {
			return a.fail(err)
		}
	}
}

// fail returns the error of a call that gives up, for cause (nil when
// the rounds alone decided).
func (a *acquirer) fail(cause error) (*Held, error) {
	if cause == nil || errors.Is(cause, errWaitOver) {
		return nil, a.out.quorumError(a.l, a.rounds)
	}
	return nil, errors.Join(a.out.quorumError(a.l, a.rounds), cause)
}

// turn waits, when the call queues, until it heads the queue and no
// acquisition of this process holds the lock.
func (a *acquirer) turn() error {
	if a.e == nil {
		return nil
	}
	start := time.Now()
	waited, err := a.e.turn(a.ctx, a.mb, a.expired)
	if err != nil {
		return err
	}
	if waited {
		a.woken = observe.WakeRelease
		if a.o.obs != nil && a.o.obs.WakeUp != nil {
			a.o.obs.WakeUp(a.ctx, observe.WakeUp{Reason: observe.WakeRelease, Slept: time.Since(start)})
		}
	}
	if a.ws == nil {
		a.ws = a.e.current()
	}
	select { // a local release before this round: the round sees it
	case <-a.kick:
	default:
	}
	return nil
}

// try runs one round, and returns its Held when it acquired.
func (a *acquirer) try() *Held {
	if !a.reenter {
		a.ctx = lock.WithOwner(a.base)
	}
	a.ws.drain() // this round sees what those messages announced
	a.rounds++
	h, r := a.c.round(a.ctx, a.rounds)
	if h != nil {
		a.l.hold(h)
		return h
	}
	a.out = r
	return nil
}

// settle decides, after a failed round, whether the call gives up (over,
// for cause); otherwise it returns how long the call may still wait.
func (a *acquirer) settle() (left time.Duration, over bool, cause error) {
	if a.ctx.Err() != nil {
		return 0, true, a.ctx.Err()
	}
	if a.out.permanent > len(a.l.ms)-a.l.quorum {
		return 0, true, nil // closed Clients or bad names: retrying cannot help
	}
	left = time.Duration(1<<63 - 1)
	if !a.deadline.IsZero() {
		if left = time.Until(a.deadline); left <= 0 {
			return 0, true, nil
		}
	}
	return left, false, nil
}

// subscribe opens the call's subscription, or the queue's, after its
// first failed round.
func (a *acquirer) subscribe(left time.Duration) {
	// Subscribe before the next round, so that a release between
	// that round and the sleep after it still wakes us.
	if a.e != nil {
		a.ws = a.e.subscription(a.ctx, a.l, min(left, a.o.perMaster))
	} else {
		a.ws = a.l.watch(a.ctx, min(left, a.o.perMaster))
	}
	a.woken = ""
}

// wait sleeps between two rounds, for at most left, and after rounds that
// collided waits a random delay more.
func (a *acquirer) wait(left time.Duration) error {
	// Rounds that collided: woken by releases, this call still got
	// some masters but not the quorum. Another contender won, or (a
	// split vote) nobody did; the next wake-up then waits a random,
	// growing delay first, so that contenders woken together do not
	// collide again.
	collided := a.out.busy(a.l) && a.out.granted > 0 && a.woken == observe.WakeMessage
	if !collided {
		a.split = nil
	}
	var err error
	a.woken, err = a.ws.sleep(a.ctx, a.o, a.plan(left))
	if err != nil {
		return err
	}
	if collided && a.woken == observe.WakeMessage {
		if a.split == nil {
			a.split = newBackOff()
		}
		return pause(a.ctx, a.split.NextBackOff(), a.expired)
	}
	return nil
}

// plan returns the sleep after the last failed round, at most left.
func (a *acquirer) plan(left time.Duration) sleep {
	l, out := a.l, a.out
	var s sleep
	if out.busy(l) {
		// Holders of other owners keep the quorum out of reach: only
		// the release of enough of those masters, or the end of their
		// leases, can change that. Other masters' messages (other
		// contenders' rounds giving back what they took) are not
		// listened to.
		s.listen = l.canonical(out.refusers)
		s.need = max(out.refused-(len(l.ms)-l.quorum), 1)
		s.d, s.reason = a.ws.leasesEnd(l, out, s.need), observe.WakeTimeout
		if a.spin != nil {
			// Spin lock members publish nothing on release: poll.
			if d := a.spin(); d < s.d {
				s.d, s.reason = d, observe.WakePoll
			}
		}
	} else {
		if a.bo == nil {
			a.bo = newBackOff()
		}
		s.d, s.reason = a.bo.NextBackOff(), observe.WakeDelay
	}
	if s.d >= left {
		s.d, s.reason = left, observe.WakeDelay
	}
	s.kick = a.kick
	return s
}

// newBackOff returns the random growing delay between rounds that did not
// fail for holders alone: exponential from minRetryDelay to
// maxRetryDelay, ±50%.
func newBackOff() *backoff.ExponentialBackOff {
	return backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(minRetryDelay),
		backoff.WithMaxInterval(maxRetryDelay),
		backoff.WithRandomizationFactor(0.5),
		backoff.WithMultiplier(2),
		backoff.WithMaxElapsedTime(0))
}

// pause waits d, or until ctx ends or expired fires (errWaitOver).
func pause(ctx context.Context, d time.Duration, expired <-chan time.Time) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-expired:
		return errWaitOver
	}
}

// canonical maps masters' indices in l.ms to their canonical positions.
func (l *Lock) canonical(is []int) []int {
	out := make([]int, len(is))
	for k, i := range is {
		out[k] = l.canon[i]
	}
	return out
}

// QuorumError is returned by Lock and TryLock when too few masters
// granted the lock within its validity before the wait or the context
// ended. It matches ErrQuorum and lock.ErrNotAcquired, and each
// master's error of the last round (lock.ErrUnavailable, lock.ErrClosed,
// ...).
type QuorumError struct {
	Kind     string        // RedLock or MultiLock
	Name     string        // the lock name; a MultiLock's names, comma-separated, when it has several
	Masters  int           // masters the lock spans (its Mutexes: a MultiLock may have several on one master)
	Needed   int           // the quorum
	Granted  int           // masters (Mutexes) that granted in the last round
	Rounds   int           // rounds tried
	Validity time.Duration // the last round's validity, when it had the quorum but not the time
	Errs     []error       // why the other masters did not grant, each a *lock.MasterError naming its master

	parts string // what the message calls the Mutexes: "masters", or "locks" when some share one
}

func (e *QuorumError) Error() string {
	parts := e.parts
	if parts == "" {
		parts = "masters"
	}
	s := fmt.Sprintf("rlock: %s %q: quorum not reached: %d of %d %s granted, %d needed, after %d rounds",
		e.Kind, e.Name, e.Granted, e.Masters, parts, e.Needed, e.Rounds)
	if e.Granted >= e.Needed && e.Validity <= 0 {
		s += fmt.Sprintf("; validity %v left, not positive", e.Validity)
	}
	for _, err := range e.Errs {
		s += "; " + err.Error()
	}
	return oneline.Tidy(s)
}

// Unwrap returns ErrQuorum, ErrNotAcquired and the masters' errors.
func (e *QuorumError) Unwrap() []error {
	return append([]error{ErrQuorum, lock.ErrNotAcquired}, e.Errs...)
}

// onMaster wraps err in a *lock.MasterError naming the i-th master,
// unless it already names it.
func (l *Lock) onMaster(i int, op string, err error) error {
	if me, ok := errors.AsType[*lock.MasterError](err); ok && me.Addr == l.addrs[i] {
		return err
	}
	if le, ok := errors.AsType[*lock.LostError](err); ok && le.Addr == l.addrs[i] {
		return err
	}
	return &lock.MasterError{Addr: l.addrs[i], Op: op, Err: err}
}

// spinSleeper returns a new sequence of poll sleeps when some master's
// Mutex is one no release wakes (a spin or fair lock), nil otherwise.
func (l *Lock) spinSleeper() func() time.Duration {
	if l.sleeper == nil {
		return nil
	}
	return l.sleeper()
}
