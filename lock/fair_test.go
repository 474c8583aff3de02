package lock_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/integration"
	rs "github.com/rlock-go/rlock/internal/redissonstandin"
	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/observe"
	"github.com/rlock-go/rlock/reentrant"
)

// Literal names from RedissonFairLock.java (3.52.0 and 4.7.0 alike):
// "redisson_lock_queue:{name}", "redisson_lock_timeout:{name}", and the
// waiter's channel "redisson_lock__channel:{name}:<field>".
func fairKeys(n string) (queue, timeouts string) {
	return "redisson_lock_queue:{" + n + "}", "redisson_lock_timeout:{" + n + "}"
}

func lrange(t *testing.T, rc rueidis.Client, key string) []string {
	t.Helper()
	v, err := do(t, rc, "LRANGE", key, "0", "-1").AsStrSlice()
	must(t, err)
	return v
}

func zscore(t *testing.T, rc rueidis.Client, key, member string) int64 {
	t.Helper()
	v, err := do(t, rc, "ZSCORE", key, member).AsFloat64()
	must(t, err)
	return int64(v)
}

// javaFairLock is Redisson's fair lock() loop on the stand-in, for thread,
// whose first attempt (which queued it) the caller made: it sleeps until
// its own channel wakes it (or for the wait the last attempt reported),
// tries again, and when it gets the lock reports it on got and unlocks.
func javaFairLock(ctx context.Context, fl *rs.FairLock, thread uint64, msgs <-chan rueidis.PubSubMessage, ttl int64, got chan<- string, who string) error {
	for {
		t := time.NewTimer(time.Duration(max(ttl, 1)) * time.Millisecond)
		select {
		case <-msgs:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		t.Stop()
		a, err := fl.TryAcquire(ctx, thread, 0, 0)
		if err != nil {
			return err
		}
		if a.Acquired {
			got <- who
			_, err := fl.Unlock(ctx, thread)
			return err
		}
		ttl = a.TTL
	}
}

// Waiters of both sides form one FIFO queue in Redisson's layout: the
// fields in the queue list in the order they came, each timeout the one
// ahead's plus Redisson's 5-minute thread wait time, and the lock granted
// in that order, each waiter woken by a message on its own channel.
func TestFairMutexOneQueueAcrossSides(t *testing.T) {
	holder := newClient(t, lock.Config{})
	wc := newWakeCounter()
	goSide := newClient(t, lock.Config{Observer: wc.observer()})
	rc := raw(t)
	java := rs.New(rc, rs.Options{})
	n := name(t)
	queue, timeouts := fairKeys(n)
	fl := java.FairLock(n)
	ctx, cancel := context.WithTimeout(bg(), 30*time.Second)
	defer cancel()

	h, err := holder.FairMutex(n).Lock(bg())
	must(t, err)
	if got := hgetInt(t, rc, n, reentrant.Field(holder.ID(), h.Owner())); got != 1 {
		t.Fatalf("hold count %d, want 1", got)
	}

	got := make(chan string, 4)
	errs := make(chan error, 4)
	var want []string
	goWaiter := func(who string) {
		octx := lock.WithOwner(ctx)
		owner, _ := lock.OwnerFrom(octx)
		want = append(want, reentrant.Field(goSide.ID(), owner))
		go func() {
			w, err := goSide.FairMutex(n).Lock(octx)
			if err == nil {
				got <- who
				err = w.Unlock(bg())
			}
			errs <- err
		}()
		<-wc.waiting // its attempt found the lock held: it is queued
	}
	javaWaiter := func(who string, thread uint64) {
		want = append(want, java.Field(thread))
		msgs := subscribe(t, fl.WaiterChannel(thread))
		a, err := fl.TryAcquire(ctx, thread, 0, 0)
		must(t, err)
		if a.Acquired {
			t.Fatalf("%s acquired a held fair lock", who)
		}
		go func() { errs <- javaFairLock(ctx, fl, thread, msgs, a.TTL, got, who) }()
	}
	goWaiter("go1")
	javaWaiter("java2", 2)
	goWaiter("go3")
	javaWaiter("java4", 4)

	if q := lrange(t, rc, queue); !slices.Equal(q, want) {
		t.Fatalf("queue %q, want %q", q, want)
	}
	for i := 1; i < len(want); i++ {
		if d := zscore(t, rc, timeouts, want[i]) - zscore(t, rc, timeouts, want[i-1]); d != rs.FairLockWaitTimeout.Milliseconds() {
			t.Fatalf("timeout of waiter %d is %d ms after the one ahead, want Redisson's %d", i, d, rs.FairLockWaitTimeout.Milliseconds())
		}
	}

	must(t, h.Unlock(bg()))
	var order []string
	for ended := 0; ended < 4; {
		select {
		case who := <-got:
			order = append(order, who)
		case err := <-errs:
			must(t, err)
			ended++
		}
	}
	for len(order) < 4 {
		order = append(order, <-got)
	}
	if !slices.Equal(order, []string{"go1", "java2", "go3", "java4"}) {
		t.Fatalf("granted in the order %v, want the queue's", order)
	}
	if wc.count(observe.WakeTimeout) != 0 || wc.count(observe.WakeMessage) < 2 {
		t.Fatalf("Go waiters woken by %d messages and %d timeouts, want each by its message", wc.count(observe.WakeMessage), wc.count(observe.WakeTimeout))
	}
	if exists(t, rc, n) || exists(t, rc, timeouts) {
		t.Fatal("the lock or the timeouts are left")
	}
	if q := lrange(t, rc, queue); len(q) != 0 {
		t.Fatalf("queue left: %q", q)
	}
}

// A TryLock that gives up leaves the queue as Redisson's acquireFailed
// does: its field out of the list and the zset, and the waiter behind it
// moved up by the wait it queued with.
func TestFairMutexTryLockLeavesTheQueue(t *testing.T) {
	holder := newClient(t, lock.Config{})
	wc := newWakeCounter()
	goSide := newClient(t, lock.Config{Observer: wc.observer()})
	rc := raw(t)
	java := rs.New(rc, rs.Options{})
	n := name(t)
	queue, timeouts := fairKeys(n)

	h, err := holder.FairMutex(n).Lock(bg())
	must(t, err)
	wait := 500 * time.Millisecond
	done := make(chan error, 1)
	go func() {
		_, err := goSide.FairMutex(n).TryLock(bg(), lock.Wait(wait))
		done <- err
	}()
	<-wc.waiting
	a, err := java.FairLock(n).TryAcquire(bg(), 9, 0, 0)
	must(t, err)
	if a.Acquired {
		t.Fatal("Java acquired a held lock")
	}
	before := zscore(t, rc, timeouts, java.Field(9))
	if err := <-done; !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("TryLock = %v, want ErrNotAcquired", err)
	}
	if q := lrange(t, rc, queue); !slices.Equal(q, []string{java.Field(9)}) {
		t.Fatalf("queue after the Go waiter gave up: %q, want only Java's", q)
	}
	if after := zscore(t, rc, timeouts, java.Field(9)); before-after != wait.Milliseconds() {
		t.Fatalf("the waiter behind moved up by %d ms, want the wait %d", before-after, wait.Milliseconds())
	}
	must(t, java.FairLock(n).CancelWait(bg(), 9, 0))
	must(t, h.Unlock(bg()))
}

