package lock_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/observe"
)

// ticks returns an Observer whose Renew events arrive on the channel.
func ticks() (*observe.Observer, chan observe.Renew) {
	ch := make(chan observe.Renew, 1024)
	return &observe.Observer{Renew: func(e observe.Renew) { ch <- e }}, ch
}

// nextTick waits for the watchdog's next tick on tk, 10 s at most: a tick
// that never comes (the hold was lost on a machine that stalls, and
// nothing is left to renew) fails the test instead of hanging it.
func nextTick(t testing.TB, tk <-chan observe.Renew) observe.Renew {
	t.Helper()
	select {
	case e := <-tk:
		return e
	case <-time.After(10 * time.Second):
		t.Fatal("no watchdog tick within 10 s")
		return observe.Renew{}
	}
}

// keptTick is nextTick for the tests that a hold is kept: a tick whose
// round trip got no answer in time (Failed, nothing lost) while some CPU
// was seen stalled integration.TryStall or more is skipped (its
// renewals failed; the next tick's renew the holds, which a lease of keepLease outlives), up
// to 10 per test (*skipped counts them); on a machine that does not
// stall, every tick counts.
func keptTick(t testing.TB, tk <-chan observe.Renew, skipped *int) observe.Renew {
	t.Helper()
	for {
		e := nextTick(t, tk)
		// The tick ended at most a tick or two ago (the tests read ticks
		// as they come): its window, generously.
		stall := integration.LongestStall(time.Now().Add(-e.Duration-2*shortInterval), time.Now())
		if e.Failed == 0 || e.Lost != 0 || stall < integration.TryStall || *skipped >= 10 {
			return e
		}
		*skipped++
		t.Logf("tick %+v skipped (%d so far): a CPU stalled %v", e, *skipped, stall.Round(time.Millisecond))
	}
}

const (
	shortLease    = 300 * time.Millisecond
	shortInterval = 100 * time.Millisecond
	// keepLease is the lease of the tests that a hold is kept (renewed
	// every shortInterval): a machine that freezes the process for longer
	// than a lease ends any hold, whatever the watchdog does, and stop
	// 41's CI machine froze it for 300 ms and more.
	keepLease = 1500 * time.Millisecond
)

func TestWatchdogKeepsLockAliveForManyLeases(t *testing.T) {
	obs, tk := ticks()
	c := newClient(t, lock.Config{WatchdogTimeout: keepLease, RenewInterval: shortInterval, Observer: obs})
	m := c.Mutex(name(t))
	h, err := m.Lock(bg())
	must(t, err)
	inner, err := m.Lock(h.Context())
	must(t, err)
	must(t, inner.Unlock(bg())) // an inner Unlock must not stop renewal

	// Two leases' worth of ticks; after each, the lock is still there.
	skipped := 0
	for i := 0; i < 30; i++ {
		e := keptTick(t, tk, &skipped)
		if e.RoundTrips != 1 || e.Commands != 1 || e.Renewed != 1 || e.Lost != 0 {
			t.Fatalf("tick %d: %+v; want one round trip renewing one lock", i, e)
		}
		ttl, err := m.RemainingTTL(bg())
		must(t, err)
		if ttl <= 0 {
			t.Fatalf("tick %d: TTL %v: the lease ran out", i, ttl)
		}
	}
	select {
	case <-h.Done():
		t.Fatalf("lost: %v", context.Cause(h.Context()))
	default:
	}
	must(t, h.Unlock(bg()))
}

// lossCase injects a fault that takes the lock away from its holder.
type lossCase struct {
	name   string
	reason string // a word of the LostError's reason
	kind   observe.LossKind
	fault  func(t *testing.T, env *lossEnv)
	heal   func(t *testing.T, env *lossEnv)
}

type lossEnv struct {
	c    *lock.Client
	name string
	srv  *integration.Server
}

