package lock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// sendCtx is the context of one send of a count-changing request: the
// caller's values, and a deadline, the earlier of the send's own
// (CommandTimeout and the WAIT it carries) and the last moment its
// request may be sent (retryFor's until). A send on a caller's behalf
// (an acquire, an Unlock's release: stops.caller) ends with the caller's
// ctx too, at its deadline or cancellation; any other (a settler's, a
// give-back, Close's) is seen through to its answer or its own deadline,
// whatever bounds the loop around it. It is what
// context.WithDeadline(ctx, d) gives, without the timer on the path
// every Lock and Unlock takes: rueidis bounds a request sent on a
// connection in direct mode by the deadline alone (as the connection's
// I/O deadline) and never asks for Done there; Done's channel, its timer
// and the watch of the caller's ctx are made only when something asks
// (rueidis in pipelining mode, a derived context). A send cut off by the
// caller's ctx is a request whose outcome is unknown: it is recorded as
// unsettled, and settled in the background (issue 29, stage 3: a call
// returns when its ctx ends).
type sendCtx struct {
	parent context.Context // the caller's when the send is on its behalf; else one never done
	values context.Context // the caller's, for its values (Value hides its cancellation)
	dl     time.Time
	caller bool // the send is on the caller's behalf: it ends with parent

	mu      sync.Mutex
	done    chan struct{} // made by the first Done
	timer   *time.Timer   // armed by the first Done, to close done at dl
	unwatch func() bool   // the first Done's watch of parent's end
	err     error         // set once: DeadlineExceeded, parent's error, or Canceled by stop

	// An armed send (bounded.go, Cancellations): under mu, the connection
	// that awaits its reply and whether the send has returned; cutMade,
	// whether that connection was cut for it; stopCut, the watch of the
	// caller's ctx, which only the sending goroutine touches; batch,
	// armed by DoMulti (watched until the send returns, not only until its
	// reply begins), set by the sending goroutine before it arms the send.
	conn     *shakingConn
	disarmed bool
	cutMade  atomic.Bool
	stopCut  func() bool
	batch    bool
}

// watchable reports whether s is a caller's send whose ctx can end
// before s's deadline by a cancellation: one of the context package's
// cancellable ctxs is among its ancestors (asked by the key Cause uses,
// without Done, whose first call makes a channel), or it has a Done.
func (s *sendCtx) watchable() bool {
	if !s.caller {
		return false
	}
	if cancelKey != nil && s.parent.Value(cancelKey) != nil {
		return true
	}
	return s.parent.Done() != nil
}

// watchCut watches the caller's ctx while s is armed.
func (s *sendCtx) watchCut() {
	s.mu.Lock()
	s.conn, s.disarmed = nil, false // armed again (EVAL after EVALSHA's NOSCRIPT)
	s.mu.Unlock()
	s.stopCut = context.AfterFunc(s.parent, s.cutNow)
}

// cutNow is the caller's ctx's end while s is armed: the connection that
// awaits s's reply is cut (or will be, when it names s's deadline:
// attach).
func (s *sendCtx) cutNow() {
	s.mu.Lock()
	c := s.conn
	if s.disarmed {
		c = nil
	}
	s.mu.Unlock()
	if c != nil {
		c.cut(s)
	}
}

// attach records c as the connection that awaits s's reply, unless s
// is not armed or awaits it on another (ok false), and reports whether
// the caller's ctx has already ended (the deadline is then now).
func (s *sendCtx) attach(c *shakingConn) (cut, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.disarmed || (s.conn != nil && s.conn != c) {
		return false, false
	}
	s.conn = c
	return s.parent.Err() != nil, true
}

// unwatchCut ends the watch once s returned, and returns the connection
// s was attached to, if any.
func (s *sendCtx) unwatchCut() *shakingConn {
	s.mu.Lock()
	s.disarmed = true
	c := s.conn
	s.mu.Unlock()
	s.stopCut()
	return c
}

func newSendCtx(ctx context.Context, d time.Duration, until time.Time, caller bool) *sendCtx {
	dl := time.Now().Add(d)
	if !until.IsZero() && until.Before(dl) {
		dl = until
	}
	s := &sendCtx{values: ctx, parent: context.Background(), dl: dl}
	if cancelKey == nil {
		s.values = context.WithoutCancel(ctx) // hides it itself (one more allocation)
	}
	if caller {
		s.parent, s.caller = ctx, true
		if pdl, ok := ctx.Deadline(); ok && !s.dl.Before(pdl) {
			s.dl = pdl
		}
	}
	return s
}