// A waiter that stopped coming back is pruned once its timeout passed
// (by the client's clock): a Go acquire then gets the free lock.
func TestFairMutexPrunesAStaleWaiter(t *testing.T) {
	c := newClient(t, lock.Config{})
	rc := raw(t)
	stale := rs.New(rc, rs.Options{Now: func() time.Time { return time.Now().Add(-time.Hour) }})
	n := name(t)
	queue, timeouts := fairKeys(n)
	h, err := c.FairMutex(n).Lock(bg())
	must(t, err)
	if a, err := stale.FairLock(n).TryAcquire(bg(), 1, 0, 0); err != nil || a.Acquired {
		t.Fatalf("stale waiter's acquire = %+v, %v", a, err)
	}
	must(t, h.Unlock(bg()))
	h, err = c.FairMutex(n).TryLock(bg())
	if err != nil {
		t.Fatalf("TryLock with only a stale waiter queued = %v", err)
	}
	if q := lrange(t, rc, queue); len(q) != 0 {
		t.Fatalf("queue %q, want the stale waiter pruned", q)
	}
	if ks := keys(t, rc, timeouts); len(ks) != 0 {
		t.Fatalf("timeouts left: %v", ks)
	}
	must(t, h.Unlock(bg()))
}

// rlock holds; a Java fair waiter is woken on its own channel by rlock's
// release, and Java's re-entry counts as Java reads it; rlock's waiter is
// woken by Java's release.
func TestFairMutexWakesAndIsWokenByRedisson(t *testing.T) {
	wc := newWakeCounter()
	c := newClient(t, lock.Config{Observer: wc.observer()})
	rc := raw(t)
	java := rs.New(rc, rs.Options{})
	fl := java.FairLock(name(t))
	n := fl.Name()
	ctx, cancel := context.WithTimeout(bg(), 20*time.Second)
	defer cancel()

	h, err := c.FairMutex(n).Lock(bg())
	must(t, err)
	msgs := subscribe(t, fl.WaiterChannel(5))
	a, err := fl.TryAcquire(ctx, 5, 0, 0)
	must(t, err)
	if a.Acquired || a.TTL <= 0 {
		t.Fatalf("Java acquire while rlock holds = %+v", a)
	}
	must(t, h.Unlock(bg()))
	select {
	case m := <-msgs:
		if m.Message != reentrant.UnlockMessage {
			t.Fatalf("message %q, want %q", m.Message, reentrant.UnlockMessage)
		}
	case <-ctx.Done():
		t.Fatal("rlock's release did not wake the Java waiter at the head")
	}
	for range 2 {
		if a, err := fl.TryAcquire(ctx, 5, 0, 0); err != nil || !a.Acquired {
			t.Fatalf("Java acquire after the release = %+v, %v", a, err)
		}
	}
	if got := hgetInt(t, rc, n, java.Field(5)); got != 2 {
		t.Fatalf("Java's count after re-entry %d, want 2", got)
	}
	done := make(chan error, 1)
	go func() {
		h, err := c.FairMutex(n).Lock(ctx)
		if err == nil {
			err = h.Unlock(bg())
		}
		done <- err
	}()
	<-wc.waiting
	for range 2 {
		if r, err := fl.Unlock(ctx, 5); err != nil || r == rs.NotHeld {
			t.Fatalf("Java unlock = %v, %v", r, err)
		}
	}
	must(t, <-done)
	if wc.count(observe.WakeMessage) != 1 || wc.count(observe.WakeTimeout) != 0 {
		t.Fatalf("rlock's waiter woken by %d messages, %d timeouts; want one message", wc.count(observe.WakeMessage), wc.count(observe.WakeTimeout))
	}
}

