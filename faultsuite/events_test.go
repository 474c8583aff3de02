package faultsuite

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlock-go/rlock/observe"
)

// events is a round's log of what the workers' Clients and RedLocks
// reported through their observers: logged with a failed round, it says
// which master granted, refused, renewed or lost what.
type events struct {
	hist *history

	mu    sync.Mutex
	lines []string
	// lossDelay is the longest a watchdog took, after a lease must have
	// run out while renewals failed, to report the loss.
	lossDelay time.Duration
}

func (e *events) add(worker int, format string, args ...any) {
	line := fmt.Sprintf("%8.1f w%d ", float64(e.hist.now())/float64(time.Millisecond), worker) + fmt.Sprintf(format, args...)
	e.mu.Lock()
	e.lines = append(e.lines, line)
	e.mu.Unlock()
}

func (e *events) String() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return strings.Join(e.lines, "\n")
}

// eventSink is where a worker's observers write: the current round's
// events, swapped at each round.
type eventSink struct {
	cur atomic.Pointer[events]

	mu sync.Mutex
	// holding is each worker's current hold's owner, 0 when it holds
	// nothing or is releasing: only its losses show how fast the watchdog
	// reports one (a release in flight keeps the watchdog from judging).
	holding [nWorkers]uint64
	// ok is, per worker, master and owner, when the master last confirmed
	// a lease: an acquire's reply, or the start of a tick that renewed
	// the worker's current hold.
	ok map[[3]uint64]time.Time
	// unlocked is when a release of that hold last returned: while one
	// is in flight the watchdog does not judge the hold.
	unlocked map[[3]uint64]time.Time
}

func (s *eventSink) add(worker int, format string, args ...any) {
	if e := s.cur.Load(); e != nil {
		e.add(worker, format, args...)
	}
}

// held records that worker holds (owner != 0) or no longer does.
func (s *eventSink) held(worker int, owner uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holding[worker] = owner
}

func (s *eventSink) confirmed(worker, m int, owner uint64, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if owner == 0 {
		owner = s.holding[worker]
	}
	if s.ok == nil {
		s.ok = map[[3]uint64]time.Time{}
	}
	s.ok[[3]uint64{uint64(worker), uint64(m), owner}] = at
}

func (s *eventSink) releaseReturned(worker, m int, owner uint64, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unlocked == nil {
		s.unlocked = map[[3]uint64]time.Time{}
	}
	s.unlocked[[3]uint64{uint64(worker), uint64(m), owner}] = at
}

// judgeable is when the watchdog could know that the lease of the
// worker's current hold, owned by owner, had run out on master m: its
// last confirmation (sent a little before) plus the lease, or the return
// of a release in flight then. ok is false when owner is not the worker's
// current hold.
func (s *eventSink) judgeable(worker, m int, owner uint64) (at time.Time, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if owner == 0 || s.holding[worker] != owner {
		return time.Time{}, false
	}
	k := [3]uint64{uint64(worker), uint64(m), owner}
	t, ok := s.ok[k]
	return later(t.Add(watchdogLease), s.unlocked[k]), ok
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// reset forgets the confirmations of the last round.
func (s *eventSink) reset(e *events) {
	s.mu.Lock()
	s.ok, s.unlocked = nil, nil
	s.holding = [nWorkers]uint64{}
	s.mu.Unlock()
	s.cur.Store(e)
}

type ownerKey struct{}

// observer logs one worker's lock events on master m.
func (s *eventSink) observer(worker, m int) *observe.Observer {
	owner := func(ctx context.Context) uint64 {
		o, _ := ctx.Value(ownerKey{}).(uint64)
		return o
	}
	return &observe.Observer{
		AcquireStart: func(ctx context.Context, e observe.AcquireStart) context.Context {
			return context.WithValue(ctx, ownerKey{}, e.Owner)
		},
		AcquireEnd: func(ctx context.Context, e observe.AcquireEnd) {
			if e.Acquired {
				s.confirmed(worker, m, owner(ctx), time.Now())
				s.add(worker, "m%d acquire owner %v: granted, reentrant %v, fence %d, %d attempts, %v", m, owner(ctx), e.Reentrant, e.Fence, e.Attempts, e.Duration.Round(time.Millisecond))
			} else {
				s.add(worker, "m%d acquire owner %v: %v after %v", m, owner(ctx), short(e.Err), e.Duration.Round(time.Millisecond))
			}
		},
		Release: func(_ context.Context, e observe.Release) {
			s.releaseReturned(worker, m, e.Owner, time.Now())
			s.add(worker, "m%d release owner %d: freed %v, %v: %v", m, e.Owner, e.Released, e.Duration.Round(time.Millisecond), short(e.Err))
		},
		Loss: func(_ context.Context, e observe.Loss) {
			late := ""
			if end, ok := s.judgeable(worker, m, e.Owner); ok && strings.HasPrefix(e.Reason, "lease ran out") {
				d := time.Since(end)
				late = fmt.Sprintf(" (%v after the lease ran out)", d.Round(time.Millisecond))
				if cur := s.cur.Load(); cur != nil {
					cur.mu.Lock()
					cur.lossDelay = max(cur.lossDelay, d)
					cur.mu.Unlock()
				}
			}
			s.add(worker, "m%d LOSS owner %d after %v%s: %v", m, e.Owner, e.HeldFor.Round(time.Millisecond), late, short(e.Err))
		},
		Renew: func(e observe.Renew) {
			if e.Renewed > 0 {
				s.confirmed(worker, m, 0, time.Now().Add(-e.Duration))
			}
			if e.Lost > 0 || e.Failed > 0 {
				s.add(worker, "m%d renew: renewed %d, failed %d, lost %d: %v", m, e.Renewed, e.Failed, e.Lost, short(e.Err))
			}
		},
	}
}

// roundObserver logs a worker's RedLock rounds.
func (s *eventSink) roundObserver(worker int) *observe.Observer {
	return &observe.Observer{
		Round: func(_ context.Context, e observe.Round) {
			s.add(worker, "redlock round %d: granted %d, refused %d, acquired %v, elapsed %v, validity %v", e.Attempt, e.Granted, e.Refused, e.Acquired, e.Elapsed.Round(time.Millisecond), e.Validity.Round(time.Millisecond))
		},
	}
}

// short is an error without the lock name, which every line would repeat.
func short(err error) string {
	if err == nil {
		return "ok"
	}
	s := err.Error()
	if i := strings.Index(s, "faultsuite:"); i >= 0 {
		if j := strings.IndexByte(s[i:], '"'); j >= 0 {
			s = s[:i] + "…" + s[i+j:]
		}
	}
	return s
}
