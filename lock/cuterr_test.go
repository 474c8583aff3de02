package lock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rlock-go/rlock/lock"
)

// A call cut by its own ctx while its request is in flight says so: the
// caller's ctx ended first, the request's outcome is unknown and settled
// in the background. It said "redis unavailable: context deadline
// exceeded", which on a master merely slower than the caller's deadline
// sends an operator after Redis (seen in the interop run, session 18).
// Its sentinels stay: errors.Is matches the ctx's error and
// ErrUnavailable (the outcome is unknown), and ErrNotAcquired for a Lock.
func TestCutCallsSayTheirCtxEndedWithTheRequestInFlight(t *testing.T) {
	for _, what := range []string{"TryLock", "Lock", "Unlock", "ForceUnlock"} {
		for _, how := range []string{"deadline", "cancel"} {
			t.Run(what+"/"+how, func(t *testing.T) {
				srv := integrationRedis(t)
				c := newClient(t, lock.Config{CommandTimeout: cancelledCT}, srv)
				warm(t, c)
				n := name(t)
				var h *lock.Held
				if what == "Unlock" {
					var err error
					h, err = c.Mutex(n).Lock(bg())
					must(t, err)
				}
				resume := pause(t, srv)
				ctx, cancel := context.WithCancel(bg())
				defer cancel()
				if how == "deadline" {
					ctx, cancel = context.WithTimeout(bg(), 200*time.Millisecond)
					defer cancel()
				}
				call := goCall(func() error {
					switch what {
					case "TryLock":
						_, err := c.Mutex(n).TryLock(ctx)
						return err
					case "Lock":
						_, err := c.Mutex(n).Lock(ctx)
						return err
					case "ForceUnlock":
						_, err := c.Mutex(n).ForceUnlock(ctx)
						return err
					}
					return h.Unlock(ctx)
				})
				if how == "cancel" {
					time.Sleep(100 * time.Millisecond) // the fault's timing: the request is on the wire
					cancel()
				}
				r := awaitCall(t, what, call, time.Now(), resume)
				err := r.err
				t.Logf("%s cut by its ctx (%s): %v", what, how, err)
				want := context.Canceled
				if how == "deadline" {
					want = context.DeadlineExceeded
				}
				if err == nil || !errors.Is(err, want) {
					t.Fatalf("%s cut by its ctx = %v, want an error matching %v", what, err, want)
				}
				if (what == "TryLock" || what == "Lock") && !errors.Is(err, lock.ErrNotAcquired) {
					t.Errorf("%s cut by its ctx = %v, want ErrNotAcquired", what, err)
				}
				s := err.Error()
				if strings.Contains(s, "redis unavailable") {
					t.Errorf("%s cut by its ctx says %q: \"redis unavailable\", though its ctx ended first", what, s)
				}
				switch {
				case errors.Is(err, lock.ErrUnavailable) && !strings.Contains(s, "ctx ended before its answer came"):
					t.Errorf("%s cut by its ctx says %q: want it to say the ctx ended before the answer came", what, s)
				case !errors.Is(err, lock.ErrUnavailable) && what == "Unlock":
					t.Errorf("Unlock cut by its ctx = %v, want ErrUnavailable (unconfirmed)", err)
				case what == "ForceUnlock" && !strings.Contains(s, "may or may not have been deleted"):
					t.Errorf("ForceUnlock cut by its ctx says %q: want it to say the lock may or may not have been deleted", s)
				case !errors.Is(err, lock.ErrUnavailable):
					// On a loaded machine a Lock's ctx may end before its
					// request is sent: nothing was in flight.
					t.Logf("%s: its ctx ended before the request was sent", what)
				}
			})
		}
	}
}

// A ctx cancelled with a cause of its own: the error matches both
// context.Canceled (ctx.Err()) and the cause (review of 6e0c539, which
// carried the cause alone: errors.Is(err, context.Canceled) was false).
func TestCutCallMatchesItsCtxErrorAndItsCause(t *testing.T) {
	srv := integrationRedis(t)
	c := newClient(t, lock.Config{CommandTimeout: cancelledCT}, srv)
	warm(t, c)
	resume := pause(t, srv)
	errX := errors.New("shutting down")
	ctx, cancel := context.WithCancelCause(bg())
	call := goCall(func() error { _, err := c.Mutex(name(t)).TryLock(ctx); return err })
	time.Sleep(100 * time.Millisecond) // the fault's timing: the request is on the wire
	cancel(errX)
	r := awaitCall(t, "TryLock", call, time.Now(), resume)
	t.Logf("TryLock cancelled with a cause: %v", r.err)
	if !errors.Is(r.err, context.Canceled) || !errors.Is(r.err, errX) || !errors.Is(r.err, lock.ErrNotAcquired) {
		t.Errorf("TryLock cancelled with a cause = %v: want it to match context.Canceled, the cause and ErrNotAcquired", r.err)
	}
}

// A call whose ctx is still live is never told its ctx ended: a
// reconnection's handshake bounded by DialTimeout (shorter than the
// caller's time left) times out with context.DeadlineExceeded too, and
// the call goes on retrying within its ctx (review of 6e0c539: it
// returned after 302 ms, its 1 s ctx live, saying the ctx ended; before,
// the lock was granted once the master resumed at 700 ms).
func TestCutCallWithItsCtxLiveRetries(t *testing.T) {
	srv := integrationRedis(t)
	c := newClient(t, lock.Config{CommandTimeout: 2 * time.Second, DialTimeout: 300 * time.Millisecond}, srv)
	warm(t, c)
	resume := pause(t, srv)
	// A call cut by its 100 ms ctx: its connection is closed and made
	// again by the next request, against the stopped master.
	ctx1, cancel1 := context.WithTimeout(bg(), 100*time.Millisecond)
	_, err := c.Mutex(name(t) + ":a").TryLock(ctx1)
	cancel1()
	t.Logf("first call: %v", err)
	ctx, cancel := context.WithTimeout(bg(), 2*time.Second)
	defer cancel()
	time.AfterFunc(700*time.Millisecond, resume)
	start := time.Now()
	h, err := c.Mutex(name(t) + ":b").TryLock(ctx)
	t.Logf("second call returned after %v, its ctx's error %v: %v", time.Since(start).Round(time.Millisecond), ctx.Err(), err)
	if err == nil {
		must(t, h.Unlock(bg()))
		return
	}
	if ctx.Err() == nil && strings.Contains(err.Error(), "ctx ended") {
		t.Errorf("TryLock with its ctx live says its ctx ended: %v", err)
	}
}

// Close(context.Background()) whose release is bounded by the hold's
// lease (the library's own deadline), the master stopped, never says its
// ctx ended: it cannot (review of 6e0c539).
func TestCloseBoundedByALeaseDoesNotBlameItsCtx(t *testing.T) {
	srv := integrationRedis(t)
	c := newClient(t, lock.Config{CommandTimeout: time.Second}, srv)
	warm(t, c)
	_, err := c.Mutex(name(t)).Lock(bg(), lock.Lease(1500*time.Millisecond))
	must(t, err)
	resume := pause(t, srv)
	defer resume()
	err = c.Close(bg())
	t.Logf("Close(context.Background()): %v", err)
	if err != nil && strings.Contains(err.Error(), "ctx ended") {
		t.Errorf("Close with a ctx that cannot end says its ctx ended: %v", err)
	}
}