// A fair waiter whose queueing acquire is answered by no reply (it ran:
// the field is queued) and whose call then ends must not stay queued:
// its request is settled first, then the field leaves. Without the leave
// a stale head would hold everyone back until its timeout (5 minutes).
// The call returns when its ctx ends (R3-8): the settle and the leave
// are the Client's, in the background, done well within a second here.
func TestFairMutexLostReplyThenGiveUpLeavesTheQueue(t *testing.T) {
	srv := integrationRedis(t)
	c := newClient(t, lock.Config{CommandTimeout: 100 * time.Millisecond}, srv)
	holder := newClient(t, lock.Config{}, srv)
	rc := raw(t, srv)
	n := name(t)
	queue, timeouts := fairKeys(n)
	h, err := holder.FairMutex(n).Lock(bg())
	must(t, err)
	inject(t, srv, integration.Rule{Match: integration.MatchFunc(func(cmd []string) bool {
		return len(cmd) > 2 && strings.EqualFold(cmd[0], "EVALSHA") && cmd[1] == reentrant.AcquireFairScript.SHA1()
	}), Action: integration.DropReply, Times: math.MaxInt})
	ctx, cancel := context.WithTimeout(bg(), 400*time.Millisecond)
	defer cancel()
	if _, err := c.FairMutex(n).Lock(ctx); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("Lock with every acquire reply lost = %v, want ErrNotAcquired", err)
	}
	// Polled: the background leave has no event of its own.
	eventually(t, "the waiter that gave up to leave the queue", func() bool { return len(lrange(t, rc, queue)) == 0 })
	if z, err := do(t, rc, "ZCARD", timeouts).AsInt64(); err != nil || z != 0 {
		t.Fatalf("%d timeouts left, %v", z, err)
	}
	must(t, h.Unlock(bg()))
}

// A fair lock refuses Fenced (Redisson has no fenced fair lock) and
// leaves nothing in Redis.
func TestFairMutexRefusesFenced(t *testing.T) {
	c := newClient(t, lock.Config{})
	rc := raw(t)
	n := name(t)
	if _, err := c.FairMutex(n).Lock(bg(), lock.Fenced()); !errors.Is(err, lock.ErrInvalid) {
		t.Fatalf("Lock(Fenced) of a fair lock = %v, want ErrInvalid", err)
	}
	if ks := keys(t, rc, n); len(ks) != 0 {
		t.Fatalf("keys left: %v", ks)
	}
}

