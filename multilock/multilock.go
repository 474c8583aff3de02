package multilock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/cenkalti/backoff/v4"
	"github.com/rlock-go/rlock/lock"
)

// Lock is one lock over several independent Redis masters, made of one
// lock.Mutex per master: a cheap description, safe for concurrent use.
// All state of an acquisition lives in its Held.
type Lock struct {
	ms            []*lock.Mutex
	addrs         []string
	quorum        int
	kind          string
	watchdogLease time.Duration // the shortest WatchdogTimeout of the masters
	err           error         // bad input, reported by every method

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
// Bad input (no Mutex, a nil one, a bad name, two on one Client) is
// reported as lock.ErrInvalid by every method.
func NewRedLock(ms ...*lock.Mutex) *Lock {
	return newLock("RedLock", len(ms)/2+1, ms)
}

// NewMultiLock returns a lock held only when every master of ms granted
// it (Redisson's RedissonMultiLock): one master down makes it
// unavailable. The input rules are NewRedLock's.
func NewMultiLock(ms ...*lock.Mutex) *Lock {
	return newLock("MultiLock", len(ms), ms)
}

func newLock(kind string, quorum int, ms []*lock.Mutex) *Lock {
	l := &Lock{ms: append([]*lock.Mutex(nil), ms...), quorum: quorum, kind: kind}
	if len(ms) == 0 {
		l.err = invalidf("%s of no mutexes", kind)
		return l
	}
	seen := make(map[*lock.Client]int, len(ms))
	l.addrs = make([]string, len(ms))
	for i, m := range ms {
		c := m.Client()
		if c == nil {
			l.err = invalidf("%s: mutex %d is nil or has no Client", kind, i)
			return l
		}
		if n := m.Name(); n == "" || len(n) > lock.MaxNameLen || !utf8.ValidString(n) {
			l.err = invalidf("%s: mutex %d has a bad name %.40q", kind, i, n)
			return l
		}
		if j, dup := seen[c]; dup {
			l.err = invalidf("%s: mutexes %d and %d are on the same Client (%s): one Client per master", kind, j, i, c.Addr())
			return l
		}
		seen[c] = i
		l.addrs[i] = c.Addr()
		if wd := c.WatchdogTimeout(); l.watchdogLease == 0 || wd < l.watchdogLease {
			l.watchdogLease = wd
		}
	}
	return l
}

// Quorum returns how many masters must grant the lock.
func (l *Lock) Quorum() int { return l.quorum }

// Masters returns how many masters the lock spans.
func (l *Lock) Masters() int { return len(l.ms) }

// Lock acquires the lock, retrying until it is acquired or ctx ends. A ctx
// carrying an owner that holds the lock (a Held's Context) re-enters it on
// every master. Without the Lease option each master's watchdog renews it
// until Unlock.
//
// May return ErrQuorum (a *QuorumError, also matching ErrNotAcquired, joined
// with ctx's error), ErrClosed (too many masters' Clients closed),
// ErrInvalid.
func (l *Lock) Lock(ctx context.Context, opts ...Option) (*Held, error) {
	return l.acquire(ctx, true, opts)
}

// TryLock makes one round of attempts, or retries for up to the Wait
// option's duration.
//
// May return ErrQuorum (a *QuorumError, also matching ErrNotAcquired),
// ErrClosed, ErrInvalid.
func (l *Lock) TryLock(ctx context.Context, opts ...Option) (*Held, error) {
	return l.acquire(ctx, false, opts)
}

func (l *Lock) check(ctx context.Context) error {
	if ctx == nil {
		return invalidf("nil context")
	}
	if l == nil {
		return invalidf("nil Lock")
	}
	return l.err
}

// acquire runs rounds until one acquires, the wait or ctx ends, or too
// many masters failed for good. Between rounds it sleeps on every
// master's unlock channel at once.
func (l *Lock) acquire(ctx context.Context, blocking bool, opts []Option) (*Held, error) {
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
	_, reenter := lock.OwnerFrom(ctx)
	base := ctx
	c := newCall(l, o)
	var deadline time.Time
	if !blocking {
		deadline = time.Now().Add(o.wait)
	}
	var (
		ws *watches
		bo *backoff.ExponentialBackOff
	)
	defer func() { ws.close() }()
	for attempt := 1; ; attempt++ {
		if !reenter {
			ctx = lock.WithOwner(base)
		}
		h, out := c.round(ctx, attempt)
		if h != nil {
			return h, nil
		}
		qerr := out.quorumError(l, attempt)
		if ctx.Err() != nil {
			return nil, errors.Join(qerr, ctx.Err())
		}
		if out.permanent > len(l.ms)-l.quorum {
			return nil, qerr // closed Clients or bad names: retrying cannot help
		}
		left := time.Duration(1<<63 - 1)
		if !deadline.IsZero() {
			if left = time.Until(deadline); left <= 0 {
				return nil, qerr
			}
		}
		if ws == nil {
			// Subscribe before the next round, so that a release between
			// that round and the sleep after it still wakes us.
			ws = l.watch(ctx, min(left, o.perMaster))
			continue
		}
		ws.drain(out.released) // the messages of our own releases must not end the sleep
		var d time.Duration
		reason := WakeDelay
		if out.busy(l) && out.ttl > 0 {
			d, reason = out.ttl, lock.WakeTimeout // held by another: sleep until released
		} else {
			if bo == nil {
				bo = backoff.NewExponentialBackOff(
					backoff.WithInitialInterval(minRetryDelay),
					backoff.WithMaxInterval(maxRetryDelay),
					backoff.WithRandomizationFactor(0.5),
					backoff.WithMultiplier(2),
					backoff.WithMaxElapsedTime(0))
			}
			d = bo.NextBackOff()
		}
		if d >= left {
			d, reason = left, WakeDelay
		}
		// The masters that must be released before the quorum is in
		// reach: the refusals beyond the N − quorum the lock can spare.
		need := max(out.refused-(len(l.ms)-l.quorum), 1)
		if err := ws.sleep(ctx, o, d, reason, need); err != nil {
			return nil, errors.Join(qerr, err)
		}
	}
}

// QuorumError is returned by Lock and TryLock when too few masters
// granted the lock within its validity before the wait or the context
// ended. It matches lock.ErrQuorum and lock.ErrNotAcquired, and each
// master's error of the last round (lock.ErrUnavailable, lock.ErrClosed,
// ...).
type QuorumError struct {
	Kind     string        // RedLock or MultiLock
	Name     string        // the first master's lock name
	Masters  int           // masters the lock spans
	Needed   int           // the quorum
	Granted  int           // masters that granted in the last round
	Rounds   int           // rounds tried
	Validity time.Duration // the last round's validity, when it had the quorum but not the time
	Errs     []error       // why the other masters did not grant, each a *lock.MasterError naming its master
}

func (e *QuorumError) Error() string {
	s := fmt.Sprintf("rlock: %s %q: quorum not reached: %d of %d masters granted, %d needed, after %d rounds",
		e.Kind, e.Name, e.Granted, e.Masters, e.Needed, e.Rounds)
	if e.Granted >= e.Needed && e.Validity <= 0 {
		s += fmt.Sprintf("; validity %v left, not positive", e.Validity)
	}
	for _, err := range e.Errs {
		s += "; " + err.Error()
	}
	return s
}

// Unwrap returns ErrQuorum, ErrNotAcquired and the masters' errors.
func (e *QuorumError) Unwrap() []error {
	return append([]error{lock.ErrQuorum, lock.ErrNotAcquired}, e.Errs...)
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