// causeWait is how long cutByCaller waits for a ctx whose deadline has
// passed to be done, for its cause.
const causeWait = 20 * time.Millisecond

// cutByCaller returns what a failed send whose error is err reports when
// the caller's ctx ended before the answer came (cancelled, or its
// deadline passed): an inFlight error; nil otherwise
// (the request's own CommandTimeout or retry horizon ran out, a dial or
// handshake timed out, a connection failed).
func (s *sendCtx) cutByCaller(err error) error {
	if !s.caller || !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		return nil
	}
	if s.parent.Err() == nil {
		if pdl, ok := s.parent.Deadline(); !ok || time.Now().Before(pdl) {
			return nil // the send's own bound ran out, not the caller's
		}
		// The caller's deadline has passed, so its ctx has ended: Done
		// comes when the ctx's timer runs, late by scheduling (1.3–2.8
		// ms under -race on a busy 2-core machine, where a 1 ms wait
		// here then named Redis instead). The wait is for the ctx's
		// cause; past it the call is named by its deadline.
		t := time.NewTimer(causeWait)
		defer t.Stop()
		select {
		case <-s.parent.Done():
		case <-t.C:
			return inFlight{err: context.DeadlineExceeded, cause: context.DeadlineExceeded, note: settledNote}
		}
	}
	return inFlight{err: s.parent.Err(), cause: context.Cause(s.parent), note: settledNote}
}

// Deadline implements context.Context.
func (s *sendCtx) Deadline() (time.Time, bool) { return s.dl, true }

// Value implements context.Context: the caller's values (a trace span,
// the owner), but not its cancellation, as context.WithoutCancel hides it
// (without the allocation WithoutCancel makes on the path every Lock and
// Unlock takes): context.Cause of a send ctx is its own Err.
func (s *sendCtx) Value(key any) any {
	if key == cancelKey && key != nil {
		return nil
	}
	return s.values.Value(key)
}

// cancelKey is the key under which context.Cause looks a ctx's
// cancellation up (the context package's own, unexported), learnt once by
// asking Cause about a probe; nil if Cause asked nothing (newSendCtx then
// uses WithoutCancel).
var cancelKey = func() any {
	ended, cancel := context.WithCancel(context.Background())
	cancel() // Cause asks for the key only of a ctx that has ended
	p := keyProbe{Context: ended}
	_ = context.Cause(&p)
	return p.key
}()

// keyProbe records the key its Value is asked for.
type keyProbe struct {
	context.Context
	key any
}

func (p *keyProbe) Value(key any) any {
	p.key = key
	return nil
}

// Done implements context.Context.
func (s *sendCtx) Done() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done == nil {
		s.done = make(chan struct{})
		s.endedLocked()
		if s.err != nil {
			close(s.done)
		} else {
			s.timer = time.AfterFunc(time.Until(s.dl), s.expire)
			if s.parent.Done() != nil {
				s.unwatch = context.AfterFunc(s.parent, func() { s.end(s.parent.Err()) })
			}
		}
	}
	return s.done
}

// Err implements context.Context: DeadlineExceeded once the deadline has
// passed, the caller's error once its ctx ended (closing Done first, when
// it was asked for), Canceled after stop.
func (s *sendCtx) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil && s.endedLocked() && s.done != nil {
		close(s.done)
	}
	return s.err
}

// endedLocked sets err when the deadline has passed or the caller's ctx
// ended, and reports whether it did so now.
func (s *sendCtx) endedLocked() bool {
	if s.err != nil {
		return false
	}
	if time.Until(s.dl) <= 0 { // one clock read when dl has a monotonic reading (Err runs several times per send)
		s.err = context.DeadlineExceeded
		return true
	}
	if err := s.parent.Err(); err != nil {
		s.err = err
		return true
	}
	return false
}

func (s *sendCtx) expire() { s.end(context.DeadlineExceeded) }

// stop ends the context (the send returned): its timer and its watch, if
// any, are stopped, and Done closes if it was asked for.
func (s *sendCtx) stop() {
	s.mu.Lock()
	if s.timer != nil {
		s.timer.Stop()
	}
	unwatch := s.unwatch
	s.mu.Unlock()
	if unwatch != nil {
		unwatch()
	}
	s.end(context.Canceled)
}

func (s *sendCtx) end(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
		if s.done != nil {
			close(s.done)
		}
	}
}