// Leaving the head of the queue while the lock is free wakes the next
// waiter (Redisson's acquireFailed leaves it to its timeout); leaving
// twice changes nothing more.
func TestLeaveFairWakesTheNextHead(t *testing.T) {
	rc := raw(t)
	n := name(t)
	queue, timeouts := fairKeys(n)
	now := time.Now().UnixMilli()
	must(t, do(t, rc, "RPUSH", queue, "a:1", "b:2").Error())
	must(t, do(t, rc, "ZADD", timeouts, strconv.FormatInt(now+60000, 10), "a:1", strconv.FormatInt(now+120000, 10), "b:2").Error())
	msgs := subscribe(t, reentrant.FairWaiterChannel(n, "b:2"))
	lv := reentrant.LeaveFair{Name: n, Field: "a:1", Wait: time.Minute, Publish: reentrant.Publish}
	for i, want := range []bool{true, false} {
		queued, err := lv.Run(bg(), rc)
		must(t, err)
		if queued != want {
			t.Fatalf("leave %d reported queued=%v", i, queued)
		}
	}
	if m := <-msgs; m.Message != reentrant.UnlockMessage {
		t.Fatalf("next head got %q", m.Message)
	}
	if q := lrange(t, rc, queue); !slices.Equal(q, []string{"b:2"}) {
		t.Fatalf("queue %q", q)
	}
	if s := zscore(t, rc, timeouts, "b:2"); s != now+60000 {
		t.Fatalf("next head's timeout %d, want lowered by the wait to %d", s, now+60000)
	}
	must(t, do(t, rc, "DEL", queue, timeouts).Error())
}

// Goroutines sharing an owner share its one place in the queue: when one
// is granted, the other is woken at once and re-enters, instead of
// sleeping until the holder's lease (30 s) would have run out.
func TestFairMutexSharedOwnerWaitersBothProceed(t *testing.T) {
	holder := newClient(t, lock.Config{})
	wc := newWakeCounter()
	c := newClient(t, lock.Config{Observer: wc.observer()})
	rc := raw(t)
	n := name(t)
	queue, _ := fairKeys(n)
	h, err := holder.FairMutex(n).Lock(bg())
	must(t, err)
	ctx, cancel := context.WithTimeout(lock.WithOwner(bg()), 5*time.Second)
	defer cancel()
	got := make(chan *lock.Held, 2)
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			w, err := c.FairMutex(n).Lock(ctx)
			if err != nil {
				errs <- err
				return
			}
			got <- w
		}()
		<-wc.waiting
	}
	if q := lrange(t, rc, queue); len(q) != 1 {
		t.Fatalf("queue %q: want the shared owner's one place", q)
	}
	must(t, h.Unlock(bg()))
	var hs []*lock.Held
	for len(hs) < 2 {
		select {
		case w := <-got:
			hs = append(hs, w)
		case err := <-errs:
			t.Fatalf("a waiter of the shared owner = %v, want both to get the lock", err)
		}
	}
	if cnt := hgetInt(t, rc, n, reentrant.Field(c.ID(), hs[0].Owner())); cnt != 2 {
		t.Fatalf("the owner's count %d, want 2", cnt)
	}
	for _, w := range hs {
		must(t, w.Unlock(bg()))
	}
}

// rlock's watchdog renews a fair hold past its lease while a Java waiter
// is queued, and leaves that waiter's place alone; the waiter gets the
// lock once rlock releases.
func TestFairMutexRenewalKeepsTheQueue(t *testing.T) {
	// keepLease, not 300 ms: a process frozen longer than the lease (stop
	// 41's CI machine) cannot keep it, whatever its watchdog does.
	c := newClient(t, lock.Config{WatchdogTimeout: keepLease, RenewInterval: 50 * time.Millisecond})
	rc := raw(t)
	java := rs.New(rc, rs.Options{})
	n := name(t)
	queue, _ := fairKeys(n)
	fl := java.FairLock(n)
	h, err := c.FairMutex(n).Lock(bg())
	must(t, err)
	if a, err := fl.TryAcquire(bg(), 3, 0, 0); err != nil || a.Acquired {
		t.Fatalf("Java acquire while rlock holds = %+v, %v", a, err)
	}
	// Three leases: the hold lives only by renewal.
	deadline := time.Now().Add(3 * keepLease)
	for time.Now().Before(deadline) {
		select {
		case <-h.Done():
			t.Fatalf("the hold ended: %v", context.Cause(h.Context()))
		case <-time.After(100 * time.Millisecond): // polls the hold's state over three leases
		}
		if a, err := fl.TryAcquire(bg(), 3, 0, 0); err != nil || a.Acquired {
			t.Fatalf("Java acquire while rlock renews = %+v, %v", a, err)
		}
	}
	if q := lrange(t, rc, queue); !slices.Equal(q, []string{java.Field(3)}) {
		t.Fatalf("queue %q, want Java's waiter only", q)
	}
	must(t, h.Unlock(bg()))
	if a, err := fl.TryAcquire(bg(), 3, 0, 0); err != nil || !a.Acquired {
		t.Fatalf("Java acquire after rlock released = %+v, %v", a, err)
	}
	if r, err := fl.Unlock(bg(), 3); err != nil || r != rs.Released {
		t.Fatalf("Java unlock = %v, %v", r, err)
	}
}

