package watchdog

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// Config configures a Registry.
type Config struct {
	// Lease is the lease every renewal sets. Required.
	Lease time.Duration
	// Interval is the time between ticks. Required; less than Lease.
	Interval time.Duration
	// OnTick, when set, is called after every tick that had work, from
	// the loop's goroutine.
	OnTick func(Tick)
}

// Tick reports one tick.
type Tick struct {
	Start      time.Time
	Duration   time.Duration
	Commands   int   // renew commands sent, all in one round trip
	Renewed    int   // holds the server extended
	Lost       int   // holds declared lost on this tick
	Failed     int   // holds whose renewal failed but whose lease may still run
	Err        error // the first renewal error, if any
	RoundTrips int   // 1 when anything was sent (2 after a NOSCRIPT), else 0
}

// Kinds of loss, for LossError.Kind.
const (
	// NotHeld: Redis says the field no longer holds the lock (the key
	// expired, was deleted, or another holder has it).
	NotHeld = "not_held"
	// LeaseExpired: an explicit lease (no renewal) ran out.
	LeaseExpired = "lease_expired"
	// RenewFailed: renewals failed until the lease must have run out.
	RenewFailed = "renew_failed"
)

// LossError says why a lock was lost.
type LossError struct {
	Name   string
	Kind   string // NotHeld, LeaseExpired, RenewFailed, or the kind given to Lose
	Reason string
	Err    error // the renewal error behind a lease that ran out, if any
}

func (e *LossError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Name, e.Reason, e.Err)
	}
	return e.Name + ": " + e.Reason
}

func (e *LossError) Unwrap() error { return e.Err }

// Entry is one lock held by one holder field, tracked by a Registry.
type Entry struct {
	name, field string
	onLost      func(*LossError)

	// guarded by Registry.mu
	renew    bool
	lease    time.Duration
	deadline time.Time // when the lease must have run out, monotonic
	lastErr  error
	busy     int // releases in flight: the entry is neither renewed nor declared lost
	gone     bool
}

// Registry holds the entries of one Redis master.
type Registry struct {
	c   rueidis.Client
	cfg Config

	mu       sync.Mutex
	entries  map[entryKey]*Entry
	inflight map[*Entry]bool // entries of the tick being sent
	tickDone chan struct{}   // closed when the tick in flight ends
	nudge    chan struct{}   // tells Run an explicit lease was tracked
}

// New returns an empty Registry for the master behind c.
func New(c rueidis.Client, cfg Config) (*Registry, error) {
	if cfg.Lease <= 0 || cfg.Interval <= 0 || cfg.Interval >= cfg.Lease {
		return nil, fmt.Errorf("rlock: watchdog: interval %v must be positive and less than lease %v", cfg.Interval, cfg.Lease)
	}
	return &Registry{c: c, cfg: cfg, entries: map[entryKey]*Entry{}, nudge: make(chan struct{}, 1)}, nil
}

// entryKey identifies a lock held by one field. A struct of the two strings,
// not their concatenation: a map key that allocates nothing.
type entryKey struct{ name, field string }

func key(name, field string) entryKey { return entryKey{name, field} }

// Track starts tracking a lock that was acquired by a request sent at
// sent, with the given lease. With renew, the watchdog renews it each
// tick with the Registry's lease; without, it is declared lost when the
// lease ends. Tracking a (name, field) that is tracked already updates the
// entry (a re-entry) and returns it: one entry per lock whatever its hold
// count. onLost is called at most once, from the loop's goroutine.
func (r *Registry) Track(name, field string, lease time.Duration, renew bool, sent time.Time, onLost func(*LossError)) *Entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := key(name, field)
	e := r.entries[k]
	if e == nil {
		e = &Entry{name: name, field: field, onLost: onLost}
		r.entries[k] = e
	}
	e.renew = e.renew || renew
	e.lease = lease
	if d := sent.Add(lease); d.After(e.deadline) {
		e.deadline = d
	}
	if !e.renew {
		select {
		case r.nudge <- struct{}{}:
		default:
		}
	}
	return e
}

