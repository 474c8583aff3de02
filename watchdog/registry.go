package watchdog

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"github.com/rlock-go/rlock/observe"
	"github.com/rlock-go/rlock/reentrant"
)

// Config configures a Registry.
type Config struct {
	// Lease is the lease every renewal sets. Required.
	Lease time.Duration
	// Interval is the time between ticks. Required; less than Lease.
	Interval time.Duration
	// RoundTrip is the part of the safety margin that stands for one round
	// trip: a lease is judged lost at its end minus Margin(lease). Default
	// DefaultRoundTrip.
	RoundTrip time.Duration
	// OnTick, when set, is called after every tick that had work, from
	// the loop's goroutine.
	OnTick func(Tick)
	// Sync, when set, tells which replicas must acknowledge a renewal of
	// the lock name before it counts (replica sync): master names the
	// master the name lives on, s the WAIT to send after its renewals.
	// A renewal no replica acknowledged did not extend the lease: what a
	// failover would keep is the lease the replicas last saw. Sync is
	// called before each tick's round trip and must answer from what it
	// knows, without waiting on the network: a tick late by a question
	// would judge a last renewal late.
	Sync func(ctx context.Context, name string) (master string, s reentrant.Sync)
	// Acked, when set, is told each WAIT's answer (-1: none known).
	Acked func(name string, s reentrant.Sync, acked int)
	// Apart sends each tick's round trip on a connection of its own
	// (reentrant.DoMultiApart) instead of the client's shared one. Set it
	// only for a client whose pool of dedicated connections nothing else
	// can use up: rueidis waits for one of them without a bound.
	Apart bool
	// Straggle is how long after its send a renewal round trip is
	// waited for at most: the tick gives up on it earlier when its own
	// deadline comes first (the judgement of a lease it renews, or
	// Interval), and it is then waited for in the background: until its
	// answer comes, Quiet holds back a new acquisition of each field it
	// renews (a renewal that lands after the field's release and its
	// next acquisition would stretch that acquisition's lease: safety
	// review 3, R3-6). Past Straggle the round trip is judged lost. It
	// also bounds how long a goroutine of the Registry outlives the end
	// of Run's ctx (rueidis may not see a cancellation, only a
	// deadline); a round trip with a WAIT (Sync) may last as long as the
	// WAIT needs, when that is longer. Default: Lease.
	Straggle time.Duration
}

// DefaultRoundTrip is Config.RoundTrip's default.
const DefaultRoundTrip = 20 * time.Millisecond

// margin is Registry.Margin for this Config.
func (c Config) margin(lease time.Duration) time.Duration {
	return lease/100 + 2*time.Millisecond + c.RoundTrip
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
	RoundTrips int   // round trips sent: 1, more after a NOSCRIPT or a broken connection
}

// LossError says why a lock was lost.
type LossError struct {
	Name   string
	Kind   observe.LossKind // LossNotHeld, LossLeaseExpired, LossRenewFailed, or the kind given to Lose
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
	onLost      func(*Entry, *LossError)

	// guarded by Registry.mu
	lease    time.Duration // the lease of the request that set deadline
	deadline mono          // when the lease must have run out
	judge    mono          // deadline minus the margin: when it is declared lost
	lastErr  error
	busy     int32 // releases in flight: not renewed, still judged
	renew    bool
	gone     bool
	read     bool // a read hold of a read-write lock (reentrant.Hold.Read); set once, by TrackHold
}

// mono is a time as the monotonic nanoseconds since its Registry's
// epoch: an Entry holds two, 8 bytes each where a time.Time takes 24, and
// thousands of entries live as long as their locks.
type mono int64

// noTime is the mono of an entry whose lease was never set.
const noTime = mono(math.MinInt64)

func (r *Registry) mono(t time.Time) mono { return mono(t.Sub(r.epoch)) }

func (r *Registry) time(m mono) time.Time { return r.epoch.Add(time.Duration(m)) }

