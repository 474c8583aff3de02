package lock_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlock-go/rlock/lock"
)

// Issue 29, stage 4: a fair grant given back because no replica
// acknowledged it keeps its place. A (replica sync on) heads the queue
// behind a holder, B (replica sync off) queues behind A; the replica is
// stopped and the holder unlocks. A is granted, no replica acknowledges
// it, and A gives it back and tries again while its Lock waits. Once the
// replica runs again, A's next grant counts. The lock was A's to retake
// all along: A is granted before B.
func TestReplicaSyncFairGiveBackKeepsItsPlace(t *testing.T) {
	master, replica := withReplica(t)
	rc := raw(t, master)
	n := name(t)
	holder := newClient(t, lock.Config{ReplicaSyncTimeout: -1}, master)
	a := newClient(t, lock.Config{ReplicaSyncTimeout: 100 * time.Millisecond}, master)
	b := newClient(t, lock.Config{ReplicaSyncTimeout: -1}, master)
	h, err := holder.FairMutex(n).Lock(bg(), lock.Lease(30*time.Second))
	must(t, err)

	ctx, cancel := context.WithTimeout(bg(), 30*time.Second)
	defer cancel()
	var aGranted, bGranted atomic.Int64 // unix nanos
	grant := func(c *lock.Client, at *atomic.Int64) func() error {
		return func() error {
			g, err := c.FairMutex(n).Lock(ctx)
			if err != nil {
				return err
			}
			at.Store(time.Now().UnixNano())
			time.Sleep(50 * time.Millisecond) // holds a moment: the other is not granted meanwhile
			return g.Unlock(bg())
		}
	}
	aCall := goCall(grant(a, &aGranted))
	awaitQueued(t, rc, n, 1)
	bCall := goCall(grant(b, &bGranted))
	awaitQueued(t, rc, n, 2)

	must(t, replica.Pause(bg()))
	t.Cleanup(func() { _ = replica.Resume(context.Background()) })
	before := waits(t, rc)
	must(t, h.Unlock(bg()))
	// A's grants go unacknowledged: each is followed by a WAIT that times
	// out (100 ms), and given back. Two of them, then the replica runs.
	deadline := time.Now().Add(10 * time.Second)
	for waits(t, rc)-before < 2 {
		if time.Now().After(deadline) {
			t.Fatal("A sent no two WAITs within 10 s of the holder's release")
		}
		time.Sleep(20 * time.Millisecond) // polled: the server has no event for a WAIT
	}
	must(t, replica.Resume(bg()))

	ar := awaitCall(t, "A's fair Lock", aCall, time.Now().Add(20*time.Second), func() {})
	br := awaitCall(t, "B's fair Lock", bCall, time.Now().Add(20*time.Second), func() {})
	must(t, ar.err)
	must(t, br.err)
	if ga, gb := aGranted.Load(), bGranted.Load(); gb < ga {
		t.Errorf("B was granted %v before A: A's give-back (no replica acknowledged its grant) lost A's place at the head of the queue",
			time.Duration(ga-gb).Round(time.Millisecond))
	} else {
		t.Logf("A was granted %v before B", time.Duration(gb-ga).Round(time.Millisecond))
	}
	if q := queue(t, rc, n); len(q) != 0 {
		t.Errorf("the queue of %q is %v after both were granted and released", n, q)
	}
}
