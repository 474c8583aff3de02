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
	for _, what := range []string{"TryLock", "Lock", "Unlock"} {
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
				if what != "Unlock" && !errors.Is(err, lock.ErrNotAcquired) {
					t.Errorf("%s cut by its ctx = %v, want ErrNotAcquired", what, err)
				}
				s := err.Error()
				if strings.Contains(s, "redis unavailable") {
					t.Errorf("%s cut by its ctx says %q: \"redis unavailable\", though its ctx ended first", what, s)
				}
				switch {
				case errors.Is(err, lock.ErrUnavailable) && !strings.Contains(s, "in flight"):
					t.Errorf("%s cut by its ctx says %q: want the request in flight when the ctx ended", what, s)
				case !errors.Is(err, lock.ErrUnavailable) && what == "Unlock":
					t.Errorf("Unlock cut by its ctx = %v, want ErrUnavailable (unconfirmed)", err)
				case !errors.Is(err, lock.ErrUnavailable):
					// On a loaded machine a Lock's ctx may end before its
					// request is sent: nothing was in flight.
					t.Logf("%s: its ctx ended before the request was sent", what)
				}
			})
		}
	}
}