// A fair waiter tells the Observer its place in the queue.
func TestFairMutexWaitingReportsThePosition(t *testing.T) {
	holder := newClient(t, lock.Config{})
	positions := make(chan int, 16)
	c := newClient(t, lock.Config{Observer: &observe.Observer{Waiting: func(_ context.Context, e observe.Waiting) { positions <- e.Position }}})
	rc := raw(t)
	java := rs.New(rc, rs.Options{})
	n := name(t)
	h, err := holder.FairMutex(n).Lock(bg())
	must(t, err)
	if a, err := java.FairLock(n).TryAcquire(bg(), 1, 0, 0); err != nil || a.Acquired {
		t.Fatalf("Java acquire = %+v, %v", a, err)
	}
	ctx, cancel := context.WithCancel(bg())
	done := make(chan error, 1)
	go func() {
		_, err := c.FairMutex(n).Lock(ctx)
		done <- err
	}()
	if p := <-positions; p != 2 {
		t.Fatalf("position %d, want 2 (behind Java's waiter)", p)
	}
	cancel()
	if err := <-done; !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("cancelled Lock = %v", err)
	}
	must(t, java.FairLock(n).CancelWait(bg(), 1, 0))
	must(t, h.Unlock(bg()))
}

// The model's D2 (docs/model/fair.pml): a fair acquire is held back in
// the network, its resend is granted, the fence's settlement is lost, and
// the caller's ctx ends, so the grant is given back. The give-back must
// settle the held-back copy first: released without that, the copy runs
// later, finds another holder and queues the field, which nobody waits
// in: every later waiter would queue behind it until its timeout.
func TestFairGiveBackSettlesAHeldBackCopyFirst(t *testing.T) {
	srv := integrationRedis(t)
	b := newClient(t, lock.Config{CommandTimeout: 100 * time.Millisecond}, srv)
	a := newClient(t, lock.Config{}, srv)
	rc := raw(t, srv)
	n := name(t)
	queue, _ := fairKeys(n)
	var once atomic.Bool
	late := inject(t, srv, integration.Rule{Match: integration.MatchFunc(func(cmd []string) bool {
		return len(cmd) > 2 && strings.EqualFold(cmd[0], "EVALSHA") && cmd[1] == reentrant.AcquireFairScript.SHA1() && once.CompareAndSwap(false, true)
	}), Action: integration.LateRequest(800 * time.Millisecond)})
	drop := inject(t, srv, integration.Rule{Match: integration.MatchFunc(func(cmd []string) bool {
		return len(cmd) > 2 && strings.EqualFold(cmd[0], "EVALSHA") && cmd[1] == reentrant.SettleScript.SHA1()
	}), Action: integration.DropRequest, Times: math.MaxInt})
	bctx, cancel := context.WithTimeout(lock.WithOwner(bg()), 50*time.Millisecond)
	defer cancel()
	owner, _ := lock.OwnerFrom(bctx)
	if _, err := b.FairMutex(n).Lock(bctx); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("B's Lock = %v, want ErrNotAcquired (its ctx ended)", err)
	}
	actx, acancel := context.WithTimeout(bg(), 10*time.Second)
	defer acancel()
	held := make(chan *lock.Held, 1)
	errs := make(chan error, 1)
	go func() {
		h, err := a.FairMutex(n).Lock(actx)
		if err != nil {
			errs <- err
			return
		}
		held <- h
	}()
	must(t, late.Wait(actx)) // the held-back copy has run
	drop.Remove()
	var h *lock.Held
	select {
	case h = <-held:
	case err := <-errs:
		t.Fatalf("A's Lock = %v", err)
	}
	if q := lrange(t, rc, queue); slices.Contains(q, reentrant.Field(b.ID(), owner)) {
		t.Fatalf("queue %q: B's field is queued with nobody of B waiting", q)
	}
	must(t, h.Unlock(bg()))
}