// Begin marks e busy while its holder releases it: ticks neither renew
// it nor declare it lost. When a tick carrying e is in flight, Begin
// waits for it to end (bounded by ctx), so no renewal of e reaches the
// server after the release that follows. Every Begin needs an End.
func (r *Registry) Begin(ctx context.Context, e *Entry) error {
	r.mu.Lock()
	e.busy++
	for r.inflight[e] {
		done := r.tickDone
		r.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			r.End(e)
			return ctx.Err()
		}
		r.mu.Lock()
	}
	r.mu.Unlock()
	return nil
}

// End undoes Begin.
func (r *Registry) End(e *Entry) {
	r.mu.Lock()
	e.busy--
	r.mu.Unlock()
}

// Remove stops tracking e. It reports false when e was already gone (lost
// or removed).
func (r *Registry) Remove(e *Entry) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.removeLocked(e)
}

func (r *Registry) removeLocked(e *Entry) bool {
	if e.gone {
		return false
	}
	e.gone = true
	if r.entries[key(e.name, e.field)] == e {
		delete(r.entries, key(e.name, e.field))
	}
	return true
}

// Lose declares e lost now with the given kind and reason, as a tick
// would. It reports false when e was already gone.
func (r *Registry) Lose(e *Entry, kind, reason string) bool {
	r.mu.Lock()
	ok := r.removeLocked(e)
	r.mu.Unlock()
	if ok && e.onLost != nil {
		e.onLost(&LossError{Name: e.name, Kind: kind, Reason: reason})
	}
	return ok
}

// Len returns how many locks are tracked.
func (r *Registry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.entries)
}

// Run ticks every Interval until ctx ends. Between ticks it also wakes
// when an explicit lease ends, so that its loss is reported at once rather
// than at the next tick. One timer, whatever the number of locks.
func (r *Registry) Run(ctx context.Context) {
	t := time.NewTimer(r.cfg.Interval)
	defer t.Stop()
	next := time.Now().Add(r.cfg.Interval)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.nudge:
		}
		now := time.Now()
		failing := r.failingDeadline()
		if !now.Before(next) || (!failing.IsZero() && !now.Before(failing)) {
			r.Tick(ctx)
			next = time.Now().Add(r.cfg.Interval)
			failing = r.failingDeadline()
		}
		wake := next
		if lease := r.expireLeases(time.Now()); !lease.IsZero() && lease.Before(wake) {
			wake = lease
		}
		// A lock whose renewals fail is judged again when its lease must
		// have run out, not at the next tick: its loss is reported then.
		if !failing.IsZero() && failing.Before(wake) {
			wake = failing
		}
		t.Reset(time.Until(wake))
	}
}

// failingDeadline returns the earliest lease end among renewed entries
// whose last renewal failed (zero if none).
func (r *Registry) failingDeadline() (d time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.entries {
		if e.renew && e.lastErr != nil && e.busy == 0 && (d.IsZero() || e.deadline.Before(d)) {
			d = e.deadline
		}
	}
	return d
}

// expireLeases declares lost the explicit leases that ended by now, and
// returns the earliest end among those still running (zero if none).
func (r *Registry) expireLeases(now time.Time) (next time.Time) {
	var expired []*Entry
	r.mu.Lock()
	for _, e := range r.entries {
		if e.renew || e.busy > 0 {
			continue
		}
		if !now.Before(e.deadline) {
			expired = append(expired, e)
		} else if next.IsZero() || e.deadline.Before(next) {
			next = e.deadline
		}
	}
	for _, e := range expired {
		r.removeLocked(e)
	}
	r.mu.Unlock()
	for _, e := range expired {
		if e.onLost != nil {
			e.onLost(leaseEnded(e))
		}
	}
	if len(expired) > 0 && r.cfg.OnTick != nil {
		r.cfg.OnTick(Tick{Start: now, Lost: len(expired)})
	}
	return next
}

func leaseEnded(e *Entry) *LossError {
	return &LossError{Name: e.name, Kind: LeaseExpired, Reason: "lease of " + e.lease.String() + " ran out"}
}
