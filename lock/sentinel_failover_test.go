package lock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/observe"
	"github.com/rlock-go/rlock/reentrant"
)

// Failovers of a Redis Sentinel deployment while locks are held and
// waited for (issue 17); the deployment and helpers are sentinel_test.go's.

// wakes records a Client's wake-ups and tells when it first waits.
type wakes struct {
	mu      sync.Mutex
	reasons []observe.WakeReason
	at      []time.Time
	waiting chan struct{}
	once    sync.Once
}

func (w *wakes) observer() *observe.Observer {
	w.waiting = make(chan struct{})
	return &observe.Observer{
		Waiting: func(context.Context, observe.Waiting) { w.once.Do(func() { close(w.waiting) }) },
		WakeUp: func(_ context.Context, e observe.WakeUp) {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.reasons = append(w.reasons, e.Reason)
			w.at = append(w.at, time.Now())
		},
	}
}

// since returns the reasons of the wake-ups after t.
func (w *wakes) since(t time.Time) []observe.WakeReason {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []observe.WakeReason
	for i, at := range w.at {
		if at.After(t) {
			out = append(out, w.reasons[i])
		}
	}
	return out
}

// acquired is the outcome of a background Lock.
type acquired struct {
	h   *lock.Held
	err error
	at  time.Time
}

func lockInBackground(ctx context.Context, m *lock.Mutex) <-chan acquired {
	ch := make(chan acquired, 1)
	go func() {
		h, err := m.Lock(ctx)
		ch <- acquired{h, err, time.Now()}
	}()
	return ch
}

// TestSentinelFailoverKeepsHoldAndWaiter: across SENTINEL FAILOVER, with
// the lock on the replicas before it (WAIT), a held lock stays held: its
// watchdog renews it on the new master for more than a lease, with the
// scripts the Client loaded there; the waiter's subscription moves to
// the new master, and the holder's Unlock there wakes it at once.
func TestSentinelFailoverKeepsHoldAndWaiter(t *testing.T) {
	g := sentinelGroup(t)
	ctx := sctx(t)
	const lease, renew = 6 * time.Second, time.Second
	cfg := viaSentinel(g, lock.Config{WatchdogTimeout: lease, RenewInterval: renew})
	holder := newClient(t, cfg)
	var w wakes
	wcfg := cfg
	wcfg.Observer = w.observer()
	waiter := newClient(t, wcfg)
	old, err := g.Master(ctx)
	must(t, err)
	oldRC := integration.NewClient(t, old.DirectAddr(), serverPW)

	n := name(t)
	channel := reentrant.ChannelName(n)
	h, err := holder.Mutex(n).Lock(ctx)
	must(t, err)
	got := lockInBackground(ctx, waiter.Mutex(n))
	select {
	case <-w.waiting:
	case r := <-got:
		t.Fatalf("the waiter did not wait: %+v", r)
	case <-ctx.Done():
		t.Fatal("the waiter never waited")
	}
	if v, err := do(t, oldRC, "WAIT", "2", "5000").AsInt64(); err != nil || v != 2 {
		t.Fatalf("WAIT: %d, %v", v, err)
	}
	for _, s := range g.Servers() {
		if s != old && scriptOn(t, integration.NewClient(t, s.DirectAddr(), serverPW), reentrant.RenewScript.SHA1()) {
			t.Fatalf("replica %s has the renew script before the failover: the test would not show that it is loaded", s.DirectAddr())
		}
	}

	m, err := g.Failover(ctx)
	must(t, err)
	failedOver := time.Now()
	newRC := integration.NewClient(t, m.DirectAddr(), serverPW)
	eventually(t, "both Clients on the new master", func() bool {
		return holder.Addr() == m.DirectAddr() && waiter.Addr() == m.DirectAddr()
	})
	eventually(t, "the scripts on the new master", func() bool { return scriptOn(t, newRC, reentrant.RenewScript.SHA1()) })
	eventually(t, "the waiter's subscription on the new master", func() bool { return numsubOn(t, newRC, channel) == 1 })
	if n := numsubOn(t, oldRC, channel); n != 0 {
		t.Fatalf("%d subscriptions left on the old master", n)
	}
	if !contains(w.since(failedOver), observe.WakeReconnect) {
		t.Fatalf("the waiter was not woken by its subscription's move: %v", w.since(failedOver))
	}

	// More than a lease on the new master: the watchdog renews it there.
	t.Log("holding for more than a lease after the failover")
	select {
	case <-h.Done():
		t.Fatalf("hold lost after the failover: %v", context.Cause(h.Context()))
	case r := <-got:
		t.Fatalf("the waiter acquired while the lock was held: %+v", r)
	case <-time.After(time.Until(failedOver.Add(lease + renew))): // the fault's timing: an absence is observed
	}
	if c := hgetInt(t, newRC, n, field(holder, h)); c != 1 {
		t.Fatalf("hold count %d on the new master after a lease, want 1", c)
	}
	if ttl := pttl(t, newRC, n); ttl <= 0 || ttl > lease {
		t.Fatalf("TTL %v on the new master after a lease: not renewed there", ttl)
	}

	unlocked := time.Now()
	must(t, h.Unlock(ctx))
	var r acquired
	select {
	case r = <-got:
	case <-ctx.Done():
		t.Fatal("the waiter was never granted the lock")
	}
	must(t, r.err)
	if waited := r.at.Sub(unlocked); waited > lease/2 {
		t.Fatalf("the waiter got the lock %v after the Unlock: it waited out the lease", waited)
	}
	if after := w.since(unlocked); len(after) == 0 || after[len(after)-1] != observe.WakeMessage {
		t.Fatalf("wake-ups after the Unlock %v, want the release's message last", after)
	}
	if c := hgetInt(t, newRC, n, field(waiter, r.h)); c != 1 {
		t.Fatalf("waiter's hold count %d on the new master, want 1", c)
	}
	must(t, r.h.Unlock(ctx))
}