// Registry holds the entries of one Redis master.
type Registry struct {
	c     rueidis.Client
	cfg   Config
	epoch time.Time // of the entries' mono times

	mu       sync.Mutex
	entries  map[*Entry]struct{}
	inflight map[*Entry]bool // entries of the tick being sent
	tickDone chan struct{}   // closed when the tick in flight ends
	nudge    chan struct{}   // tells Run that a judgement time moved earlier
	wakeAt   time.Time       // when Run's timer fires; zero while Run decides (or before it runs)

	strays sync.WaitGroup // round trips given up on at their deadline, still unanswered (see roundTrip)
	// straying are those strays by the (name, field) they renew, for
	// Quiet; guarded by mu. nstrays counts them, for Quiet's fast path.
	straying map[field][]*stray
	nstrays  atomic.Int64
	// leaving are the fields whose entry was removed (released, lost)
	// while the tick in flight carried its renewal, for Quiet: that
	// renewal is still on the wire until the tick ends. Guarded by mu;
	// cleared by endTick; nleaving is its size, for Quiet's fast path.
	leaving  map[field]chan struct{}
	nleaving atomic.Int64
}

// field is a lock name and a holder field.
type field struct{ name, field string }

// stray is a renewal round trip given up on at its tick's deadline and
// still waited for (send). Guarded by Registry.mu but for fin.
type stray struct {
	fields []field
	fin    chan struct{} // closed when it ended: answered, or judged lost at its Straggle
	ended  bool          // it ended before it was given up on
	listed bool          // in Registry.straying
}

// New returns an empty Registry for the master behind c.
func New(c rueidis.Client, cfg Config) (*Registry, error) {
	if cfg.Lease <= 0 || cfg.Interval <= 0 || cfg.Interval >= cfg.Lease {
		return nil, fmt.Errorf("rlock: watchdog: interval %v must be positive and less than lease %v", cfg.Interval, cfg.Lease)
	}
	if cfg.RoundTrip == 0 {
		cfg.RoundTrip = DefaultRoundTrip
	}
	if cfg.Straggle <= 0 {
		cfg.Straggle = cfg.Lease
	}
	return &Registry{c: c, cfg: cfg, epoch: time.Now(), entries: map[*Entry]struct{}{}, nudge: make(chan struct{}, 1),
		straying: map[field][]*stray{}}, nil
}

// Track starts tracking a lock that was acquired by a request sent at
// sent, with the given lease. With renew, the watchdog renews it each
// tick with the Registry's lease; without, it is declared lost when the
// lease ends. onLost is called at most once, from the loop's goroutine
// (or Lose's caller). The caller owns the entry: one per held lock.
func (r *Registry) Track(name, field string, lease time.Duration, renew bool, sent time.Time, onLost func(*Entry, *LossError)) *Entry {
	return r.TrackHold(reentrant.Hold{Name: name, Field: field}, lease, renew, sent, onLost)
}

// TrackHold is Track of a hold of any kind: a read hold of a read-write
// lock (h.Read) is renewed with the read renewal, in the same round trip
// as the others.
func (r *Registry) TrackHold(h reentrant.Hold, lease time.Duration, renew bool, sent time.Time, onLost func(*Entry, *LossError)) *Entry {
	e := &Entry{name: h.Name, field: h.Field, read: h.Read, onLost: onLost, renew: renew, deadline: noTime, judge: noTime}
	r.mu.Lock()
	r.entries[e] = struct{}{}
	r.extendLocked(e, lease, sent)
	early := r.earlierLocked(e)
	r.mu.Unlock()
	if early {
		r.wake()
	}
	return e
}

// Extend records another request that set e's lease (a re-entry, a
// partial release) sent at sent: the lease runs until at least
// sent+lease. It never moves the end earlier: rlock's scripts never
// shorten a key's expiry.
func (r *Registry) Extend(e *Entry, lease time.Duration, sent time.Time) {
	r.mu.Lock()
	r.extendLocked(e, lease, sent)
	r.mu.Unlock()
}

