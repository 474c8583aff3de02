package lock

import (
	"context"
	"testing"
	"time"

	"github.com/rlock-go/rlock/integration"
)

// A queue is one lock's: two keys are equal exactly when their names are
// and their kinds announce on one channel (every kind on the plain
// lock's channel but a read-write lock's halves, which share theirs).
// Names whose channels coincide ("a" and "{a}") get two queues; until
// 2026-12-01 they shared one (TestNamesSharingAChannelWaitApart).
func TestQueueKeyNamesTheLock(t *testing.T) {
	kinds := []*protocol{plainProtocol, nonReentrantProtocol, spinProtocol, readProtocol, writeProtocol, fairProtocol}
	// Names whose channels coincide ("a" and "{a}"; "a}b" and "{a}b}")
	// or nearly do.
	names := []string{"a", "b", "{a}", "{a}b", "a{b}", "{a}}", "a}", "{a}b}", "a}b", "{{a}}", "{a", "{", "}", "{}", ""}
	for _, m := range names {
		for _, n := range names {
			for _, p := range kinds {
				for _, q := range kinds {
					same, want := p.queueKey(m) == q.queueKey(n), m == n && p.channel(m) == q.channel(n)
					if same != want {
						t.Errorf("%s %q and %s %q: keys equal %v, want %v (%s, %s)", p.name, m, q.name, n, same, want, p.channel(m), q.channel(n))
					}
				}
			}
		}
	}
}

// An uncontended Lock makes no queue: its attempt goes out before it
// would join one (acquisition.alone). The master is stopped while the
// attempt is in flight, and the Client's queues are looked at meanwhile
// (nothing signals the attempt's being on the wire: they are sampled for
// 100 ms); until be600ed the call joined the queue first, and it was
// there the whole time.
func TestUncontendedLockMakesNoQueue(t *testing.T) {
	srv := integration.Redis(t, integration.Options{})
	c, err := New(context.Background(), Config{Addrs: []string{srv.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	m := c.Mutex("queue:alone")
	k := m.p.queueKey(m.name)
	if err := srv.Pause(context.Background()); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = srv.Resume(context.Background())
		}
	}()
	done := make(chan error, 1)
	go func() {
		h, err := m.Lock(context.Background())
		if err == nil {
			err = h.Unlock(context.Background())
		}
		done <- err
	}()
	seen := 0
	for end := time.Now().Add(100 * time.Millisecond); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if c.queues.has(k) {
			seen++
		}
	}
	if err := srv.Resume(context.Background()); err != nil {
		t.Fatal(err)
	}
	resumed = true
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if seen > 0 {
		t.Errorf("the Client had a queue for the lock in %d of the looks while its uncontended Lock's attempt was in flight", seen)
	}
}
