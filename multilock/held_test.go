package multilock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/multilock"
	"github.com/rlock-go/rlock/observe"
	"github.com/rlock-go/rlock/reentrant"
)

// holdCounts returns the hold count of field on every master (0: none).
func holdCounts(t *testing.T, rs []rueidis.Client, key, field string) []int64 {
	t.Helper()
	out := make([]int64, len(rs))
	for i, rc := range rs {
		v, err := rc.Do(bg(t), rc.B().Hget().Key(key).Field(field).Build()).AsInt64()
		if err != nil && !rueidis.IsRedisNil(err) {
			t.Fatalf("HGET on master %d: %v", i, err)
		}
		out[i] = v
	}
	return out
}

func allEqual(xs []int64, want int64) bool {
	for _, x := range xs {
		if x != want {
			return false
		}
	}
	return true
}

func TestReentryAcrossMasters(t *testing.T) {
	cs := clients(t, shared, lock.Config{})
	rs := raws(t, shared)
	n := name(t)
	l := multilock.NewRedLock(mutexes(cs, n)...)

	outer, err := l.Lock(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	inner, err := l.TryLock(outer.Context())
	if err != nil {
		t.Fatalf("re-entry through Held.Context(): %v", err)
	}
	// Both rounds returned once a quorum granted; the later grants join
	// their Helds.
	multilock.WaitBackground(l)
	if inner.Owner() != outer.Owner() {
		t.Errorf("re-entry owner %d, want %d", inner.Owner(), outer.Owner())
	}
	counts := func() []int64 {
		out := make([]int64, len(cs))
		for i, c := range cs {
			out[i] = holdCounts(t, rs[i:i+1], n, reentrant.Field(c.ID(), outer.Owner()))[0]
		}
		return out
	}
	if got := counts(); !allEqual(got, 2) {
		t.Errorf("hold counts after re-entry %v, want 2 on every master", got)
	}
	if err := inner.Unlock(bg(t)); err != nil {
		t.Fatalf("inner Unlock: %v", err)
	}
	if got := counts(); !allEqual(got, 1) {
		t.Errorf("hold counts after the inner Unlock %v, want 1 on every master", got)
	}
	if outer.Context().Err() != nil {
		t.Errorf("outer context ended with the inner Unlock: %v", context.Cause(outer.Context()))
	}
	if inner.Context().Err() == nil {
		t.Error("inner context still live after its Unlock")
	}
	if err := outer.Unlock(bg(t)); err != nil {
		t.Fatalf("outer Unlock: %v", err)
	}
	if on := exists(t, rs, n); count(on) != 0 {
		t.Errorf("key left on masters %v after the last Unlock", on)
	}
}

// lossRecorder collects the masters where a Client saw a lock lost.
type lossRecorder struct {
	mu   sync.Mutex
	seen map[string]bool
	ch   chan string
}

func newLossRecorder() *lossRecorder {
	return &lossRecorder{seen: map[string]bool{}, ch: make(chan string, 16)}
}

func (r *lossRecorder) observer() *observe.Observer {
	return &observe.Observer{Loss: func(_ context.Context, e observe.Loss) { r.ch <- e.Addr }}
}

func (r *lossRecorder) wait(t *testing.T, addr string) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		r.mu.Lock()
		ok := r.seen[addr]
		r.mu.Unlock()
		if ok {
			return
		}
		select {
		case a := <-r.ch:
			r.mu.Lock()
			r.seen[a] = true
			r.mu.Unlock()
		case <-timeout:
			t.Fatalf("no loss reported on %s", addr)
		}
	}
}