func (r *Registry) extendLocked(e *Entry, lease time.Duration, sent time.Time) {
	if d := r.mono(sent.Add(lease)); d > e.deadline {
		e.deadline, e.lease = d, lease
		e.judge = d - mono(r.cfg.margin(lease))
	}
}

// Deadline returns when e's lease runs out as far as the watchdog knows
// (the latest send of a renewal or acquisition that was answered, plus
// its lease).
func (r *Registry) Deadline(e *Entry) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.time(e.deadline)
}

// SetRenew turns renewal of e on or off: on while some hold of the lock
// was taken without an explicit lease.
func (r *Registry) SetRenew(e *Entry, renew bool) {
	r.mu.Lock()
	e.renew = renew
	early := r.earlierLocked(e)
	r.mu.Unlock()
	if early {
		r.wake()
	}
}

// earlierLocked reports whether e's judgement time comes before Run's
// timer: only then must Run be woken to look again. A wake-up for every
// new lock would cost each Lock a goroutine switch.
func (r *Registry) earlierLocked(e *Entry) bool {
	return r.wakeAt.IsZero() || e.judge < r.mono(r.wakeAt)
}

func (r *Registry) wake() {
	select {
	case r.nudge <- struct{}{}:
	default:
	}
}

// Begin marks e busy while its holder releases its last hold: ticks do
// not renew it (a renewal landing after the release would read as a
// loss), but it is still judged: if its lease must have run out before
// End, it is declared lost. When a tick carrying e is in flight, Begin
// waits for it to end (bounded by ctx), so no renewal of that tick
// reaches the server after the release that follows. A round trip an
// earlier tick gave up on may still land after it, and finds no field;
// Quiet orders the field's next acquisition after it. Every Begin needs
// an End.
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

// Quiet waits until no renewal of the holder field f of the lock called
// name is still on the wire, or ctx ends (its error): one a tick gave up
// on and still waits for, or one of the tick in flight whose entry was
// removed meanwhile (a loss found by another request). Call it before a
// new acquisition of the field goes out, with no entry of the field
// tracked: such a renewal, landing after it, would set the Registry's
// lease on a hold taken with a shorter one (R3-6). A round trip given up
// on is waited for until Config.Straggle after its send at most; past
// it, it is judged lost, and Quiet no longer waits for it. A renewal that
// lands after a release of the field finds no field and changes nothing:
// only a new acquisition needs Quiet. The spin model's QUIET
// (docs/model/hold.pml).
func (r *Registry) Quiet(ctx context.Context, name, f string) error {
	if !r.Straying() {
		return nil
	}
	k := field{name, f}
	r.mu.Lock()
	waits := make([]<-chan struct{}, 0, len(r.straying[k])+1)
	for _, s := range r.straying[k] {
		waits = append(waits, s.fin)
	}
	if done, ok := r.leaving[k]; ok {
		waits = append(waits, done)
	}
	r.mu.Unlock()
	for _, w := range waits {
		select {
		case <-w:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Straying reports whether some renewal whose entry is gone may still be
// on the wire (Quiet may wait).
func (r *Registry) Straying() bool { return r.nstrays.Load() > 0 || r.nleaving.Load() > 0 }

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
	if e == nil || e.gone {
		return false
	}
	e.gone = true
	delete(r.entries, e)
	if r.inflight[e] {
		if r.leaving == nil {
			r.leaving = map[field]chan struct{}{}
		}
		r.leaving[field{e.name, e.field}] = r.tickDone
		r.nleaving.Store(int64(len(r.leaving)))
	}
	return true
}

// Lose declares e lost now with the given kind and reason, as a tick
// would. It reports false when e was already gone.
func (r *Registry) Lose(e *Entry, kind observe.LossKind, reason string) bool {
	r.mu.Lock()
	ok := r.removeLocked(e)
	r.mu.Unlock()
	if ok && e.onLost != nil {
		e.onLost(e, &LossError{Name: e.name, Kind: kind, Reason: reason})
	}
	return ok
}

// Margin is how long before a lease's end, as measured from the send time
// of the request that set it, the lease is judged lost: the clock drift
// allowed between client and server (1% of the lease plus 2ms, as in
// Redlock) plus one round trip (Config.RoundTrip). Another client can be
// granted the lock only after the lease ran out on the server, so a loss
// judged Margin early is signalled before that.
func (r *Registry) Margin(lease time.Duration) time.Duration { return r.cfg.margin(lease) }

// Len returns how many locks are tracked.
func (r *Registry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.entries)
}

// Run ticks every Interval until ctx ends. Between ticks it wakes at the
// earliest judgement time of any entry, so that a lease that must have
// run out is reported then, not at the next tick. One timer, whatever the
// number of locks.
func (r *Registry) Run(ctx context.Context) {
	t := time.NewTimer(r.cfg.Interval)
	defer t.Stop()
	defer r.strays.Wait()
	next := time.Now().Add(r.cfg.Interval)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.nudge:
		}
		r.setWakeAt(time.Time{}) // deciding: every new entry nudges
		now := time.Now()
		if !now.Before(next) || r.renewalDue(now) {
			// A renewal that comes late still proves, when it answers 1,
			// that the hold never lapsed: nobody else could take the key
			// while our field was in it. So a lease near its end gets a
			// last renewal (bounded by one RoundTrip) before it is judged.
			r.Tick(ctx)
			if !now.Before(next) {
				next = time.Now().Add(r.cfg.Interval)
			}
		}
		wake := next
		if j, _ := r.judgeDue(time.Now(), true); !j.IsZero() && j.Before(wake) {
			wake = j
		}
		r.setWakeAt(wake)
		t.Reset(time.Until(wake))
	}
}

