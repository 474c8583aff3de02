package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	rs "github.com/rlock-go/rlock/internal/redissonstandin"
	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/observe"
	"github.com/rlock-go/rlock/reentrant"
)

// A spin lock has the plain lock's layout (the hash, its field and count,
// the lease), its release and force unlock publish nothing, and
// its waiter in another process subscribes to nothing: it polls, and gets
// the lock after the release with no message.
func TestSpinMutexPublishesNothingAndPolls(t *testing.T) {
	holder := newClient(t, lock.Config{})
	wc := newWakeCounter()
	waiter := newClient(t, lock.Config{Observer: wc.observer()})
	rc := raw(t)
	n := name(t)
	channel := reentrant.ChannelName(n)

	msgs := subscribe(t, channel)

	h, err := holder.SpinMutex(n, lock.SpinBackoff{}).Lock(bg())
	must(t, err)
	field := reentrant.Field(holder.ID(), h.Owner())
	if got := hgetInt(t, rc, n, field); got != 1 {
		t.Fatalf("hold count %d, want 1 in field %s", got, field)
	}
	if pttl, err := do(t, rc, "PTTL", n).AsInt64(); err != nil || pttl <= 0 || pttl > 30000 {
		t.Fatalf("PTTL %d, %v: want the 30 s lease", pttl, err)
	}

	got := make(chan error, 1)
	go func() {
		h2, err := waiter.SpinMutex(n, lock.ConstantSpin(5*time.Millisecond)).Lock(bg())
		if err == nil {
			err = h2.Unlock(bg())
		}
		got <- err
	}()
	for wc.count(observe.WakePoll) < 2 {
		<-wc.woken // the waiter slept and tried again
	}
	if subs := numsub(t, rc, channel); subs != 1 {
		t.Fatalf("%d subscribers of the unlock channel while a spin waiter waits, want only the test's", subs)
	}
	must(t, h.Unlock(bg()))
	must(t, <-got)
	if exists(t, rc, n) {
		t.Fatal("the lock is still held")
	}
	if wc.count(observe.WakeMessage) != 0 {
		t.Fatal("the spin waiter was woken by a message")
	}
	// A spin lock's ForceUnlock only deletes, as Redisson's.
	h, err = holder.SpinMutex(n, lock.SpinBackoff{}).Lock(bg())
	must(t, err)
	if ok, err := holder.SpinMutex(n, lock.SpinBackoff{}).ForceUnlock(bg()); err != nil || !ok {
		t.Fatalf("ForceUnlock = %v, %v", ok, err)
	}
	if err := h.Unlock(bg()); err == nil {
		t.Fatal("Unlock after ForceUnlock succeeded")
	}
	// Nothing was published by the releases nor the force unlock: the
	// first message on the channel is the test's own.
	must(t, do(t, rc, "PUBLISH", channel, "marker").Error())
	if m := <-msgs; m.Message != "marker" {
		t.Fatalf("a spin lock's release published %q", m.Message)
	}
}

// A spin lock and a plain lock of the same name are one lock: each
// excludes the other, and a spin holder's re-entry counts as the plain
// lock's does.
func TestSpinMutexAndMutexExcludeEachOther(t *testing.T) {
	a, b := newClient(t, lock.Config{}), newClient(t, lock.Config{})
	rc := raw(t)
	n := name(t)
	h, err := a.SpinMutex(n, lock.SpinBackoff{}).Lock(bg())
	must(t, err)
	if _, err := b.Mutex(n).TryLock(bg()); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("plain TryLock while a spin lock holds = %v, want ErrNotAcquired", err)
	}
	h2, err := a.SpinMutex(n, lock.SpinBackoff{}).Lock(h.Context())
	must(t, err)
	if got := hgetInt(t, rc, n, reentrant.Field(a.ID(), h.Owner())); got != 2 {
		t.Fatalf("hold count after re-entry %d, want 2", got)
	}
	must(t, h2.Unlock(bg()))
	must(t, h.Unlock(bg()))

	p, err := b.Mutex(n).Lock(bg())
	must(t, err)
	if _, err := a.SpinMutex(n, lock.SpinBackoff{}).TryLock(bg(), lock.Wait(20*time.Millisecond)); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("spin TryLock while a plain lock holds = %v, want ErrNotAcquired", err)
	}
	must(t, p.Unlock(bg()))
}

