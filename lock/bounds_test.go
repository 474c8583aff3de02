package lock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/observe"
	"github.com/rlock-go/rlock/reentrant"
)

// Issue 29, stage 3: every call returns within its ctx, whatever the
// master does (safety-3 R3-7, R3-8, R3-9, R3-10; misuse-and-faults-2
// P1-90, P2-08). Failing-first tests: the master is stopped (SIGSTOP)
// while a call's request or wait is in flight, the call's ctx ends, and
// the test measures how long after that the call returns.

const (
	// ctxSlack is issue 29's bound past a call's ctx on a quiet machine
	// (p99 10 ms, at most 50 ms).
	ctxSlack = 50 * time.Millisecond
	// boundSlack is the bound asserted: ctxSlack, with room for a loaded
	// CI machine. The overrun measured is logged either way.
	boundSlack = max(ctxSlack, 250*time.Millisecond)
	// hardBound is how long past its ctx a call is waited for before the
	// test unblocks it (resumes the master, ends the application's
	// BLPOP): long enough to measure the overruns the reviews found with
	// the CommandTimeouts used here, short enough never to hang the suite.
	hardBound = 10 * time.Second
)

// returned is a call's outcome and the time it returned; late: only once
// the test unblocked it (its error then tells of that, not of the fault).
type returned struct {
	err  error
	at   time.Time
	late bool
}

// goCall runs call on a goroutine of its own.
func goCall(call func() error) <-chan returned {
	ch := make(chan returned, 1)
	go func() {
		err := call()
		ch <- returned{err: err, at: time.Now()}
	}()
	return ch
}

// awaitCall waits for the call on ch, whose ctx ended (or ends) at end,
// until hardBound past end. A call still running then is reported, and
// unblocked (unblock) and waited for, 30 s at most: the test never hangs,
// and leaves no goroutine behind for the leak check.
func awaitCall(t *testing.T, what string, ch <-chan returned, end time.Time, unblock func()) returned {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(time.Until(end.Add(hardBound))):
	}
	t.Errorf("%s had not returned %v after its ctx ended (bound %v)", what, hardBound, boundSlack)
	unblock()
	select {
	case r := <-ch:
		t.Logf("%s returned %v after its ctx ended, once unblocked: %v", what, r.at.Sub(end), r.err)
		r.late = true
		return r
	case <-time.After(30 * time.Second):
		t.Fatalf("%s had not returned 30 s after it was unblocked", what)
		return returned{}
	}
}

// goAcquire runs acquire on a goroutine of its own, like goCall: a grant
// is released at once and returned as an error saying "granted" (the
// calls under test must not be granted).
func goAcquire(acquire func() (*lock.Held, error)) <-chan returned {
	return goCall(func() error {
		g, err := acquire()
		if err == nil {
			_ = g.Unlock(bg())
			return errors.New("granted")
		}
		return err
	})
}

// checkBound reports how long after end the call returned, and fails the
// test when that, less the time the process was seen stalled in between
// (lateness), is more than bound.
func checkBound(t *testing.T, what string, r returned, end time.Time, bound time.Duration) time.Duration {
	t.Helper()
	over, stalled := lateness(end, r.at)
	t.Logf("%s returned %v after its ctx ended%s (issue 29: %v; asserted: %v): %v", what, over.Round(time.Millisecond), stalledNote(stalled), ctxSlack, bound, r.err)
	if over-stalled > bound {
		t.Errorf("%s returned %v after its ctx ended%s, more than %v", what, over.Round(time.Millisecond), stalledNote(stalled), bound)
	}
	return over
}

// lateness is how long after end a call that returned at at returned
// (over), and how much of that every CPU was stalled at once (integration.
// Stalled): a machine that does not run the process delays every return,
// whatever the library does. A bound is asserted on over - stalled, the
// time the process could run.
func lateness(end, at time.Time) (over, stalled time.Duration) {
	return at.Sub(end), integration.Stalled(end, at)
}

