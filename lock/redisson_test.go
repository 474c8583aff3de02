package lock_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/reentrant"
)

// redisson stands in for a Java service using Redisson's RLock: it sends
// the scripts of design.md section 2 in their own text (not rlock's
// embedded files), with a client id of its own.
type redisson struct {
	t    testing.TB
	rc   rueidis.Client
	uuid string
}

const (
	redissonAcquire = `if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then ` +
		`redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; ` +
		`return redis.call('pttl', KEYS[1]);`
	redissonRelease = `local val = redis.call('get', KEYS[3]); if val ~= false then return tonumber(val); end; ` +
		`if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil; end; ` +
		`local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); ` +
		`if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); redis.call('set', KEYS[3], 0, 'px', ARGV[5]); return 0; ` +
		`else redis.call('del', KEYS[1]); redis.call(ARGV[4], KEYS[2], ARGV[1]); redis.call('set', KEYS[3], 1, 'px', ARGV[5]); return 1; end;`
)

func newRedisson(t testing.TB, rc rueidis.Client) *redisson {
	return &redisson{t: t, rc: rc, uuid: reentrant.NewClientID()}
}

func (r *redisson) field(thread int) string { return reentrant.Field(r.uuid, uint64(thread)) }

// lock runs Redisson's acquire for thread: nil reply (acquired) or the PTTL.
func (r *redisson) lock(name string, thread int, lease time.Duration) (acquired bool, pttl int64) {
	r.t.Helper()
	res := do(r.t, r.rc, "EVAL", redissonAcquire, "1", name, strconv.FormatInt(lease.Milliseconds(), 10), r.field(thread))
	if rueidis.IsRedisNil(res.Error()) {
		return true, 0
	}
	v, err := res.AsInt64()
	must(r.t, err)
	return false, v
}

// unlock runs Redisson's release for thread with request id req.
func (r *redisson) unlock(name string, thread int, req string) rueidis.RedisResult {
	r.t.Helper()
	return do(r.t, r.rc, "EVAL", redissonRelease, "3",
		name, "redisson_lock__channel:{"+name+"}", "redisson_unlock_latch:{"+name+"}:"+req,
		"0", "30000", r.field(thread), "PUBLISH", "13500")
}

func TestRedissonExcludesRlockAndBack(t *testing.T) {
	c := newClient(t, lock.Config{})
	rc := raw(t)
	java := newRedisson(t, rc)
	n := name(t)
	m := c.Mutex(n)

	// Redisson holds: rlock is excluded.
	if ok, _ := java.lock(n, 1, 30*time.Second); !ok {
		t.Fatal("Redisson stand-in did not acquire a free lock")
	}
	if _, err := m.TryLock(bg()); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("rlock TryLock while Redisson holds = %v, want ErrNotAcquired", err)
	}
	// Redisson re-enters, then releases twice.
	if ok, _ := java.lock(n, 1, 30*time.Second); !ok {
		t.Fatal("Redisson re-entry refused")
	}
	if v, err := java.unlock(n, 1, reentrant.NewRequestID()).AsInt64(); err != nil || v != 0 {
		t.Fatalf("Redisson first unlock = %d, %v; want 0 (still held)", v, err)
	}
	if v, err := java.unlock(n, 1, reentrant.NewRequestID()).AsInt64(); err != nil || v != 1 {
		t.Fatalf("Redisson last unlock = %d, %v; want 1", v, err)
	}

	// rlock holds: Redisson is excluded and told how long to wait.
	h, err := m.TryLock(bg())
	must(t, err)
	ok, pttl := java.lock(n, 1, 30*time.Second)
	if ok || pttl <= 0 || pttl > 30000 {
		t.Fatalf("Redisson acquire while rlock holds = %v, pttl %d; want refused with a TTL", ok, pttl)
	}
	// Redisson cannot release rlock's hold.
	if res := java.unlock(n, 1, reentrant.NewRequestID()); !rueidis.IsRedisNil(res.Error()) {
		t.Fatalf("Redisson unlock of rlock's hold = %v, want nil (not held)", res)
	}
	// rlock's field is Redisson's shape: <36-char uuid>:<decimal>.
	fields, err := do(t, rc, "HKEYS", n).AsStrSlice()
	must(t, err)
	if len(fields) != 1 || len(c.ID()) != 36 || fields[0] != reentrant.Field(c.ID(), h.Owner()) {
		t.Fatalf("fields %q, want one %q", fields, reentrant.Field(c.ID(), h.Owner()))
	}
	must(t, h.Unlock(bg()))
	if ok, _ := java.lock(n, 2, 30*time.Second); !ok {
		t.Fatal("Redisson could not acquire after rlock released")
	}
}