func contains(rs []observe.WakeReason, r observe.WakeReason) bool {
	for _, x := range rs {
		if x == r {
			return true
		}
	}
	return false
}

// TestSentinelKilledMaster: the master is killed while a lock is held and
// another Client waits. Without replica sync the key may not have reached
// the replica that is promoted, so exclusion across the failover is not
// assumed; what the Client guarantees is checked: either the hold goes on
// (renewed on the new master, and the waiter gets the lock only after the
// Unlock), or its loss is signalled (the Held's context ends with
// ErrLockLost) no later than a renewal after the waiter could take it.
func TestSentinelKilledMaster(t *testing.T) {
	g := sentinelGroup(t)
	ctx := sctx(t)
	// A lease longer than a failover takes (DownAfter 2s, an election,
	// the promotion): the hold goes on if the key reached the replica.
	const lease, renew = 8 * time.Second, 500 * time.Millisecond
	cfg := viaSentinel(g, lock.Config{WatchdogTimeout: lease, RenewInterval: renew, CommandTimeout: time.Second})
	holder := newClient(t, cfg)
	var w wakes
	wcfg := cfg
	wcfg.Observer = w.observer()
	waiter := newClient(t, wcfg)

	n := name(t)
	h, err := holder.Mutex(n).Lock(ctx)
	must(t, err)
	got := lockInBackground(ctx, waiter.Mutex(n))
	select {
	case <-w.waiting:
	case r := <-got:
		t.Fatalf("the waiter did not wait: %+v", r)
	}

	old, err := g.KillMaster(ctx)
	must(t, err)
	m, err := g.WaitNewMaster(ctx, old)
	must(t, err)
	newRC := integration.NewClient(t, m.DirectAddr(), serverPW)
	eventually(t, "the holder on the new master", func() bool { return holder.Addr() == m.DirectAddr() })

	var r acquired
	gotIt := false
	select {
	case <-h.Done():
		// Lost: signalled as a loss, and the waiter may have the lock.
		if !lostCause(h) {
			t.Fatalf("the hold ended with %v, want ErrLockLost", context.Cause(h.Context()))
		}
		lostAt := time.Now()
		t.Logf("hold lost across the failover: %v", context.Cause(h.Context()))
		if err := h.Unlock(ctx); !errors.Is(err, lock.ErrLockLost) {
			t.Fatalf("Unlock of a lost hold: %v, want ErrLockLost", err)
		}
		select {
		case r = <-got:
		case <-ctx.Done():
			t.Fatal("the waiter never got the lost lock")
		}
		must(t, r.err)
		if r.at.Before(lostAt) && lostAt.Sub(r.at) > renew+cfg.CommandTimeout+time.Second {
			t.Fatalf("the waiter held the lock %v before the holder heard of its loss", lostAt.Sub(r.at))
		}
	case r = <-got:
		gotIt = true
	case <-time.After(lease + renew): // the fault's timing: an absence is observed
	}
	if gotIt {
		// The waiter took it while the holder's context was alive: only
		// an unsynced failover allows that, and the holder must hear of
		// it at its next renewal.
		must(t, r.err)
		select {
		case <-h.Done():
			if !lostCause(h) {
				t.Fatalf("the hold ended with %v, want ErrLockLost", context.Cause(h.Context()))
			}
		case <-time.After(lease):
			t.Fatal("the waiter has the lock and the holder was never told of its loss")
		}
	} else if r.h == nil {
		// The hold went on: renewed on the new master, so the waiter
		// could not take it; it gets it at the Unlock.
		if c := hgetInt(t, newRC, n, field(holder, h)); c != 1 || pttl(t, newRC, n) <= 0 {
			t.Fatalf("the hold is alive but not on the new master (count %d)", c)
		}
		unlocked := time.Now()
		must(t, h.Unlock(ctx))
		select {
		case r = <-got:
		case <-ctx.Done():
			t.Fatal("the waiter was never granted the lock")
		}
		must(t, r.err)
		if r.at.Before(unlocked) {
			t.Fatal("the waiter got the lock before the Unlock of a hold that went on")
		}
	}
	if c := hgetInt(t, newRC, n, field(waiter, r.h)); c != 1 {
		t.Errorf("waiter's hold count %d on the new master %s, want 1; waiter on %s, acquired at %v, gotIt %v, holder lost %v",
			c, m.DirectAddr(), waiter.Addr(), r.at.Format("15:04:05.000"), gotIt, lostCause(h))
		for _, s := range g.Servers() {
			if s == old {
				continue
			}
			src := integration.NewClient(t, s.DirectAddr(), serverPW)
			role, _ := do(t, src, "ROLE").ToArray()
			r0, _ := role[0].ToString()
			all, _ := do(t, src, "HGETALL", n).AsStrMap()
			t.Errorf("%s: role %s, %s = %v, PTTL %v", s.DirectAddr(), r0, n, all, pttl(t, src, n))
		}
		t.Error(g.Logs(40))
		t.FailNow()
	}
	must(t, r.h.Unlock(ctx))
}
