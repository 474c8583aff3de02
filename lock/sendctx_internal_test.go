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
// context.WithDeadline(ctx, d) promises: the caller's values and
// cancellation, the earliest deadline, Done closed at it with
// DeadlineExceeded, Err nil before; and after stop, Canceled.
func TestSendCtx(t *testing.T) {
	live := context.WithValue(context.Background(), sendCtxKey{}, "v")
	parent, cancel := context.WithCancel(live)
	cancel()

	t.Run("values and deadline", func(t *testing.T) {
		s := newSendCtx(live, time.Hour, time.Time{}, true)
		defer s.stop()
		if got := s.Value(sendCtxKey{}); got != "v" {
			t.Fatalf("Value = %v, want the caller's", got)
		}
		dl, ok := s.Deadline()
		if !ok || time.Until(dl) < 59*time.Minute {
			t.Fatalf("Deadline = %v, %v; want about an hour from now", dl, ok)
		}
		if err := s.Err(); err != nil {
			t.Fatalf("Err = %v; want nil", err)
		}
		select {
		case <-s.Done():
			t.Fatal("Done closed before the deadline")
		default:
		}
	})

	t.Run("the caller's cancellation", func(t *testing.T) {
		s := newSendCtx(parent, time.Hour, time.Time{}, true)
		defer s.stop()
		if err := s.Err(); !errors.Is(err, context.Canceled) {
			t.Fatalf("Err = %v with the caller's ctx cancelled; want Canceled", err)
		}
		select {
		case <-s.Done():
		default:
			t.Fatal("Done open with the caller's ctx cancelled")
		}
	})

	t.Run("the caller's cancellation while Done is watched", func(t *testing.T) {
		p, pcancel := context.WithCancel(live)
		s := newSendCtx(p, time.Hour, time.Time{}, true)
		defer s.stop()
		done := s.Done()
		pcancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("Done not closed 10 s after the caller's ctx was cancelled")
		}
		if err := s.Err(); !errors.Is(err, context.Canceled) {
			t.Fatalf("Err = %v, want Canceled", err)
		}
	})

	t.Run("the earliest deadline: the caller's, then until", func(t *testing.T) {
		p, pcancel := context.WithTimeout(live, time.Minute)
		defer pcancel()
		pdl, _ := p.Deadline()
		s := newSendCtx(p, time.Hour, time.Time{}, true)
		if dl, _ := s.Deadline(); !dl.Equal(pdl) {
			t.Errorf("Deadline = %v, want the caller's %v", dl, pdl)
		}
		s.stop()
		until := time.Now().Add(time.Second)
		s = newSendCtx(p, time.Hour, until, true)
		if dl, _ := s.Deadline(); !dl.Equal(until) {
			t.Errorf("Deadline = %v, want until %v", dl, until)
		}
		s.stop()
		s = newSendCtx(p, time.Hour, time.Time{}, false)
		if dl, _ := s.Deadline(); !dl.After(pdl) {
			t.Errorf("Deadline = %v of a send not on the caller's behalf, want its own hour, not the caller's %v", dl, pdl)
		}
		s.stop()
	})

	t.Run("not on the caller's behalf: seen through", func(t *testing.T) {
		s := newSendCtx(parent, time.Hour, time.Time{}, false)
		defer s.stop()
		if err := s.Err(); err != nil {
			t.Fatalf("Err = %v with the caller's ctx cancelled, want nil: the send is seen through", err)
		}
	})

	t.Run("Done closes at the deadline", func(t *testing.T) {
		s := newSendCtx(context.Background(), 20*time.Millisecond, time.Time{}, true)
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
		s := newSendCtx(context.Background(), -time.Millisecond, time.Time{}, true)
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
		s := newSendCtx(context.Background(), time.Hour, time.Time{}, true)
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
		s := newSendCtx(context.Background(), time.Hour, time.Time{}, true)
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
		s := newSendCtx(context.Background(), 20*time.Millisecond, time.Time{}, true)
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
			s := newSendCtx(ctx, 200*time.Millisecond, time.Time{}, true)
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

// TestReviewSendCtxCause: a review found that a send context whose Value
// handed out the caller's internal cancelCtx key made context.Cause read
// the caller's cause rather than the send's own end; its values come from
// context.WithoutCancel(ctx), which hides that key, so the cause of a
// send context ended by its deadline, and of one derived from it, is
// DeadlineExceeded.
func TestReviewSendCtxCause(t *testing.T) {
	// A live caller's ctx: the send's own deadline ends it.
	parent, cancel := context.WithCancelCause(context.Background())
	defer cancel(errors.New("caller gave up"))

	t.Run("Cause after the deadline", func(t *testing.T) {
		s := newSendCtx(parent, time.Millisecond, time.Time{}, true)
		<-s.Done()
		if got := context.Cause(s); !errors.Is(got, context.DeadlineExceeded) {
			t.Errorf("Cause(send ctx) after its deadline = %v, want DeadlineExceeded (Err = %v)", got, s.Err())
		}
	})

	t.Run("derived context's cause", func(t *testing.T) {
		s := newSendCtx(parent, 20*time.Millisecond, time.Time{}, true)
		defer s.stop()
		child, ccancel := context.WithCancel(s)
		defer ccancel()
		<-child.Done()
		if got := context.Cause(child); !errors.Is(got, context.DeadlineExceeded) {
			t.Errorf("Cause of a context derived from the send ctx, ended by its deadline = %v, want DeadlineExceeded", got)
		}
	})
}

// lateCtx is a caller's ctx whose deadline has passed and whose Done
// comes late (after late; never when late is negative), as a ctx's timer
// does on a busy machine.
type lateCtx struct {
	context.Context
	dl   time.Time
	done chan struct{}
}

func newLateCtx(late time.Duration) *lateCtx {
	c := &lateCtx{Context: context.Background(), dl: time.Now().Add(-time.Millisecond), done: make(chan struct{})}
	if late >= 0 {
		time.AfterFunc(late, func() { close(c.done) })
	}
	return c
}

func (c *lateCtx) Deadline() (time.Time, bool) { return c.dl, true }
func (c *lateCtx) Done() <-chan struct{}       { return c.done }
func (c *lateCtx) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// A send whose caller's deadline has passed names the caller's ctx even
// when the ctx's Done comes a few milliseconds late (found flaky under
// -race: TestCutCallsSayTheirCtxEndedWithTheRequestInFlight's deadline
// cases read "redis unavailable" in 1 of 12 runs, its ctx's timer
// 1.3–2.8 ms late; a 1 ms wait then answered nil), and when it never
// comes (named by its deadline, within causeWait).
func TestCutByCallerWithALateDone(t *testing.T) {
	for _, late := range []time.Duration{3 * time.Millisecond, -1} {
		ctx := newLateCtx(late)
		s := newSendCtx(ctx, time.Hour, time.Time{}, true)
		start := time.Now()
		err := s.cutByCaller(context.DeadlineExceeded)
		took := time.Since(start)
		var f inFlight
		if !errors.As(err, &f) || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrUnavailable) {
			t.Errorf("Done %v late: cutByCaller = %v, want an inFlight error matching DeadlineExceeded and ErrUnavailable", late, err)
		}
		if took > causeWait+time.Second {
			t.Errorf("Done %v late: cutByCaller took %v", late, took)
		}
		s.stop()
	}
}

// The key context.Cause looks a ctx's cancellation up by is learnt (a Go
// release that stops asking for it would cost newSendCtx an allocation
// and watchable a Done): a cancellable ctx answers it, and a send ctx
// hides it, as WithoutCancel does.
func TestCancelKeyLearnt(t *testing.T) {
	if cancelKey == nil {
		t.Fatal("context.Cause asked the probe for no key")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if ctx.Value(cancelKey) == nil {
		t.Error("a cancellable ctx does not answer the learnt key")
	}
	if context.WithoutCancel(ctx).Value(cancelKey) != nil {
		t.Error("WithoutCancel does not hide the learnt key")
	}
	if s := newSendCtx(ctx, time.Second, time.Time{}, true); s.Value(cancelKey) != nil || !s.watchable() {
		t.Errorf("a caller's send ctx: Value(key) = %v (want nil), watchable %v (want true)", s.Value(cancelKey), s.watchable())
	}
	if s := newSendCtx(context.Background(), time.Second, time.Time{}, true); s.watchable() {
		t.Error("a send of a ctx that cannot be cancelled is watchable")
	}
}