func (r *Registry) setWakeAt(t time.Time) {
	r.mu.Lock()
	r.wakeAt = t
	r.mu.Unlock()
}

// renewalDue reports whether a renewed entry reached its judgement time.
func (r *Registry) renewalDue(now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.mono(now)
	for e := range r.entries {
		if e.renew && e.busy == 0 && m >= e.judge {
			return true
		}
	}
	return false
}

// judgeDue declares lost every entry that is not being renewed (an
// explicit lease, a release in flight) whose judgement time has come, and
// returns the earliest judgement time among all other entries (zero if
// none) and how many it declared lost; with report, OnTick hears of them.
// Renewed entries are judged by their renewals' answers (Tick).
func (r *Registry) judgeDue(now time.Time, report bool) (next time.Time, n int) {
	var lost []*Entry
	m := r.mono(now)
	var first mono
	found := false
	r.mu.Lock()
	for e := range r.entries {
		if r.inflight[e] {
			continue // its renewal is on the wire: the tick judges it
		}
		if m >= e.judge && (!e.renew || e.busy > 0) {
			lost = append(lost, e)
		} else if !found || e.judge < first {
			first, found = e.judge, true
		}
	}
	if found {
		next = r.time(first)
	}
	// Each loss is worded under r.mu: a release's Begin may still mark the
	// entry busy meanwhile (Close's, beside this judgement).
	why := make([]*LossError, len(lost))
	for i, e := range lost {
		why[i] = ranOut(e)
		r.removeLocked(e)
	}
	r.mu.Unlock()
	for i, e := range lost {
		if e.onLost != nil {
			e.onLost(e, why[i])
		}
	}
	if report && len(lost) > 0 && r.cfg.OnTick != nil {
		r.cfg.OnTick(Tick{Start: now, Lost: len(lost)})
	}
	return next, len(lost)
}

// ranOut is the loss of an entry whose lease must have run out.
func ranOut(e *Entry) *LossError {
	switch {
	case e.busy > 0:
		return &LossError{Name: e.name, Kind: observe.LossRenewFailed, Reason: "lease ran out while its release was unanswered", Err: e.lastErr}
	case !e.renew:
		return &LossError{Name: e.name, Kind: observe.LossLeaseExpired, Reason: "lease of " + e.lease.String() + " ran out"}
	}
	return &LossError{Name: e.name, Kind: observe.LossRenewFailed, Reason: "lease ran out while renewals failed", Err: e.lastErr}
}
