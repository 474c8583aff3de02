package lock

import (
	"context"
	"testing"
	"time"

	"github.com/rlock-go/rlock/integration"
)

// A queue's key names its channel without building it: two keys are
// equal exactly when their channels are, whatever the kinds and names
// ("x" and "{x}" share one), so the waiters of one channel form one queue
// with one subscription, and a release wakes those that listen on its
// channel and no others. (A review found "x" and "{x}" keyed apart: a
// release of one could wake the other's head, which used the wake-up, and
// leave the first asleep on a free lock.)
func TestChanKeyNamesTheChannel(t *testing.T) {
	kinds := []*protocol{plainProtocol, nonReentrantProtocol, spinProtocol, readProtocol, writeProtocol, fairProtocol}
	// Names whose channels coincide ("a" and "{a}"; "a}b" and "{a}b}")
	// or nearly do.
	names := []string{"a", "b", "{a}", "{a}b", "a{b}", "{a}}", "a}", "{a}b}", "a}b", "{{a}}", "{a", "{", "}", "{}", ""}
	for _, m := range names {
		for _, n := range names {
			for _, p := range kinds {
				for _, q := range kinds {
					if sameKey, sameChan := p.chanKey(m) == q.chanKey(n), p.channel(m) == q.channel(n); sameKey != sameChan {
						t.Errorf("%s %q and %s %q: keys equal %v, channels equal %v (%s, %s)", p.name, m, q.name, n, sameKey, sameChan, p.channel(m), q.channel(n))
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
	k := m.p.chanKey(m.name)
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
