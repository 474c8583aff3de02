package lock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/rlock-go/rlock/reentrant"
)

// replicaRefresh is how long a master's replica count is trusted before
// it is asked again (ROLE): replicas that attach later are waited for
// from then on.
const replicaRefresh = 10 * time.Second

// replicas counts the connected replicas of each master, for the WAIT
// after an acquire or a release (Config.ReplicaSyncTimeout). Asking is
// one ROLE per master and replicaRefresh, sent before the request that
// needs it; a WAIT answered by another number of replicas than expected
// asks again before the next one.
type replicas struct {
	mu     sync.Mutex
	m      map[string]replicaCount // by master address
	had    map[string]bool         // masters seen with replicas by this Client
	asking map[string]bool         // masters asked in the background now
}

type replicaCount struct {
	n       int
	asked   time.Time
	unknown bool // the master could not be asked
}

// defaultReplicaSyncTimeout is Redisson's slavesSyncTimeout.
const defaultReplicaSyncTimeout = time.Second

// sync returns what an acquire or release of name must wait for: the
// master's connected replicas for up to Config.ReplicaSyncTimeout, or
// nothing when replica sync is off or the master never had replicas. A
// master that cannot be asked is treated as having none this time (the
// request itself then reports the outage, or lands on the master that
// now owns the name).
//
// A master once seen with replicas keeps needing one acknowledgement
// when it reports none: a master cut off from its replicas (a partition)
// lists none, and a grant there reaches nobody a failover could promote.
// Its count of none must not turn the check off; requests fail with
// ErrUnavailable until a replica is back (or the Client is closed). A
// question cut short by the caller's own deadline counts as such an
// answer, not as a master that cannot be asked.
func (c *Client) sync(ctx context.Context, name string) reentrant.Sync {
	return c.syncAt(ctx, c.at(name), false)
}

// syncAt is sync for the master at addr. For a renewal the count is the
// last one known, even if old (a fresh one is asked for in the
// background).
func (c *Client) syncAt(ctx context.Context, addr string, renewal bool) reentrant.Sync {
	if c.cfg.ReplicaSyncTimeout < 0 {
		return reentrant.Sync{}
	}
	c.reps.mu.Lock()
	rc, ok := c.reps.m[addr]
	c.reps.mu.Unlock()
	if !ok || time.Since(rc.asked) > replicaRefresh {
		if renewal {
			// The watchdog never waits for the question: it renews with
			// the last count known, and the answer serves the next tick.
			c.learnReplicasLater(addr)
			if !ok {
				rc = replicaCount{unknown: true}
			}
		} else {
			rc = c.learnReplicas(ctx, addr)
		}
	}
	if rc.n == 0 {
		c.reps.mu.Lock()
		had := c.reps.had[addr]
		c.reps.mu.Unlock()
		if !had || (rc.unknown && !renewal) {
			// A master that cannot be asked (stopped, or no longer
			// where a slot table says) is not held to it: the
			// request reports the outage, or lands on the master
			// that now owns the name.
			return reentrant.Sync{}
		}
		rc.n = 1
	}
	return reentrant.Sync{Replicas: rc.n, Timeout: c.cfg.ReplicaSyncTimeout}
}

// renewSync is the watchdog's Config.Sync: a renewal of name counts once
// a replica of its master acknowledged it, as an acquire does.
func (c *Client) renewSync(ctx context.Context, name string) (string, reentrant.Sync) {
	addr := c.at(name)
	return addr, c.syncAt(ctx, addr, true)
}

// learnReplicas asks the master at addr for its replica count and keeps
// the answer for replicaRefresh. A master that cannot be asked counts as
// having none, and is asked again a second later: an outage is reported
// by the request itself, not doubled by a slow question before it.
func (c *Client) learnReplicas(ctx context.Context, addr string) replicaCount {
	n, err := c.askReplicas(ctx, addr)
	if err != nil && ctx.Err() != nil {
		// The caller's time ran out, not the master's: nothing is
		// learned, and the master is not taken for one that cannot be
		// asked (which would skip the WAIT): it counts as reporting
		// none, so one that had replicas still needs one.
		return replicaCount{}
	}
	rc := replicaCount{n: n, asked: time.Now()}
	if err != nil {
		rc = replicaCount{asked: time.Now().Add(time.Second - replicaRefresh), unknown: true}
	}
	c.reps.mu.Lock()
	if c.reps.m == nil {
		c.reps.m, c.reps.had = map[string]replicaCount{}, map[string]bool{}
	}
	c.reps.m[addr] = rc
	if rc.n > 0 {
		c.reps.had[addr] = true
	}
	c.reps.mu.Unlock()
	return rc
}

// learnReplicasLater asks the master at addr for its replica count in
// the background, once at a time per master. The goroutine belongs to
// the Client (c.bg); it is started only by the watchdog's loop, which is
// itself in c.bg, so Close's wait covers it.
func (c *Client) learnReplicasLater(addr string) {
	c.reps.mu.Lock()
	if c.reps.asking == nil {
		c.reps.asking = map[string]bool{}
	}
	if c.reps.asking[addr] {
		c.reps.mu.Unlock()
		return
	}
	c.reps.asking[addr] = true
	c.reps.mu.Unlock()
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		c.learnReplicas(c.settleCtx, addr) // Close cancels settleCtx
		c.reps.mu.Lock()
		delete(c.reps.asking, addr)
		c.reps.mu.Unlock()
	}()
}

// acked notes a WAIT's answer for name's master: another number of
// replicas than were expected makes the next request ask again.
func (c *Client) acked(name string, s reentrant.Sync, acked int) {
	if s.Replicas == 0 || acked == s.Replicas {
		return
	}
	c.reps.mu.Lock()
	delete(c.reps.m, c.at(name))
	c.reps.mu.Unlock()
	if c.cfg.Cluster {
		c.refreshSlots() // a failover may have moved the slot
	}
}

// askReplicas asks the master at addr how many replicas are connected
// to it (ROLE).
func (c *Client) askReplicas(ctx context.Context, addr string) (int, error) {
	node := c.rc
	if c.cfg.Cluster {
		if node = c.rc.Nodes()[addr]; node == nil {
			return 0, fmt.Errorf("no connection to %s", addr)
		}
	}
	actx, cancel := c.cmdCtx(ctx)
	defer cancel()
	role, err := node.Do(actx, node.B().Role().Build()).ToArray()
	if err != nil {
		return 0, err
	}
	if len(role) < 3 {
		return 0, nil // not a master (a replica answers READONLY to the request itself)
	}
	if kind, _ := role[0].ToString(); kind != "master" {
		return 0, nil
	}
	reps, err := role[2].ToArray()
	if err != nil {
		return 0, err
	}
	return len(reps), nil
}

// maxUnsynced is how many acquisitions in a row no replica acknowledged
// before an attempt fails (each was given back).
const maxUnsynced = 3

// notSynced is the error of an acquisition or release that no replica
// acknowledged within s.Timeout.
func notSynced(s reentrant.Sync) error {
	return fmt.Errorf("%w: none of the master's %d replicas acknowledged it within %v (Config.ReplicaSyncTimeout)", ErrUnavailable, s.Replicas, s.Timeout)
}