// stalledNote says how long the process was stalled, for a message.
func stalledNote(stalled time.Duration) string {
	if stalled <= 0 {
		return ""
	}
	return fmt.Sprintf(" (%v of it with the process stalled)", stalled.Round(time.Millisecond))
}

// freeWithinALease checks that other is granted the lock n within one
// lease of now (the master just resumed), and releases it.
func freeWithinALease(t *testing.T, other *lock.Client, n string, lease time.Duration) {
	t.Helper()
	released := time.Now()
	g, err := other.Mutex(n).TryLock(bg(), lock.Wait(lease+time.Second))
	if err != nil {
		t.Fatalf("the lock was not free within one lease (%v) of the master's resumption: %v", lease, err)
	}
	t.Logf("another Client was granted the lock %v after the master resumed", time.Since(released).Round(time.Millisecond))
	must(t, g.Unlock(bg()))
}

// pause stops srv (SIGSTOP) and returns a func that resumes it; the
// server is resumed when the test ends in any case.
func pause(t *testing.T, srv *integration.Server) func() {
	t.Helper()
	must(t, srv.Pause(bg()))
	resume := func() {
		if err := srv.Resume(context.Background()); err != nil && !errors.Is(err, integration.ErrClosed) {
			t.Errorf("resume: %v", err)
		}
	}
	t.Cleanup(resume)
	return resume
}

// warm makes a lock round trip on c, so that nothing the Client learns
// once (ROLE, scripts) is left for the call under test.
func warm(t *testing.T, c *lock.Client) {
	t.Helper()
	h, err := c.Mutex(name(t) + ":warm").TryLock(bg())
	must(t, err)
	must(t, h.Unlock(bg()))
}

// queue returns the fields in the fair queue of the lock called n.
func queue(t *testing.T, rc rueidis.Client, n string) []string {
	t.Helper()
	q, err := do(t, rc, "LRANGE", reentrant.FairQueueName(n), "0", "-1").AsStrSlice()
	must(t, err)
	return q
}

// awaitQueued waits until the fair queue of n has k places.
func awaitQueued(t *testing.T, rc rueidis.Client, n string, k int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(queue(t, rc, n)) < k {
		if time.Now().After(deadline) {
			t.Fatalf("the fair queue of %q has %v, want %d places", n, queue(t, rc, n), k)
		}
		time.Sleep(10 * time.Millisecond) // polled: no signal for "queued in Redis"
	}
}

// placesOf returns the places of c's fields in the fair queue of n, with
// their timeouts (ms since the epoch).
func placesOf(t *testing.T, rc rueidis.Client, c *lock.Client, n string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, f := range queue(t, rc, n) {
		if strings.HasPrefix(f, c.ID()+":") {
			s, err := do(t, rc, "ZSCORE", reentrant.FairTimeoutName(n), f).AsInt64()
			if err != nil && !rueidis.IsRedisNil(err) {
				t.Fatal(err)
			}
			out[f] = s
		}
	}
	return out
}

