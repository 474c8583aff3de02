package lock

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestReviewSendCtxCause: the send context stands for
// context.WithTimeout(context.WithoutCancel(ctx), d), but its Value hands
// out the caller's internal cancelCtx key (WithoutCancel hides it), so
// context.Cause reads the caller's cause: non-nil while Err is nil (the
// caller's ctx ended, the send goes on), nil after the deadline passed,
// and a context derived from it ends with the caller's cause rather than
// its own DeadlineExceeded.
func TestReviewSendCtxCause(t *testing.T) {
	errCaller := errors.New("caller gave up")
	parent, cancel := context.WithCancelCause(context.Background())
	cancel(errCaller)

	t.Run("Cause after the deadline", func(t *testing.T) {
		s := newSendCtx(parent, time.Millisecond)
		<-s.Done()
		if got := context.Cause(s); !errors.Is(got, context.DeadlineExceeded) {
			t.Errorf("Cause(send ctx) after its deadline = %v, want DeadlineExceeded (Err = %v)", got, s.Err())
		}
	})

	t.Run("derived context's cause", func(t *testing.T) {
		s := newSendCtx(parent, 20*time.Millisecond)
		defer s.stop()
		child, ccancel := context.WithCancel(s)
		defer ccancel()
		<-child.Done()
		if got := context.Cause(child); !errors.Is(got, context.DeadlineExceeded) {
			t.Errorf("Cause of a context derived from the send ctx, ended by its deadline = %v, want DeadlineExceeded", got)
		}
	})
}
