package lock

import (
	"context"
	"sync"
	"time"
)

// sendCtx is the context of one send of a count-changing request: the
// caller's values, none of its cancellation (a request in flight is seen
// through to its answer or its deadline), and a deadline. It is what
// context.WithTimeout(context.WithoutCancel(ctx), d) gives, without the
// timer on the path every Lock and Unlock takes: rueidis bounds a request
// sent on a connection in direct mode by the deadline alone (as the
// connection's I/O deadline) and never asks for Done there; Done's
// channel and its timer are made only when something asks (rueidis in
// pipelining mode, a derived context).
type sendCtx struct {
	values context.Context // the caller's, WithoutCancel: its cause stays its own
	dl     time.Time

	mu    sync.Mutex
	done  chan struct{} // made by the first Done
	timer *time.Timer   // armed by the first Done, to close done at dl
	err   error         // set once: DeadlineExceeded, or Canceled by stop
}

func newSendCtx(ctx context.Context, d time.Duration) *sendCtx {
	return &sendCtx{values: context.WithoutCancel(ctx), dl: time.Now().Add(d)}
}

// Deadline implements context.Context.
func (s *sendCtx) Deadline() (time.Time, bool) { return s.dl, true }

// Value implements context.Context: the caller's values (a trace span,
// the owner).
func (s *sendCtx) Value(key any) any { return s.values.Value(key) }

// Done implements context.Context.
func (s *sendCtx) Done() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done == nil {
		s.done = make(chan struct{})
		s.expiredLocked()
		if s.err != nil {
			close(s.done)
		} else {
			s.timer = time.AfterFunc(time.Until(s.dl), s.expire)
		}
	}
	return s.done
}

// Err implements context.Context: DeadlineExceeded once the deadline has
// passed (closing Done first, when it was asked for), Canceled after stop.
func (s *sendCtx) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil && s.expiredLocked() && s.done != nil {
		close(s.done)
	}
	return s.err
}

// expiredLocked sets err when the deadline has passed and reports
// whether it did so now.
func (s *sendCtx) expiredLocked() bool {
	if s.err == nil && !time.Now().Before(s.dl) {
		s.err = context.DeadlineExceeded
		return true
	}
	return false
}

func (s *sendCtx) expire() { s.end(context.DeadlineExceeded) }

// stop ends the context (the send returned): its timer, if any, is
// stopped, and Done closes if it was asked for.
func (s *sendCtx) stop() {
	s.mu.Lock()
	if s.timer != nil {
		s.timer.Stop()
	}
	s.mu.Unlock()
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