// R3-7: Close(ctx of 200 ms) with a fair waiter in flight while the
// master is stopped returns within its ctx; its error names the queue
// place it left; and what it left expires by itself within a bound: a
// live waiter of another Client, queued behind it, is granted the lock
// its holder released.
func TestBoundCloseWithAFairWaiterWhileTheMasterIsStopped(t *testing.T) {
	srv := integrationRedis(t)
	rc := raw(t, srv)
	n := name(t)
	holder := newClient(t, lock.Config{}, srv)
	other := newClient(t, lock.Config{}, srv)
	// The closing Client's place, once left, lasts its wait beyond the
	// hold ahead (Redisson's rule): FairLockWaitTimeout is short here so
	// that "expires by itself" has a bound a test can wait for.
	fairWait := 2 * time.Second
	// The closing Client's waiter reports each sleep: the master is stopped
	// only once it sleeps, with no request in flight (a request in flight
	// holds Close up to one CommandTimeout: issue 29 stage 3's known gap,
	// which a CI run under load hit here, 737 ms late).
	sleeping := make(chan struct{})
	var slept sync.Once
	obs := &observe.Observer{Waiting: func(_ context.Context, e observe.Waiting) {
		if e.Err == nil {
			slept.Do(func() { close(sleeping) })
		}
	}}
	c, err := lock.New(bg(), lock.Config{Addrs: []string{srv.Addr()}, CommandTimeout: time.Second, FairLockWaitTimeout: fairWait, Observer: obs})
	must(t, err)
	t.Cleanup(func() { _ = c.Close(bg()) })
	warm(t, c)

	// The holder's lease is explicit (no watchdog to fail while the
	// master is stopped): the closing Client's place times out at most
	// holdLease + fairWait after it joined.
	holdLease := 5 * time.Second
	h, err := holder.FairMutex(n).Lock(bg(), lock.Lease(holdLease))
	must(t, err)
	wctx, cancelWaiter := context.WithTimeout(bg(), 60*time.Second)
	defer cancelWaiter()
	waiter := goAcquire(func() (*lock.Held, error) {
		return c.FairMutex(n).Lock(wctx)
	})
	awaitQueued(t, rc, n, 1)
	joined := time.Now()
	select {
	case <-sleeping:
	case <-time.After(10 * time.Second):
		t.Fatal("the closing Client's fair waiter did not go to sleep within 10 s")
	}
	// A live waiter of another Client, behind the closing Client's.
	octx, cancelOther := context.WithTimeout(bg(), 60*time.Second)
	defer cancelOther()
	var granted time.Time
	live := goCall(func() error {
		g, err := other.FairMutex(n).Lock(octx)
		if err != nil {
			return err
		}
		granted = time.Now()
		return g.Unlock(bg())
	})
	awaitQueued(t, rc, n, 2)

	resume := pause(t, srv)
	time.Sleep(50 * time.Millisecond) // the stop has taken effect; the waiter sleeps
	start := time.Now()
	cctx, cancel := context.WithTimeout(bg(), 200*time.Millisecond)
	defer cancel()
	closed := goCall(func() error { return c.Close(cctx) })
	end := start.Add(200 * time.Millisecond)
	r := awaitCall(t, "Close with a fair waiter, master stopped", closed, end, resume)
	checkBound(t, "Close with a fair waiter, master stopped", r, end, boundSlack)
	resume()
	if w := awaitCall(t, "the closing Client's fair waiter", waiter, time.Now(), func() {}); !errors.Is(w.err, lock.ErrClosed) && !errors.Is(w.err, lock.ErrNotAcquired) {
		t.Errorf("the closing Client's fair waiter returned %v, want ErrClosed or ErrNotAcquired", w.err)
	}
	if !r.late && r.err == nil {
		t.Errorf("Close with a fair waiter while the master was stopped returned nil: it could not leave the queue")
	}

	// What Close left, once the master answers again.
	time.Sleep(200 * time.Millisecond) // requests queued in the stopped server run
	left := placesOf(t, rc, c, n)
	now := time.Now()
	for f, ms := range left {
		t.Logf("place left in the queue of %q: %s, timeout %v ahead", n, f, time.UnixMilli(ms).Sub(now).Round(time.Millisecond))
	}
	if len(left) > 0 && (r.err == nil || !strings.Contains(r.err.Error(), n)) {
		t.Errorf("Close left %d place(s) in the queue of %q and its error does not name it: %v", len(left), n, r.err)
	}

	released := time.Now()
	_ = h.Unlock(bg()) // its lease may have run out meanwhile
	// Bound: the left place times out its wait beyond the hold ahead;
	// then room to be pruned and woken.
	expire := joined.Add(holdLease + fairWait + 3*time.Second)
	select {
	case l := <-live:
		if l.err != nil {
			t.Fatalf("the live waiter behind the closed Client's place: %v", l.err)
		}
		t.Logf("the live waiter behind the closed Client's place was granted %v after the release, %v after the closing Client joined", granted.Sub(released).Round(time.Millisecond), granted.Sub(joined).Round(time.Millisecond))
	case <-time.After(time.Until(expire)):
		cancelOther()
		<-live
		t.Fatalf("the live waiter behind the closed Client's place was not granted within %v of the closing Client's joining (the lock was free; places now %v)", expire.Sub(joined), queue(t, rc, n))
	}
}