func TestWatchdogReportsLoss(t *testing.T) {
	cases := []lossCase{
		{name: "DEL", reason: "no longer held", kind: observe.LossNotHeld, fault: func(t *testing.T, e *lossEnv) {
			do(t, raw(t, e.srv), "DEL", e.name)
		}},
		{name: "FLUSHALL", reason: "no longer held", kind: observe.LossNotHeld, fault: func(t *testing.T, e *lossEnv) {
			do(t, raw(t, e.srv), "FLUSHALL")
		}},
		{name: "Redisson takes over after a force unlock", reason: "no longer held", kind: observe.LossNotHeld, fault: func(t *testing.T, e *lossEnv) {
			rc := raw(t, e.srv)
			do(t, rc, "EVAL", "if redis.call('del', KEYS[1]) == 1 then redis.call('publish', KEYS[2], ARGV[1]); return 1 end return 0",
				"2", e.name, "redisson_lock__channel:{"+e.name+"}", "0")
			if ok, _ := newRedisson(t, rc).lock(e.name, 1, time.Minute); !ok {
				t.Fatal("the Redisson stand-in could not take the lock")
			}
		}},
		{name: "server paused longer than the lease", reason: "lease ran out", kind: observe.LossRenewFailed, fault: func(t *testing.T, e *lossEnv) {
			must(t, e.srv.Pause(bg()))
		}, heal: func(t *testing.T, e *lossEnv) {
			must(t, e.srv.Resume(bg()))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := integrationRedis(t)
			obs, tk := ticks()
			c := newClient(t, lock.Config{WatchdogTimeout: shortLease, RenewInterval: shortInterval, Observer: obs}, srv)
			env := &lossEnv{c: c, name: name(t), srv: srv}
			h, err := c.Mutex(env.name).Lock(bg())
			must(t, err)
			nextTick(t, tk) // the watchdog is ticking

			tc.fault(t, env)
			// The loss is reported by the first tick after the fault (or
			// the one after, if a tick was in flight while it happened).
			sawLoss := false
			for i := 0; i < 2 && !sawLoss; i++ {
				select {
				case e := <-tk:
					sawLoss = e.Lost == 1
				case <-h.Done():
					sawLoss = true
				}
			}
			if !sawLoss {
				t.Fatal("two ticks after the fault, no loss was reported")
			}
			<-h.Done()
			if tc.heal != nil {
				tc.heal(t, env)
			}
			cause := context.Cause(h.Context())
			var lost *lock.LostError
			if !errors.Is(cause, lock.ErrLockLost) || !errors.As(cause, &lost) {
				t.Fatalf("cause %v, want a *LostError", cause)
			}
			if lost.Addr != c.Addr() || lost.Name != env.name || lost.Kind != tc.kind || !strings.Contains(lost.Error(), tc.reason) {
				t.Fatalf("LostError %q does not name master %s, lock and reason %q", lost, c.Addr(), tc.reason)
			}
			if err := h.Unlock(bg()); !errors.Is(err, lock.ErrLockLost) && !errors.Is(err, lock.ErrNotHeld) {
				t.Fatalf("Unlock after the loss = %v, want ErrLockLost", err)
			}
		})
	}
}

// After Unlock, and after Close, the client sends no renewal: counted on
// the server with INFO commandstats, against the ticks of another client
// whose renewals are the only EVALSHAs expected.
func TestNoRenewalAfterUnlockOrClose(t *testing.T) {
	for _, viaClose := range []bool{false, true} {
		t.Run("close="+strconv.FormatBool(viaClose), func(t *testing.T) {
			srv := integrationRedis(t)
			rc := raw(t, srv)
			clockObs, clock := ticks()
			ref := newClient(t, lock.Config{WatchdogTimeout: 3 * time.Second, RenewInterval: time.Second, Observer: clockObs}, srv)
			refHeld, err := ref.Mutex(name(t)).Lock(bg())
			must(t, err)

			obs, tk := ticks()
			c := newClient(t, lock.Config{WatchdogTimeout: shortLease, RenewInterval: shortInterval, Observer: obs}, srv)
			h, err := c.Mutex(name(t)).Lock(bg())
			must(t, err)
			nextTick(t, tk)
			if viaClose {
				must(t, c.Close(bg()))
			} else {
				must(t, h.Unlock(bg()))
			}

			<-clock
			before := evalshaCalls(t, rc)
			const n = 3
			for i := 0; i < n; i++ {
				<-clock
			}
			after := evalshaCalls(t, rc)
			if after-before != n {
				t.Fatalf("%d EVALSHA calls over %d ticks of the reference client: the released lock is still renewed", after-before, n)
			}
			must(t, refHeld.Unlock(bg()))
		})
	}
}

func evalshaCalls(t testing.TB, rc rueidis.Client) int64 {
	t.Helper()
	info, err := do(t, rc, "INFO", "commandstats").ToString()
	must(t, err)
	for _, line := range strings.Split(info, "\n") {
		if strings.HasPrefix(line, "cmdstat_evalsha:calls=") {
			v := strings.TrimPrefix(line, "cmdstat_evalsha:calls=")
			v = v[:strings.IndexByte(v, ',')]
			n, err := strconv.ParseInt(v, 10, 64)
			must(t, err)
			return n
		}
	}
	return 0
}
