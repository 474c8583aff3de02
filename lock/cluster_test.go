package lock_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/observe"
	"github.com/rlock-go/rlock/reentrant"
)

// clusterEnv is a 3-master Redis Cluster and a plain client per node.
type clusterEnv struct {
	cl    *integration.Cluster
	nodes []rueidis.Client // single-node clients, in Nodes() order
}

func newClusterEnv(t *testing.T) *clusterEnv {
	t.Helper()
	cl := integration.RedisCluster(t, 3, integration.Options{})
	env := &clusterEnv{cl: cl}
	for _, s := range cl.Nodes() {
		env.nodes = append(env.nodes, integration.NewClient(t, s.DirectAddr()))
	}
	return env
}

// client returns a lock.Client on the cluster, closed when the test ends.
func (env *clusterEnv) client(t *testing.T, cfg lock.Config) *lock.Client {
	t.Helper()
	cfg.Cluster = true
	cfg.Addrs = env.cl.Addrs()
	return newClient(t, cfg)
}

// owner returns the index of the node that owns key's slot: the others
// answer MOVED.
func (env *clusterEnv) owner(t *testing.T, key string) int {
	t.Helper()
	for i, rc := range env.nodes {
		if err := do(t, rc, "EXISTS", key).Error(); err == nil {
			return i
		}
	}
	t.Fatalf("no node owns %q", key)
	return -1
}

// names returns perNode lock names on each node, indexed by node.
func (env *clusterEnv) names(t *testing.T, perNode int) [][]string {
	t.Helper()
	out := make([][]string, len(env.nodes))
	base := name(t)
	for i, full := 0, 0; full < len(out); i++ {
		n := fmt.Sprintf("%s:%d", base, i)
		o := env.owner(t, n)
		if len(out[o]) < perNode {
			out[o] = append(out[o], n)
			if len(out[o]) == perNode {
				full++
			}
		}
	}
	return out
}

func shardNumSub(t *testing.T, rc rueidis.Client, channel string) int64 {
	t.Helper()
	m, err := do(t, rc, "PUBSUB", "SHARDNUMSUB", channel).ToArray()
	must(t, err)
	n, err := m[1].AsInt64()
	must(t, err)
	return n
}

// One 3-master cluster for all cluster tests; each uses names of its own.
func TestCluster(t *testing.T) {
	env := newClusterEnv(t)
	t.Run("LockUnlockReentry", func(t *testing.T) { clusterLockUnlockReentry(t, env) })
	t.Run("WakeBySPUBLISH", func(t *testing.T) { clusterWake(t, env, false) })
	t.Run("WakeByRedissonSPUBLISH", func(t *testing.T) { clusterWake(t, env, true) })
	t.Run("WatchdogOneRoundTrip", func(t *testing.T) { clusterWatchdog(t, env) })
	t.Run("PlainPubSub", func(t *testing.T) { clusterPlain(t, env) })
	t.Run("SubscriptionKilled", func(t *testing.T) { clusterSubscriptionKilled(t, env) })
	t.Run("LatchesDeleted", func(t *testing.T) { clusterLatchesDeleted(t, env, env.client(t, lock.Config{})) })
	t.Run("LatchesDeletedFromClient", func(t *testing.T) {
		// The cleaner tells a Cluster by the rueidis client's mode: one
		// given to FromClient too.
		rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: env.cl.Addrs(), DisableCache: true})
		must(t, err)
		t.Cleanup(rc.Close)
		c, err := lock.FromClient(rc, lock.Config{Cluster: true})
		must(t, err)
		t.Cleanup(func() { _ = c.Close(bg()) })
		clusterLatchesDeleted(t, env, c)
	})
}