// R3-8: a fair Lock whose ctx ends while the master is stopped returns
// within its ctx, with no hold, and so does a fair TryLock whose Wait
// runs out then; a plain Lock, the control, does already.
func TestBoundLockWhoseCtxEndsWhileTheMasterIsStopped(t *testing.T) {
	for _, kind := range []string{"plain", "fair", "fair-TryLock-Wait"} {
		t.Run(kind, func(t *testing.T) {
			fair, wait := kind != "plain", kind == "fair-TryLock-Wait"
			srv := integrationRedis(t)
			rc := raw(t, srv)
			n := name(t)
			holder := newClient(t, lock.Config{}, srv)
			c := newClient(t, lock.Config{CommandTimeout: time.Second}, srv)
			warm(t, c)
			mutex := func(c *lock.Client) *lock.Mutex {
				if fair {
					return c.FairMutex(n)
				}
				return c.Mutex(n)
			}
			h, err := mutex(holder).Lock(bg())
			must(t, err)
			ctx, cancel := context.WithCancel(bg())
			defer cancel()
			waitFor := time.Second
			start := time.Now()
			waiter := goAcquire(func() (*lock.Held, error) {
				if wait {
					return mutex(c).TryLock(ctx, lock.Wait(waitFor))
				}
				return mutex(c).Lock(ctx)
			})
			if fair {
				awaitQueued(t, rc, n, 1)
			} else {
				time.Sleep(200 * time.Millisecond) // the waiter sleeps (the fault's timing, not a signal)
			}
			resume := pause(t, srv)
			var end time.Time
			if wait {
				// The Wait runs out while the master is stopped. TryLock's
				// bound (its doc): its last attempt, sent as the Wait runs
				// out, may take one CommandTimeout (1 s here).
				if time.Now().After(start.Add(waitFor)) {
					t.Fatalf("the master was stopped only %v after TryLock began, after its Wait of %v", time.Since(start), waitFor)
				}
				end = start.Add(waitFor + time.Second)
			} else {
				time.Sleep(100 * time.Millisecond)
				end = time.Now()
				cancel()
			}
			r := awaitCall(t, kind+" waiter, master stopped", waiter, end, resume)
			bound := boundSlack
			if !wait {
				// Lock's documented exception: a ctx cancelled while an
				// attempt is alone on its connection (a wake-up as the
				// master stopped) ends the call at that attempt's
				// CommandTimeout (1 s here). Before R3-8's fix the fair
				// waiter returned 2 × CommandTimeout late.
				bound += time.Second
			}
			checkBound(t, kind+" waiter, master stopped", r, end, bound)
			switch {
			case r.late:
			case wait && !errors.Is(r.err, lock.ErrNotAcquired):
				t.Errorf("fair TryLock whose Wait ran out while the master was stopped = %v, want ErrNotAcquired", r.err)
			case !wait && (!errors.Is(r.err, lock.ErrNotAcquired) || !errors.Is(r.err, context.Canceled)):
				t.Errorf("Lock cancelled while the master was stopped = %v, want ErrNotAcquired with context.Canceled", r.err)
			}
			resume()
			must(t, h.Unlock(bg()))
		})
	}
}

