package faultsuite

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/multilock"
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
	// ok is, per worker and master, when the master last confirmed a
	// lease: an acquire's reply or the start of a tick that renewed. A
	// worker holds one lock at a time, so it is that lock's.
	ok map[[2]int]time.Time
}

func (s *eventSink) confirmed(worker, m int, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ok == nil {
		s.ok = map[[2]int]time.Time{}
	}
	s.ok[[2]int{worker, m}] = at
}

// leaseEnd is when the lease confirmed last on worker's master m must
// have run out (later than in truth: the confirmation was sent before).
func (s *eventSink) leaseEnd(worker, m int) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.ok[[2]int{worker, m}]
	return t.Add(watchdogLease), ok
}

func (s *eventSink) add(worker int, format string, args ...any) {
	if e := s.cur.Load(); e != nil {
		e.add(worker, format, args...)
	}
}

type ownerKey struct{}

// observer logs one worker's lock events on master m.
func (s *eventSink) observer(worker, m int) *lock.Observer {
	owner := func(ctx context.Context) any {
		if o, ok := ctx.Value(ownerKey{}).(uint64); ok {
			return o
		}
		return "?"
	}
	return &lock.Observer{
		AcquireStart: func(ctx context.Context, e lock.AcquireStart) context.Context {
			return context.WithValue(ctx, ownerKey{}, e.Owner)
		},
		AcquireEnd: func(ctx context.Context, e lock.AcquireEnd) {
			if e.Acquired {
				s.confirmed(worker, m, time.Now())
				s.add(worker, "m%d acquire owner %v: granted, reentrant %v, fence %d, %d attempts, %v", m, owner(ctx), e.Reentrant, e.Fence, e.Attempts, e.Duration.Round(time.Millisecond))
			} else {
				s.add(worker, "m%d acquire owner %v: %v after %v", m, owner(ctx), short(e.Err), e.Duration.Round(time.Millisecond))
			}
		},
		Release: func(_ context.Context, e lock.Release) {
			s.add(worker, "m%d release owner %d: freed %v, %v: %v", m, e.Owner, e.Released, e.Duration.Round(time.Millisecond), short(e.Err))
		},
		Loss: func(_ context.Context, e lock.Loss) {
			late := ""
			if end, ok := s.leaseEnd(worker, m); ok && e.Err != nil && strings.HasPrefix(e.Err.Reason, "lease ran out") {
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
		Renew: func(e lock.Renew) {
			if e.Renewed > 0 {
				s.confirmed(worker, m, time.Now().Add(-e.Duration))
			}
			if e.Lost > 0 || e.Failed > 0 {
				s.add(worker, "m%d renew: renewed %d, failed %d, lost %d: %v", m, e.Renewed, e.Failed, e.Lost, short(e.Err))
			}
		},
	}
}

// roundObserver logs a worker's RedLock rounds.
func (s *eventSink) roundObserver(worker int) *multilock.Observer {
	return &multilock.Observer{
		Round: func(_ context.Context, e multilock.Round) {
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