// The unlock latches of releases on all three masters, which the cleaner
// deletes together (one DEL per slot), are all gone soon after: a DEL of
// keys of two slots makes rueidis's cluster builder panic (a Cluster
// would answer CROSSSLOT), and latches not deleted live out their TTL
// (132 s here).
func clusterLatchesDeleted(t *testing.T, env *clusterEnv, c *lock.Client) {
	var all []string
	for _, ns := range env.names(t, 3) {
		for _, n := range ns {
			all = append(all, n)
			for range 2 {
				h, err := c.Mutex(n).Lock(bg())
				must(t, err)
				must(t, h.Unlock(bg()))
			}
		}
	}
	// Polled: nothing tells when the cleaner's batch (within 200 ms of the
	// releases) was answered.
	deadline := time.Now().Add(5 * time.Second)
	for {
		var left []string
		for _, rc := range env.nodes {
			for _, n := range all {
				keys, err := do(t, rc, "KEYS", "redisson_unlock_latch:{"+n+"}:*").AsStrSlice()
				must(t, err)
				left = append(left, keys...)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d unlock latches of answered releases still in the cluster 5 s after them, e.g. %s", len(left), left[0])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Locks on all three masters: acquire, re-enter, release; each hash is on
// the master owning its slot.
func clusterLockUnlockReentry(t *testing.T, env *clusterEnv) {
	c := env.client(t, lock.Config{})
	for node, ns := range env.names(t, 2) {
		for _, n := range ns {
			m := c.Mutex(n)
			h, err := m.Lock(bg())
			must(t, err)
			h2, err := m.Lock(h.Context())
			must(t, err)
			field := reentrant.Field(c.ID(), h.Owner())
			if got := hgetInt(t, env.nodes[node], n, field); got != 2 {
				t.Fatalf("%s on node %d: count %d, want 2", n, node, got)
			}
			if _, err := c.Mutex(n).TryLock(bg()); !errors.Is(err, lock.ErrNotAcquired) {
				t.Fatalf("another owner's TryLock = %v, want ErrNotAcquired", err)
			}
			must(t, h2.Unlock(bg()))
			must(t, h.Unlock(bg()))
			if exists(t, env.nodes[node], n) {
				t.Fatalf("%s still exists after the last Unlock", n)
			}
		}
	}
}

// A waiter on one client is woken by a release on another client (or by a
// Redisson stand-in passing "SPUBLISH" as ARGV[4]) through SSUBSCRIBE on
// the master owning the channel's slot. The holder's lease is long: only
// a message can end the wait.
func clusterWake(t *testing.T, env *clusterEnv, byRedisson bool) {
	holder := env.client(t, lock.Config{})
	wc := newWakeCounter()
	waiter := env.client(t, lock.Config{Observer: wc.observer()})
	for node, ns := range env.names(t, 1) {
		n := ns[0]
		ch := channelOf(n)
		var h *lock.Held
		var java *redisson
		if byRedisson {
			java = newRedisson(t, env.nodes[node])
			if ok, _ := java.lock(n, 1, time.Minute); !ok {
				t.Fatal("stand-in could not lock")
			}
		} else {
			var err error
			h, err = holder.Mutex(n).Lock(bg())
			must(t, err)
		}
		got := make(chan error, 1)
		go func() {
			h2, err := waiter.Mutex(n).Lock(bg())
			if err == nil {
				err = h2.Unlock(bg())
			}
			got <- err
		}()
		<-wc.waiting
		for i, rc := range env.nodes {
			want := int64(0)
			if i == node {
				want = 1
			}
			if got := shardNumSub(t, rc, ch); got != want {
				t.Fatalf("node %d: SHARDNUMSUB %d while waiting on node %d's lock, want %d", i, got, node, want)
			}
		}
		if byRedisson {
			res := do(t, env.nodes[node], "EVAL", redissonRelease, "3",
				n, ch, "redisson_unlock_latch:{"+n+"}:"+reentrant.NewRequestID(),
				"0", "30000", java.field(1), "SPUBLISH", "13500")
			if v, err := res.AsInt64(); err != nil || v != 1 {
				t.Fatalf("stand-in unlock = %d, %v", v, err)
			}
		} else {
			must(t, h.Unlock(bg()))
		}
		must(t, <-got)
		if r := <-wc.woken; r != observe.WakeMessage {
			t.Fatalf("woken by %v, want a message", r)
		}
		waitUnsubscribed(t, func() int64 { return shardNumSub(t, env.nodes[node], ch) }, "after the wait")
	}
	if wc.count(observe.WakeTimeout) != 0 || wc.count(observe.WakeReconnect) != 0 {
		t.Fatalf("wake-ups %v, want messages only", wc.byReason)
	}
}

// Locks spread over the three masters are all renewed by one tick, in one
// round trip as rlock counts it (one DoMulti; rueidis sends each node's
// share concurrently).
func clusterWatchdog(t *testing.T, env *clusterEnv) {
	obs, tk := ticks()
	c := env.client(t, lock.Config{WatchdogTimeout: keepLease, RenewInterval: shortInterval, Observer: obs})
	var helds []*lock.Held
	for _, ns := range env.names(t, 3) {
		for _, n := range ns {
			h, err := c.Mutex(n).Lock(bg())
			must(t, err)
			helds = append(helds, h)
		}
	}
	// Wait for a tick that saw all of them; then several more leases.
	// Bounded: a hold lost meanwhile would leave every later tick short
	// (the CI run of f67f204 hung here for 12 minutes, once).
	deadline := time.After(30 * time.Second)
	for full := 0; full < int(3*keepLease/shortInterval); { // three leases
		var e observe.Renew
		select {
		case e = <-tk:
		case <-deadline:
			for _, h := range helds {
				if h.Context().Err() != nil {
					t.Errorf("%s lost: %v", h.Name(), context.Cause(h.Context()))
				}
			}
			t.Fatalf("no three leases of ticks renewing all %d locks within 30 s (%d so far)", len(helds), full)
		}
		if e.Renewed < len(helds) {
			continue
		}
		if e.RoundTrips != 1 || e.Renewed != len(helds) || e.Lost != 0 || e.Failed != 0 || e.Err != nil {
			t.Fatalf("tick %+v; want one round trip renewing %d locks", e, len(helds))
		}
		if e.Commands != len(helds) { // nine names, nine slots
			t.Fatalf("tick of %d commands, want %d (one per slot)", e.Commands, len(helds))
		}
		full++
	}
	for _, h := range helds {
		select {
		case <-h.Done():
			t.Fatalf("lost: %v", context.Cause(h.Context()))
		default:
		}
		must(t, h.Unlock(bg()))
	}
}

// PubSubPlain in a cluster: one SUBSCRIBE connection to any node; the
// release's PUBLISH reaches it from every master.
func clusterPlain(t *testing.T, env *clusterEnv) {
	holder := env.client(t, lock.Config{PubSub: lock.PubSubPlain})
	wc := newWakeCounter()
	waiter := env.client(t, lock.Config{PubSub: lock.PubSubPlain, Observer: wc.observer()})
	for _, ns := range env.names(t, 1) {
		n := ns[0]
		h, err := holder.Mutex(n).Lock(bg())
		must(t, err)
		got := make(chan error, 1)
		go func() {
			h2, err := waiter.Mutex(n).Lock(bg())
			if err == nil {
				err = h2.Unlock(bg())
			}
			got <- err
		}()
		<-wc.waiting
		must(t, h.Unlock(bg()))
		must(t, <-got)
		if r := <-wc.woken; r != observe.WakeMessage {
			t.Fatalf("woken by %v, want a message", r)
		}
	}
}

// Config.Cluster against a standalone master is refused; several
// addresses are allowed only with Cluster.
func TestClusterConfig(t *testing.T) {
	ctx, cancel := context.WithTimeout(bg(), 10*time.Second)
	defer cancel()
	if _, err := lock.New(ctx, lock.Config{Cluster: true, Addrs: []string{shared.Addr()}}); !errors.Is(err, lock.ErrInvalid) {
		t.Fatalf("Cluster on a standalone master = %v, want ErrInvalid", err)
	}
	if _, err := lock.New(ctx, lock.Config{Cluster: true, DB: 1, Addrs: []string{shared.Addr()}}); !errors.Is(err, lock.ErrInvalid) {
		t.Fatalf("Cluster with DB 1 = %v, want ErrInvalid", err)
	}
}

// PubSubSharded on a standalone Redis 7: SSUBSCRIBE and SPUBLISH exist
// there too, and a release wakes a waiter of another client.
func TestShardedPubSubStandalone(t *testing.T) {
	holder := newClient(t, lock.Config{PubSub: lock.PubSubSharded})
	wc := newWakeCounter()
	waiter := newClient(t, lock.Config{PubSub: lock.PubSubSharded, Observer: wc.observer()})
	rc := raw(t)
	// Several channels in different slots at once: SSUBSCRIBE is sent per
	// slot.
	var names []string
	for i := range 3 {
		names = append(names, name(t)+":"+strconv.Itoa(i))
	}
	var helds []*lock.Held
	for _, n := range names {
		h, err := holder.Mutex(n).Lock(bg())
		must(t, err)
		helds = append(helds, h)
	}
	got := make(chan error, len(names))
	for _, n := range names {
		go func() {
			h2, err := waiter.Mutex(n).Lock(bg())
			if err == nil {
				err = h2.Unlock(bg())
			}
			got <- err
		}()
	}
	for range names {
		<-wc.waiting
	}
	for i, n := range names {
		if s := shardNumSub(t, rc, channelOf(n)); s != 1 {
			t.Fatalf("SHARDNUMSUB %d, want 1", s)
		}
		must(t, helds[i].Unlock(bg()))
		must(t, <-got)
	}
	if wc.count(observe.WakeMessage) != len(names) || wc.count(observe.WakeTimeout) != 0 {
		t.Fatalf("wake-ups %v, want %d by message", wc.byReason, len(names))
	}
}

// Killing a master's sharded subscription connection wakes its waiters
// (reason reconnect) and the Hub re-subscribes on that master, waking them
// again once that is confirmed: the next release reaches the waiter.
func clusterSubscriptionKilled(t *testing.T, env *clusterEnv) {
	holder := env.client(t, lock.Config{})
	wc := newWakeCounter()
	waiter := env.client(t, lock.Config{Observer: wc.observer()})
	ns := env.names(t, 1)
	node, n := 1, ns[1][0]
	rc := env.nodes[node]
	h, err := holder.Mutex(n).Lock(bg())
	must(t, err)
	got := make(chan error, 1)
	go func() {
		h2, err := waiter.Mutex(n).Lock(bg())
		if err == nil {
			err = h2.Unlock(bg())
		}
		got <- err
	}()
	<-wc.waiting
	if k, err := do(t, rc, "CLIENT", "KILL", "TYPE", "pubsub").AsInt64(); err != nil || k != 1 {
		t.Fatalf("CLIENT KILL TYPE pubsub = %d, %v; want 1", k, err)
	}
	if r := <-wc.woken; r != observe.WakeReconnect {
		t.Fatalf("woken by %s, want reconnect", r)
	}
	<-wc.waiting
	// No event says the Hub re-subscribed: ask the master, in a bounded
	// loop, then release.
	deadline := time.Now().Add(10 * time.Second)
	poll := time.NewTicker(5 * time.Millisecond)
	defer poll.Stop()
	for shardNumSub(t, rc, channelOf(n)) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the sharded subscription was not re-established")
		}
		<-poll.C
	}
	must(t, h.Unlock(bg()))
	must(t, <-got)
	// Once the re-subscription is confirmed the waiter is woken (reason
	// reconnect) and tries; the release then wakes it by message, unless
	// that wake-up was still pending and took the message's place.
	if r := <-wc.woken; r != observe.WakeMessage && r != observe.WakeReconnect {
		t.Fatalf("woken by %s after the re-subscription, want a message or reconnect", r)
	}
	if wc.count(observe.WakeTimeout) != 0 {
		t.Fatalf("a waiter slept until the lease ran out: %v", wc.byReason)
	}
}

// Errors name the node that answered: in a cluster, the owner of the
// lock's slot, not the first seed. A standalone Client on a cluster node
// whose key lives elsewhere (MOVED) is ErrInvalid: set Config.Cluster.
func TestClusterErrorsNameTheNode(t *testing.T) {
	env := newClusterEnv(t)
	names := env.names(t, 1)
	n := names[2][0] // owned by the third node, never the first seed
	rc := env.nodes[2]
	must(t, do(t, rc, "SET", n, "x").Error())
	c := env.client(t, lock.Config{})
	_, err := c.Mutex(n).TryLock(bg())
	var me *lock.MasterError
	if !errors.Is(err, lock.ErrNotLock) || !errors.As(err, &me) {
		t.Fatalf("TryLock on a string in a cluster = %v, want a MasterError matching ErrNotLock", err)
	}
	if want := env.cl.Nodes()[2].DirectAddr(); me.Addr != want {
		t.Fatalf("error names %s, want the slot's owner %s (seeds %v)", me.Addr, want, env.cl.Addrs())
	}

	plain := newClient(t, lock.Config{Addrs: []string{env.cl.Nodes()[0].DirectAddr()}})
	_, err = plain.Mutex(n).TryLock(bg())
	if !errors.Is(err, lock.ErrInvalid) {
		t.Fatalf("TryLock of another node's key without Cluster = %v, want ErrInvalid", err)
	}
	if !strings.Contains(err.Error(), "MOVED") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("MOVED error: %q", err)
	}
}