// R3-9: a TryLock or Lock whose ctx ends while its acquire is in flight
// (the master stopped) returns within its ctx, with no hold, and any
// grant it caused is released or expires within one lease.
func TestBoundAcquireWhoseCtxEndsInFlight(t *testing.T) {
	for _, blocking := range []bool{false, true} {
		what := map[bool]string{false: "TryLock", true: "Lock"}[blocking]
		t.Run(what, func(t *testing.T) {
			srv := integrationRedis(t)
			lease := 3 * time.Second
			c := newClient(t, lock.Config{WatchdogTimeout: lease, CommandTimeout: time.Second}, srv)
			other := newClient(t, lock.Config{}, srv)
			warm(t, c)
			n := name(t)
			resume := pause(t, srv)
			ctx, cancel := context.WithTimeout(bg(), 100*time.Millisecond)
			defer cancel()
			end, _ := ctx.Deadline()
			call := goAcquire(func() (*lock.Held, error) {
				if blocking {
					return c.Mutex(n).Lock(ctx)
				}
				return c.Mutex(n).TryLock(ctx)
			})
			r := awaitCall(t, what+" in flight, master stopped", call, end, resume)
			checkBound(t, what+" in flight, master stopped", r, end, boundSlack)
			if !r.late && (r.err == nil || r.err.Error() == "granted") {
				t.Errorf("%s whose ctx ended in flight on a stopped master = %v, want an error", what, r.err)
			}
			resume()
			// Whatever the acquire left once the master ran it is released
			// or expires within one lease.
			freeWithinALease(t, other, n, lease)
		})
	}
}

// R3-9: an Unlock whose ctx ends while its release is in flight (the
// master stopped) returns within its ctx, with ErrUnavailable saying the
// release is unconfirmed, and its Held's context is done by then.
func TestBoundUnlockWhoseCtxEndsInFlight(t *testing.T) {
	srv := integrationRedis(t)
	lease := 3 * time.Second
	c := newClient(t, lock.Config{WatchdogTimeout: lease, CommandTimeout: time.Second}, srv)
	other := newClient(t, lock.Config{}, srv)
	warm(t, c)
	n := name(t)
	h, err := c.Mutex(n).Lock(bg())
	must(t, err)
	resume := pause(t, srv)
	ctx, cancel := context.WithTimeout(bg(), 100*time.Millisecond)
	defer cancel()
	end, _ := ctx.Deadline()
	var heldDone bool
	call := goCall(func() error {
		err := h.Unlock(ctx)
		select {
		case <-h.Done():
			heldDone = true
		default:
		}
		return err
	})
	r := awaitCall(t, "Unlock in flight, master stopped", call, end, resume)
	checkBound(t, "Unlock in flight, master stopped", r, end, boundSlack)
	if !r.late && (!errors.Is(r.err, lock.ErrUnavailable) || !strings.Contains(r.err.Error(), "unconfirmed")) {
		t.Errorf("Unlock cut off in flight = %v, want ErrUnavailable saying unconfirmed", r.err)
	}
	if !heldDone {
		t.Errorf("the Held's context was not done when its Unlock returned %v", r.err)
	}
	resume()
	freeWithinALease(t, other, n, lease)
}

// ForceUnlock whose ctx ends while its request is in flight (the master
// stopped) returns within its ctx, with an error.
func TestBoundForceUnlockWhoseCtxEndsInFlight(t *testing.T) {
	srv := integrationRedis(t)
	rc := raw(t, srv)
	holder := newClient(t, lock.Config{}, srv)
	c := newClient(t, lock.Config{CommandTimeout: time.Second}, srv)
	warm(t, c)
	n := name(t)
	h, err := holder.Mutex(n).Lock(bg())
	must(t, err)
	resume := pause(t, srv)
	ctx, cancel := context.WithTimeout(bg(), 100*time.Millisecond)
	defer cancel()
	end, _ := ctx.Deadline()
	var deleted bool
	call := goCall(func() (err error) {
		deleted, err = c.Mutex(n).ForceUnlock(ctx)
		return err
	})
	r := awaitCall(t, "ForceUnlock in flight, master stopped", call, end, resume)
	checkBound(t, "ForceUnlock in flight, master stopped", r, end, boundSlack)
	if !r.late && (!errors.Is(r.err, lock.ErrUnavailable) || deleted) {
		t.Errorf("ForceUnlock on a stopped master = %v, %v, want ErrUnavailable", deleted, r.err)
	}
	resume()
	// The request was in flight: the master runs it once it resumes
	// (logged, not asserted: it is rueidis's to send or drop).
	time.Sleep(200 * time.Millisecond)
	t.Logf("after the master resumed the lock exists: %v", exists(t, rc, n))
	_ = h.Unlock(bg())
}

