package lock_test

import (
	"context"
	"testing"
	"time"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/lock"
)

// A master of a Redis Cluster fails over (killed, its replica promoted)
// while a waiter of another Client waits on its lock: the waiter's
// subscription follows the slot to the promoted replica, so the holder's
// release there wakes it, instead of leaving it asleep on a dead node
// until the holder's lease (a minute here) runs out. The holder's lease
// was acknowledged by the replica (replica sync), so its watchdog keeps
// renewing it on the new master, and exclusion holds across the failover.
func TestClusterWaiterFollowsAFailover(t *testing.T) {
	cl := integration.RedisClusterWithReplicas(t, 3, 1, integration.Options{})
	cfg := lock.Config{Cluster: true, Addrs: cl.Addrs(), WatchdogTimeout: time.Minute}
	holder, waiter := newClient(t, cfg), newClient(t, cfg)
	n := name(t)
	h, err := holder.Mutex(n).Lock(bg())
	must(t, err)

	// The master that owns n, as the plain clients see it.
	owner := -1
	for i, s := range cl.Nodes() {
		if err := do(t, integration.NewClient(t, s.DirectAddr()), "EXISTS", n).Error(); err == nil {
			owner = i
		}
	}
	if owner < 0 {
		t.Fatal("no master owns the lock's slot")
	}

	ctx, cancel := context.WithTimeout(bg(), 40*time.Second) // well short of the lease
	defer cancel()
	got := make(chan error, 1)
	go func() {
		w, err := waiter.Mutex(n).Lock(ctx)
		if err == nil {
			err = w.Unlock(bg())
		}
		got <- err
	}()
	// The waiter is subscribed once the owner counts a shard subscriber.
	ownerRC := integration.NewClient(t, cl.Nodes()[owner].DirectAddr())
	for {
		m, err := ownerRC.Do(ctx, ownerRC.B().PubsubShardnumsub().Channel("redisson_lock__channel:{"+n+"}").Build()).AsIntMap()
		must(t, err)
		if m["redisson_lock__channel:{"+n+"}"] == 1 {
			break
		}
		select {
		case err := <-got:
			t.Fatalf("the waiter returned %v before the failover", err)
		case <-time.After(10 * time.Millisecond): // the server has no event for it
		}
	}

	promoted, err := cl.Failover(bg(), owner)
	if err != nil {
		t.Fatal(err)
	}
	// The waiter's subscription moves to the promoted replica (a release
	// is published there), rather than retrying the dead node.
	newRC := integration.NewClient(t, promoted.DirectAddr())
	for {
		m, err := newRC.Do(ctx, newRC.B().PubsubShardnumsub().Channel("redisson_lock__channel:{"+n+"}").Build()).AsIntMap()
		if err != nil {
			t.Fatalf("the waiter never subscribed on the promoted replica: %v", err)
		}
		if m["redisson_lock__channel:{"+n+"}"] == 1 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the waiter never subscribed on the promoted replica")
		case <-time.After(10 * time.Millisecond): // the server has no event for it
		}
	}
	select {
	case err := <-got:
		t.Fatalf("the waiter returned %v while the lock was held across the failover", err)
	default:
	}
	if err := h.Context().Err(); err != nil {
		t.Fatalf("the holder's hold ended with the failover: %v", context.Cause(h.Context()))
	}
	must(t, h.Unlock(bg()))
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("waiter: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the waiter slept through the release on the promoted replica")
	}
}