func TestQuorumLossCancelsHolder(t *testing.T) {
	rec := newLossRecorder()
	// Renewals every 500ms find each DEL soon, and a loaded machine
	// (renewals unanswered for a 300ms lease) loses no master on its own.
	cs := clients(t, shared, lock.Config{WatchdogTimeout: 1500 * time.Millisecond, Observer: rec.observer()})
	rs := raws(t, shared)
	n := name(t)
	l := multilock.NewRedLock(mutexes(cs, n)...)
	h, err := l.Lock(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	// Lock returned once a quorum granted: wait for the other masters'
	// grants to join h, so that none comes after a DEL below, re-creates
	// the key and hides that master's loss.
	multilock.WaitBackground(l)
	if got := h.Masters(); got != 5 {
		t.Fatalf("Masters() = %d once every master answered, want 5", got)
	}
	del := func(i int) {
		if err := rs[i].Do(bg(t), rs[i].B().Del().Key(n).Build()).Error(); err != nil {
			t.Fatalf("DEL on master %d: %v", i, err)
		}
		rec.wait(t, cs[i].Addr()) // that master's watchdog noticed
	}

	// Two masters of five lost: three still hold it, a quorum.
	del(0)
	del(1)
	if err := h.Context().Err(); err != nil {
		t.Fatalf("holder's context ended with 3 of 5 masters still holding: %v", context.Cause(h.Context()))
	}
	// A third: the quorum is lost.
	del(2)
	select {
	case <-h.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("holder's context still live with 2 of 5 masters holding")
	}
	cause := context.Cause(h.Context())
	var lost *lock.LostError
	if !errors.Is(cause, lock.ErrLockLost) || !errors.As(cause, &lost) {
		t.Fatalf("cause %v: want a *lock.LostError", cause)
	}
	for _, c := range cs[:3] {
		if !strings.Contains(lost.Addr, c.Addr()) {
			t.Errorf("LostError.Addr %q does not name lost master %s", lost.Addr, c.Addr())
		}
	}
	if got := h.Masters(); got != 2 {
		t.Errorf("Masters() = %d after the loss, want 2", got)
	}
	// Unlock reports the loss and releases the masters still holding.
	if err := h.Unlock(bg(t)); !errors.Is(err, lock.ErrLockLost) {
		t.Errorf("Unlock after the loss: %v, want ErrLockLost", err)
	}
	if on := exists(t, rs, n); count(on) != 0 {
		t.Errorf("key left on masters %v after Unlock", on)
	}
	if err := h.Unlock(bg(t)); !errors.Is(err, lock.ErrLockLost) {
		t.Errorf("second Unlock: %v, want ErrLockLost again", err)
	}
}

func TestPartitionLosesQuorum(t *testing.T) {
	servers := integration.Masters(t, 5, integration.Options{})
	cs := clients(t, servers, lock.Config{WatchdogTimeout: 300 * time.Millisecond})
	n := name(t)
	l := multilock.NewRedLock(mutexes(cs, n)...)
	h, err := l.Lock(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	// Every master's grant joins h before the partition (Lock returned
	// once a quorum granted): the two left hold it, and Unlock releases
	// them, not a worker after the check below.
	multilock.WaitBackground(l)
	// Renewals to three masters fail from now on: each is lost once its
	// lease must have run out, and with the third the quorum is lost.
	for _, s := range servers[:3] {
		if err := s.Partition(bg(t)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Heal(context.Background()) })
	}
	select {
	case <-h.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("holder's context still live with 3 of 5 masters partitioned away")
	}
	if cause := context.Cause(h.Context()); !errors.Is(cause, lock.ErrLockLost) || !errors.Is(cause, lock.ErrUnavailable) {
		t.Errorf("cause %v: want ErrLockLost after failed renewals (ErrUnavailable)", cause)
	}
	if err := h.Unlock(bg(t)); !errors.Is(err, lock.ErrLockLost) {
		t.Errorf("Unlock: %v, want ErrLockLost", err)
	}
	if on := exists(t, raws(t, servers[3:]), n); count(on) != 0 {
		t.Errorf("key left on the reachable masters %v after Unlock", on)
	}
}

func TestClientCloseCountsAsLoss(t *testing.T) {
	cs := clients(t, shared[:3], lock.Config{})
	l := multilock.NewRedLock(mutexes(cs, name(t))...)
	h, err := l.Lock(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Unlock(context.Background())
	multilock.WaitBackground(l) // held on all three: closing two loses the quorum
	if err := cs[0].Close(bg(t)); err != nil {
		t.Fatal(err)
	}
	if err := cs[1].Close(bg(t)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("holder's context still live with 2 of 3 Clients closed")
	}
	if cause := context.Cause(h.Context()); !errors.Is(cause, lock.ErrLockLost) || !errors.Is(cause, lock.ErrClosed) {
		t.Errorf("cause %v: want ErrLockLost wrapping ErrClosed", cause)
	}
}
