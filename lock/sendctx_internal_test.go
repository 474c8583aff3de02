package lock

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlock-go/rlock/integration"
)

type sendCtxKey struct{}

// TestSendCtx checks the send context against what
// context.WithTimeout(context.WithoutCancel(ctx), d) promises: the
// caller's values, none of its cancellation, Done closed at the deadline
// with DeadlineExceeded, Err nil before; and after stop, Canceled.
func TestSendCtx(t *testing.T) {
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), sendCtxKey{}, "v"))
	cancel()

	t.Run("values and deadline, not the caller's cancellation", func(t *testing.T) {
		s := newSendCtx(parent, time.Hour)
		defer s.stop()
		if got := s.Value(sendCtxKey{}); got != "v" {
			t.Fatalf("Value = %v, want the caller's", got)
		}
		dl, ok := s.Deadline()
		if !ok || time.Until(dl) < 59*time.Minute {
			t.Fatalf("Deadline = %v, %v; want about an hour from now", dl, ok)
		}
		if err := s.Err(); err != nil {
			t.Fatalf("Err = %v with the caller's ctx cancelled; want nil", err)
		}
		select {
		case <-s.Done():
			t.Fatal("Done closed before the deadline")
		default:
		}
	})

	t.Run("Done closes at the deadline", func(t *testing.T) {
		s := newSendCtx(context.Background(), 20*time.Millisecond)
		defer s.stop()
		select {
		case <-s.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("Done not closed 10 s after a 20 ms deadline")
		}
		if err := s.Err(); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Err = %v, want DeadlineExceeded", err)
		}
		if time.Now().Before(s.dl) {
			t.Fatal("Done closed before the deadline")
		}
	})

	t.Run("Err after the deadline, Done asked later", func(t *testing.T) {
		s := newSendCtx(context.Background(), -time.Millisecond)
		if err := s.Err(); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Err = %v, want DeadlineExceeded", err)
		}
		select {
		case <-s.Done():
		default:
			t.Fatal("Done open although Err reported the deadline")
		}
	})

	t.Run("Err closes an asked-for Done", func(t *testing.T) {
		s := newSendCtx(context.Background(), time.Hour)
		done := s.Done()
		s.dl = time.Now().Add(-time.Millisecond) // as if the timer were late
		if err := s.Err(); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Err = %v, want DeadlineExceeded", err)
		}
		select {
		case <-done:
		default:
			t.Fatal("Err reported the deadline with Done still open")
		}
		s.stop()
	})

	t.Run("stop", func(t *testing.T) {
		s := newSendCtx(context.Background(), time.Hour)
		done := s.Done()
		s.stop()
		select {
		case <-done:
		default:
			t.Fatal("Done open after stop")
		}
		if err := s.Err(); !errors.Is(err, context.Canceled) {
			t.Fatalf("Err = %v after stop, want Canceled", err)
		}
		s.stop() // twice is harmless
	})

	t.Run("a derived context ends with it", func(t *testing.T) {
		s := newSendCtx(context.Background(), 20*time.Millisecond)
		child, cancel := context.WithCancel(s)
		defer cancel()
		select {
		case <-child.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("child not ended 10 s after its parent's 20 ms deadline")
		}
		if !errors.Is(child.Err(), context.DeadlineExceeded) {
			t.Fatalf("child Err = %v, want DeadlineExceeded", child.Err())
		}
	})
}

// TestSendCtxBoundsADelayedReply sends a GET whose reply the proxy holds
// back for 3 s, under a send context of 200 ms, on a connection in
// direct mode (rueidis sets the deadline on the connection) and on one in
// pipelining mode (rueidis waits on Done): both must give up at the
// deadline, not when the reply comes.
func TestSendCtxBoundsADelayedReply(t *testing.T) {
	srv := integration.Redis(t, integration.Options{})
	for _, pipelining := range []bool{false, true} {
		t.Run(map[bool]string{false: "direct", true: "pipelining"}[pipelining], func(t *testing.T) {
			rc := integration.NewClient(t, srv.Addr())
			ctx := context.Background()
			key := "sendctx:" + t.Name()
			if pipelining {
				// Concurrent requests switch the connection for good
				// (requests of one key, so of one connection).
				var wg sync.WaitGroup
				for range 8 {
					wg.Go(func() {
						for range 50 {
							_ = rc.Do(ctx, rc.B().Get().Key(key).Build()).Error()
						}
					})
				}
				wg.Wait()
			}
			f, err := srv.Inject(integration.Rule{Match: integration.MatchFunc(func(cmd []string) bool {
				return len(cmd) == 2 && strings.EqualFold(cmd[0], "GET") && cmd[1] == key
			}), Action: integration.DelayReply(3 * time.Second)})
			if err != nil {
				t.Fatal(err)
			}
			defer f.Remove()
			s := newSendCtx(ctx, 200*time.Millisecond)
			start := time.Now()
			err = rc.Do(s, rc.B().Get().Key(key).Build()).Error()
			took := time.Since(start)
			s.stop()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("GET with its reply held back 3 s = %v, want DeadlineExceeded", err)
			}
			if took > 2*time.Second {
				t.Fatalf("GET gave up after %v; its deadline was 200 ms", took)
			}
		})
	}
}

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