// A bad SpinBackoff is ErrInvalid from every method, and leaves nothing
// in Redis.
func TestSpinBackoffBadInput(t *testing.T) {
	c := newClient(t, lock.Config{})
	rc := raw(t)
	n := name(t)
	for _, b := range []lock.SpinBackoff{
		{Initial: -time.Millisecond},
		{Max: -1},
		{Multiplier: -2},
		{Initial: time.Second, Max: time.Millisecond},
		{Max: 2 * time.Hour},
	} {
		m := c.SpinMutex(n, b)
		if _, err := m.Lock(bg()); !errors.Is(err, lock.ErrInvalid) {
			t.Fatalf("Lock with %+v = %v, want ErrInvalid", b, err)
		}
		if _, err := m.TryLock(bg()); !errors.Is(err, lock.ErrInvalid) {
			t.Fatalf("TryLock with %+v = %v, want ErrInvalid", b, err)
		}
	}
	if ks := keys(t, rc, n); len(ks) != 0 {
		t.Fatalf("keys left: %v", ks)
	}
}

// rlock's spin lock against Redisson's (the stand-in, its scripts taken
// from Redisson's source): each excludes the other, a Java re-entry counts
// as Java reads it, a Java spin waiter polling gets the lock after
// rlock's release (which published nothing), and an rlock spin waiter
// gets it after Java's release, which publishes nothing either.
func TestSpinMutexInteroperatesWithRedissonsSpinLock(t *testing.T) {
	c := newClient(t, lock.Config{})
	rc := raw(t)
	java := rs.New(rc, rs.Options{})
	n := name(t)
	js := java.SpinLock(n)

	// Java holds, re-enters; rlock's spin waiter waits and gets it after
	// Java's last unlock.
	for range 2 {
		a, err := js.TryAcquire(bg(), 7, 0)
		must(t, err)
		if !a.Acquired {
			t.Fatalf("Java spin acquire refused: TTL %d", a.TTL)
		}
	}
	if got := hgetInt(t, rc, n, java.Field(7)); got != 2 {
		t.Fatalf("Java re-entry count %d, want 2", got)
	}
	if _, err := c.SpinMutex(n, lock.SpinBackoff{}).TryLock(bg()); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("rlock spin TryLock while Java holds = %v, want ErrNotAcquired", err)
	}
	got := make(chan error, 1)
	go func() {
		h, err := c.SpinMutex(n, lock.ConstantSpin(5*time.Millisecond)).Lock(bg())
		if err == nil {
			err = h.Unlock(bg())
		}
		got <- err
	}()
	for range 2 {
		if r, err := js.Unlock(bg(), 7); err != nil || r == rs.NotHeld {
			t.Fatalf("Java unlock = %v, %v", r, err)
		}
	}
	must(t, <-got)

	// rlock holds; a Java spin waiter polls until rlock releases.
	h, err := c.SpinMutex(n, lock.SpinBackoff{}).Lock(bg())
	must(t, err)
	if a, err := js.TryAcquire(bg(), 8, 0); err != nil || a.Acquired || a.TTL <= 0 {
		t.Fatalf("Java spin acquire while rlock holds = %+v, %v; want refused with the TTL", a, err)
	}
	jctx, cancel := context.WithTimeout(bg(), 10*time.Second)
	defer cancel()
	jgot := make(chan error, 1)
	go func() { jgot <- js.Lock(jctx, 8, 0, rs.ExponentialBackoff{}.Policy(nil)) }()
	must(t, h.Unlock(bg()))
	must(t, <-jgot)
	if got := hgetInt(t, rc, n, java.Field(8)); got != 1 {
		t.Fatalf("Java's hold count %d after it acquired, want 1", got)
	}
	if r, err := js.Unlock(bg(), 8); err != nil || r != rs.Released {
		t.Fatalf("Java unlock = %v, %v", r, err)
	}
}