// P1-90: New refuses a CommandTimeout no round trip can meet.
func TestBoundNewRefusesAnUnmeetableCommandTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(bg(), 10*time.Second)
	defer cancel()
	start := time.Now()
	c, err := lock.New(ctx, lock.Config{Addrs: []string{shared.Addr()}, CommandTimeout: time.Microsecond})
	t.Logf("New with CommandTimeout 1µs returned after %v: %v", time.Since(start).Round(time.Millisecond), err)
	if err == nil {
		// What the misuse review saw next: the first TryLock hangs.
		tctx, tcancel := context.WithTimeout(bg(), time.Second)
		defer tcancel()
		end, _ := tctx.Deadline()
		call := goCall(func() error {
			g, err := c.Mutex(name(t)).TryLock(tctx)
			if err == nil {
				_ = g.Unlock(bg())
			}
			return err
		})
		closeIt := func() { go func() { _ = c.Close(bg()) }() }
		r := awaitCall(t, "TryLock with CommandTimeout 1µs", call, end, closeIt)
		t.Logf("then TryLock (ctx 1 s) returned %v after its ctx ended: %v", r.at.Sub(end).Round(time.Millisecond), r.err)
		cctx, ccancel := context.WithTimeout(bg(), 10*time.Second)
		defer ccancel()
		_ = c.Close(cctx)
		t.Fatalf("New accepted CommandTimeout 1µs, which no round trip can meet")
	}
	if !errors.Is(err, lock.ErrInvalid) || !strings.Contains(err.Error(), "CommandTimeout") {
		t.Fatalf("New with CommandTimeout 1µs = %v, want ErrInvalid naming CommandTimeout", err)
	}
}

// P2-08: TryLock on a stopped master returns within one CommandTimeout,
// as documented, not two.
func TestBoundTryLockWithinOneCommandTimeout(t *testing.T) {
	srv := integrationRedis(t)
	timeout := 500 * time.Millisecond
	c := newClient(t, lock.Config{CommandTimeout: timeout}, srv)
	warm(t, c)
	resume := pause(t, srv)
	start := time.Now()
	call := goAcquire(func() (*lock.Held, error) {
		return c.Mutex(name(t)).TryLock(bg())
	})
	end := start.Add(timeout) // its bound: one CommandTimeout
	r := awaitCall(t, "TryLock on a stopped master", call, end, resume)
	checkBound(t, "TryLock on a stopped master (past one CommandTimeout)", r, end, boundSlack)
	if !r.late && !errors.Is(r.err, lock.ErrUnavailable) {
		t.Errorf("TryLock on a stopped master = %v, want ErrUnavailable", r.err)
	}
}

// Close(200 ms) right after a TryLock or an Unlock was cut off in flight
// by its ctx (the master stopped) returns within its ctx, although the
// settler of that request is mid-send (found by review: 2.8 s late, Close
// waiting for the settler).
func TestBoundCloseAfterACutRequest(t *testing.T) {
	for _, unlock := range []bool{false, true} {
		what := map[bool]string{false: "TryLock", true: "Unlock"}[unlock]
		t.Run(what, func(t *testing.T) {
			srv := integrationRedis(t)
			c, err := lock.New(bg(), lock.Config{Addrs: []string{srv.Addr()}, CommandTimeout: 3 * time.Second})
			must(t, err)
			warm(t, c)
			var h *lock.Held
			if unlock {
				h, err = c.Mutex(name(t)).Lock(bg())
				must(t, err)
			}
			resume := pause(t, srv)
			actx, acancel := context.WithTimeout(bg(), 100*time.Millisecond)
			defer acancel()
			if unlock {
				err = h.Unlock(actx)
			} else {
				var g *lock.Held
				if g, err = c.Mutex(name(t)).TryLock(actx); err == nil {
					_ = g.Unlock(bg())
					t.Fatal("TryLock on a stopped master was granted")
				}
			}
			if !errors.Is(err, lock.ErrUnavailable) {
				t.Fatalf("%s cut off in flight = %v, want ErrUnavailable", what, err)
			}
			ctx, cancel := context.WithTimeout(bg(), 200*time.Millisecond)
			defer cancel()
			end, _ := ctx.Deadline()
			cl := goCall(func() error { return c.Close(ctx) })
			r := awaitCall(t, "Close after a cut "+what, cl, end, resume)
			checkBound(t, "Close after a cut "+what, r, end, boundSlack)
			resume()
		})
	}
}