func TestUnlockPublishesRedissonMessage(t *testing.T) {
	c := newClient(t, lock.Config{})
	n := name(t)
	msgs := subscribe(t, "redisson_lock__channel:{"+n+"}")

	m := c.Mutex(n)
	h, err := m.Lock(bg())
	must(t, err)
	h2, err := m.Lock(h.Context())
	must(t, err)
	must(t, h2.Unlock(bg())) // still held: nothing published
	must(t, h.Unlock(bg()))
	got := <-msgs
	if got.Message != "0" || got.Channel != "redisson_lock__channel:{"+n+"}" {
		t.Fatalf("published %q on %q, want \"0\" on Redisson's channel", got.Message, got.Channel)
	}
	// ForceUnlock publishes the same message.
	_, err = m.Lock(bg())
	must(t, err)
	_, err = m.ForceUnlock(bg())
	must(t, err)
	if got := <-msgs; got.Message != "0" {
		t.Fatalf("force unlock published %q, want \"0\"", got.Message)
	}
	select {
	case extra := <-msgs:
		t.Fatalf("unexpected message %q (the inner unlock must publish nothing)", extra.Message)
	default:
	}
}

// The latch: a release retried with the same request id returns the first
// answer and does not release a second hold.
func TestUnlockLatchAnswersRetries(t *testing.T) {
	rc := raw(t)
	n := name(t)
	field := reentrant.Field(reentrant.NewClientID(), 7)
	for i := 0; i < 2; i++ {
		req := reentrant.AcquireRequest{Name: n, Field: field, Lease: 30 * time.Second, Known: i, RequestID: reentrant.NewRequestID()}
		a, err := req.Run(bg(), rc)
		if err != nil || a.Status != reentrant.Acquired {
			t.Fatalf("acquire %d: %+v, %v", i, a, err)
		}
	}
	r := reentrant.Release{Name: n, Field: field, Lease: 30 * time.Second, RequestID: reentrant.NewRequestID(), Publish: reentrant.Publish, LatchTTL: time.Minute}
	for i := 0; i < 3; i++ {
		res, err := r.Run(bg(), rc)
		if err != nil || res != reentrant.StillHeld {
			t.Fatalf("release attempt %d = %v, %v; want still held", i, res, err)
		}
	}
	if got := hgetInt(t, rc, n, field); got != 1 {
		t.Fatalf("hold count after a retried release = %d, want 1", got)
	}
	must(t, rc.Do(bg(), rc.B().Del().Key(reentrant.LatchName(r.Name, r.RequestID)).Build()).Error())
	r.RequestID = reentrant.NewRequestID()
	if res, err := r.Run(bg(), rc); err != nil || res != reentrant.Released {
		t.Fatalf("last release = %v, %v; want released", res, err)
	}
	if ks := keys(t, rc, n); len(ks) != 1 { // only the new latch
		t.Fatalf("keys left: %q", ks)
	}
}

// An Unlock whose attempts time out against a stopped server, then is
// retried, releases exactly one hold: the retries carry the same request
// id, so the latch answers all but the first.
func TestUnlockRetriedAfterTimeoutNeverDecrementsTwice(t *testing.T) {
	srv := integrationRedis(t)
	c := newClient(t, lock.Config{CommandTimeout: 100 * time.Millisecond}, srv)
	rc := raw(t, srv)
	n := name(t)
	m := c.Mutex(n)
	h, err := m.Lock(bg())
	must(t, err)
	inner, err := m.Lock(h.Context())
	must(t, err)
	field := reentrant.Field(c.ID(), h.Owner())

	must(t, srv.Pause(bg()))
	ctx, cancel := context.WithTimeout(bg(), 350*time.Millisecond) // several attempts, all queued
	err = inner.Unlock(ctx)
	cancel()
	if !errors.Is(err, lock.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Unlock against a paused server = %v, want ErrUnavailable and the deadline", err)
	}
	must(t, srv.Resume(bg()))
	must(t, inner.Unlock(bg())) // the same hold: the latch answers "still held"
	if got := hgetInt(t, rc, n, field); got != 1 {
		t.Fatalf("hold count = %d, want 1: a retried release decremented twice", got)
	}
	select {
	case <-h.Done():
		t.Fatalf("outer hold ended: %v", context.Cause(h.Context()))
	default:
	}
	must(t, h.Unlock(bg()))
}

// subscribe subscribes a connection of its own to channel and returns its
// messages, once the server confirmed the subscription; it unsubscribes
// when the test ends.
func subscribe(t *testing.T, channel string) <-chan rueidis.PubSubMessage {
	t.Helper()
	sub := raw(t)
	msgs := make(chan rueidis.PubSubMessage, 16)
	subscribed := make(chan struct{})
	ctx, cancel := context.WithCancel(bg())
	done := make(chan error, 1)
	go func() {
		done <- sub.Receive(rueidis.WithOnSubscriptionHook(ctx, func(s rueidis.PubSubSubscription) {
			if s.Kind == "subscribe" {
				close(subscribed)
			}
		}), sub.B().Subscribe().Channel(channel).Build(), func(m rueidis.PubSubMessage) { msgs <- m })
	}()
	t.Cleanup(func() { cancel(); <-done })
	<-subscribed
	return msgs
}
