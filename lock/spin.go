package lock

import (
	"math/rand/v2"
	"time"

	"github.com/rlock-go/rlock/observe"
)

// SpinBackoff is how a spin lock's waiter spaces its attempts, as
// Redisson's LockOptions.ExponentialBackOff does: the first sleep is
// Initial, and each next one is the previous times Multiplier plus a
// random jitter of up to one millisecond per attempt already failed,
// capped at Max. The zero SpinBackoff is Redisson's default (1 ms, 128 ms,
// 2). Multiplier 1 and Initial equal to Max is Redisson's ConstantBackOff
// (64 ms by default there): ConstantSpin(d).
type SpinBackoff struct {
	Initial    time.Duration // default 1 ms
	Max        time.Duration // default 128 ms
	Multiplier int           // default 2
}

// ConstantSpin is the SpinBackoff of Redisson's ConstantBackOff: every
// sleep is d.
func ConstantSpin(d time.Duration) SpinBackoff {
	return SpinBackoff{Initial: d, Max: d, Multiplier: 1}
}

// withDefaults fills b's zero fields with Redisson's defaults, or says
// what is wrong with it.
func (b SpinBackoff) withDefaults() (SpinBackoff, error) {
	if b.Initial < 0 || b.Max < 0 || b.Multiplier < 0 {
		return b, invalidf("SpinBackoff %+v: negative values", b)
	}
	if b.Initial == 0 {
		b.Initial = time.Millisecond
	}
	if b.Max == 0 {
		b.Max = max(128*time.Millisecond, b.Initial)
	}
	if b.Multiplier == 0 {
		b.Multiplier = 2
	}
	if b.Max < b.Initial {
		return b, invalidf("SpinBackoff %+v: Max is less than Initial", b)
	}
	if b.Max > time.Hour {
		return b, invalidf("SpinBackoff %+v: Max over an hour", b)
	}
	return b, nil
}

// spinPolicy is one waiter's sequence of sleeps (Redisson's
// ExponentialBackOffPolicy).
type spinPolicy struct {
	b     SpinBackoff
	next  time.Duration
	fails int
}

func newSpinPolicy(b SpinBackoff) *spinPolicy { return &spinPolicy{b: b, next: b.Initial} }

// sleep returns the next sleep.
func (p *spinPolicy) sleep() time.Duration {
	d := p.next
	if d == p.b.Max {
		return d
	}
	p.fails++
	if d > p.b.Max/time.Duration(p.b.Multiplier) {
		p.next = p.b.Max // the product would pass Max (or overflow)
		return d
	}
	p.next = d*time.Duration(p.b.Multiplier) + time.Duration(rand.IntN(p.fails))*time.Millisecond
	p.next = min(p.next, p.b.Max)
	return d
}

// SpinMutex returns the lock called name as Redisson's spin lock
// (redisson.getSpinLock(name, backOff)): the same key, fields and scripts
// as Mutex(name), so the two exclude each other, but its release publishes
// no unlock message and its waiters subscribe to nothing: they try again
// after each sleep of b. It costs one request per sleep per waiting
// process (this Client's waiters for the name queue behind one), and
// saves the pub/sub fan-out of a lock with many waiting processes.
// Waiters of the plain kind on the same name (Mutex in another process,
// a Java service's getLock) are not woken by its releases: they wait for
// the holder's lease to run out. Use one kind per name everywhere: within
// one Client, waiters of both kinds share the name's queue, and an owner
// that took both kinds publishes by the kind it acquired last.
// A bad b is reported by every method, as ErrInvalid.
func (c *Client) SpinMutex(name string, b SpinBackoff) *Mutex {
	m := c.Mutex(name)
	if m.err != nil {
		return m
	}
	b, err := b.withDefaults()
	if err != nil {
		m.err = err
		return m
	}
	m.spin, m.p = &b, spinProtocol
	return m
}

// poll sleeps a spin lock's waiter before its next attempt: the policy's
// next sleep, at most the time left, ended early by a release of this
// Client (the queue's kick).
func (a *acquisition) poll(q *queue, p *spinPolicy, ttl time.Duration) error {
	left, err := a.left(ttl)
	if err != nil {
		return err
	}
	a.waiting(ttl, nil, 0)
	slept, _, err := a.m.sleep(a.octx, a.ctx, nil, q.kick, min(p.sleep(), left), observe.WakePoll)
	a.end.Waited += slept
	return err
}

// NonReentrantMutex returns the lock called name as Redisson's
// non-reentrant lock (redisson.getNonReentrantLock(name), Redisson 4.4
// and later): the plain lock's key, field, count (always 1) and release,
// but an owner that holds it may not acquire it again: Lock and TryLock
// with a context carrying such an owner return ErrReentered (joined with
// ErrNotAcquired) at once, without waiting, and the hold is unchanged. It
// excludes Mutex(name) and Redisson's getLock and getNonReentrantLock of
// the same name.
func (c *Client) NonReentrantMutex(name string) *Mutex {
	m := c.Mutex(name)
	m.p = nonReentrantProtocol
	return m
}