// A Lock of an owner whose earlier acquire is still unsettled (its
// settler gave up: the master stopped for longer than WatchdogTimeout +
// CommandTimeout) settles it first, within the Lock's ctx (found by
// review: 901 ms late).
func TestBoundLockSettlesWithinItsCtx(t *testing.T) {
	srv := integrationRedis(t)
	c := newClient(t, lock.Config{WatchdogTimeout: 3 * time.Second, CommandTimeout: time.Second}, srv)
	warm(t, c)
	n := name(t)
	octx := lock.WithOwner(bg())
	resume := pause(t, srv)
	actx, acancel := context.WithTimeout(octx, 100*time.Millisecond)
	defer acancel()
	if _, err := c.Mutex(n).TryLock(actx); !errors.Is(err, lock.ErrUnavailable) {
		t.Fatalf("TryLock cut off in flight = %v, want ErrUnavailable", err)
	}
	time.Sleep(5 * time.Second) // the fault's timing: the settler gives up at sent + 3 s + 1 s
	ctx, cancel := context.WithTimeout(octx, 100*time.Millisecond)
	defer cancel()
	end, _ := ctx.Deadline()
	call := goAcquire(func() (*lock.Held, error) {
		return c.Mutex(n).Lock(ctx)
	})
	r := awaitCall(t, "Lock finding an unsettled request", call, end, resume)
	checkBound(t, "Lock finding an unsettled request", r, end, boundSlack)
	resume()
}

// R3-10: a waiter's Lock on a FromClient Client whose blocking pool
// (BlockingPoolSize 1) is in use by the application's BLPOP returns
// within its ctx: the pub/sub hub does not wait for that pool.
func TestBoundLockBesideABusyBlockingPool(t *testing.T) {
	rc := poolOfOne(t)
	direct := raw(t)
	n := name(t)
	queueKey := n + ":queue"
	blctx, stopConsumer := context.WithCancel(bg())
	consumer := goCall(func() error { return rc.Do(blctx, rc.B().Blpop().Key(queueKey).Timeout(0).Build()).Error() })
	unblock := func() {
		_ = do(t, direct, "LPUSH", queueKey, "end").Error()
		stopConsumer()
	}
	defer func() {
		unblock()
		select {
		case <-consumer:
		case <-time.After(10 * time.Second):
			t.Error("the application's BLPOP did not end")
		}
	}()
	// Wait until the BLPOP blocks on the server.
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := do(t, direct, "INFO", "clients").ToString()
		must(t, err)
		if !strings.Contains(info, "blocked_clients:0") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the application's BLPOP did not block")
		}
		time.Sleep(5 * time.Millisecond) // polled: no signal for "blocked on the server"
	}

	holder := newClient(t, lock.Config{})
	h, err := holder.Mutex(n).Lock(bg())
	must(t, err)
	defer func() { _ = h.Unlock(bg()) }()
	c, err := lock.FromClient(rc, lock.Config{})
	must(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(bg(), 10*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
	ctx, cancel := context.WithTimeout(bg(), time.Second)
	defer cancel()
	end, _ := ctx.Deadline()
	call := goAcquire(func() (*lock.Held, error) {
		return c.Mutex(n).Lock(ctx)
	})
	r := awaitCall(t, "Lock beside a busy blocking pool", call, end, unblock)
	checkBound(t, "Lock beside a busy blocking pool", r, end, boundSlack)
	if !r.late && (!errors.Is(r.err, lock.ErrNotAcquired) || !errors.Is(r.err, context.DeadlineExceeded)) {
		t.Errorf("Lock of a held lock beside a busy blocking pool = %v, want ErrNotAcquired with context.DeadlineExceeded", r.err)
	}
}
