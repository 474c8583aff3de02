package lock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/reentrant"
)

// replicaRefresh is how long a master's replica count is trusted before
// it is asked again (ROLE): replicas that attach later are waited for
// from then on.
const replicaRefresh = 10 * time.Second

// replicaRetry is how soon a master whose count could not be had is asked
// again by an acquire or a release (the watchdog asks at its next tick).
const replicaRetry = time.Second

// replicas counts the connected replicas of each master, for the WAIT
// after an acquire or a release (Config.ReplicaSyncTimeout). Asking is
// one ROLE per master and replicaRefresh, sent before the request that
// needs it; a WAIT answered by another number of replicas than expected
// asks again before the next one. Guarded by mu.
type replicas struct {
	rc           rueidis.Client
	crc          *boundRC // rc for a caller's ROLE (bounded.go); nil in tests that make replicas alone
	cfg          Config
	at           func(name string) string       // the master that owns name
	readSlots    func(ctx context.Context) bool // a cluster's slot table, read now
	refreshSlots func()                         // a cluster's slot table, read soon
	ctx          context.Context                // background asks end with it: Close cancels it
	bg           *sync.WaitGroup                // and waits for them
	spawn        func(f func())                 // runs f on one of the Client's workers

	mu     sync.Mutex
	m      map[string]replicaCount // by master address
	had    map[string]bool         // masters seen with replicas by this Client
	asking map[string]bool         // masters asked in the background now
}

// replicaCount is what a Client knows of one master's replicas.
type replicaCount struct {
	n         int       // replicas listed by the last ROLE answered (kept when a later one is not)
	asked     time.Time // when ROLE was last asked; zero: ask before the next request
	known     bool      // n answers the last ROLE asked: since then no refresh failed and no WAIT disagreed
	refused   error     // the last ROLE was refused (ACL): ErrAuth naming ROLE
	replicaOf string    // the last ROLE answered "slave": the master it follows
}

// stale reports whether rc must be asked again before it is used.
func (rc replicaCount) stale() bool {
	if rc.known {
		return time.Since(rc.asked) > replicaRefresh
	}
	return time.Since(rc.asked) > replicaRetry
}

// defaultReplicaSyncTimeout is Redisson's slavesSyncTimeout.
const defaultReplicaSyncTimeout = time.Second

// sync returns what an acquire or release of name must wait for, and the
// error that refuses an acquire: ErrAuth when the Client's user may not
// ask the master for its replicas (ROLE).
//
// The check fails closed. A request goes out without WAIT only when the
// master's last ROLE answer, since the last refresh or failover, listed no
// replica and the master was never seen with one by this Client. Anything
// else waits for at least one replica: a ROLE whose answer was lost, cut
// short or refused; a count a WAIT disagreed with; a master this Client
// saw with replicas that now lists none (cut off from them by a
// partition: a grant there reaches nobody a failover could promote, and
// requests fail with ErrUnavailable until a replica is back). A master
// with no replica whose ROLE cannot be answered therefore grants nothing
// until it can: safe, not silent.
func (r *replicas) sync(ctx context.Context, name string) (reentrant.Sync, error) {
	addr := r.at(name)
	s, err := r.syncAt(ctx, addr, false)
	if r.cfg.Cluster && s.Replicas > 0 && !r.known(addr) && r.readSlots(ctx) && r.at(name) != addr {
		// In a cluster, a master that cannot be asked may no longer own
		// the name's slot (a failover): the slot's owner now is asked.
		return r.syncAt(ctx, r.at(name), false)
	}
	return s, err
}

// known reports whether the count of the master at addr answers its last
// ROLE.
func (r *replicas) known(addr string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m[addr].known
}

// syncAt is sync for the master at addr. For a renewal the count is the
// last one known, even if old (a fresh one is asked for in the
// background), and a refused ROLE still sends the WAIT.
func (r *replicas) syncAt(ctx context.Context, addr string, renewal bool) (reentrant.Sync, error) {
	if r.cfg.ReplicaSyncTimeout < 0 {
		return reentrant.Sync{}, nil
	}
	r.mu.Lock()
	rc, ok := r.m[addr]
	r.mu.Unlock()
	if !ok || rc.stale() {
		if renewal {
			// The watchdog never waits for the question: it renews with
			// the last count known, and the answer serves the next tick.
			r.learnReplicasLater(addr)
		} else {
			rc = r.learnReplicas(ctx, addr)
		}
	}
	r.mu.Lock()
	had := r.had[addr]
	r.mu.Unlock()
	if rc.known && rc.n == 0 && !had {
		return reentrant.Sync{}, nil
	}
	s := reentrant.Sync{Replicas: max(rc.n, 1), Timeout: r.cfg.ReplicaSyncTimeout}
	if rc.refused != nil && !renewal {
		return s, rc.refused
	}
	return s, nil
}

// renewSync is the watchdog's Config.Sync: a renewal of name counts once
// a replica of its master acknowledged it, as an acquire does.
func (r *replicas) renewSync(ctx context.Context, name string) (string, reentrant.Sync) {
	addr := r.at(name)
	s, _ := r.syncAt(ctx, addr, true) // a refused ROLE still sends the WAIT
	return addr, s
}

// askAtNew asks the master New connects to for its ROLE, before the first
// acquire. A replica given as the master is refused at once (a failover
// may be under way: ErrUnavailable), not by every Lock's READONLY; with
// Sentinel, rueidis follows the master itself, and a cluster's nodes are
// read from its slot table. With replica sync on, the answer is the
// master's replica count, which the first acquire then needs not ask
// for, and a user who may not ask (ROLE) is told now, not by a replica
// sync silently off; with it off, a ROLE that is refused or not answered
// leaves the Client as it was before it was asked. In a cluster this asks
// the first node only: the others are asked before their first request.
func (r *replicas) askAtNew(ctx context.Context, addr string, sentinel bool) error {
	rc := r.learnReplicas(ctx, addr)
	switch {
	case rc.replicaOf != "" && !r.cfg.Cluster && !sentinel:
		return fmt.Errorf("%w: %s is a replica of %s (ROLE): a replica answers READONLY to every lock: give the master's address, or Config.MasterSet with the sentinels' addresses", ErrUnavailable, addr, rc.replicaOf)
	case rc.refused != nil && r.cfg.ReplicaSyncTimeout >= 0:
		return rc.refused
	}
	return nil
}

// learnReplicas asks the master at addr for its replica count and keeps
// the answer for replicaRefresh. A question that is not answered keeps
// the last count but makes it unknown (see sync), and is asked again
// after replicaRetry; one cut short by the caller's own deadline is not
// kept at all.
func (r *replicas) learnReplicas(ctx context.Context, addr string) replicaCount {
	n, err := r.askReplicas(ctx, addr)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m, r.had = map[string]replicaCount{}, map[string]bool{}
	}
	rc := r.m[addr]
	switch {
	case err == nil:
		rc = replicaCount{n: n, asked: time.Now(), known: true}
		if n > 0 {
			r.had[addr] = true
		}
	case ctx.Err() != nil:
		// The caller's time ran out, not the master's: nothing is
		// learned, and this request waits as for an unknown count.
		rc.known = false
		return rc
	default:
		rc.known, rc.asked, rc.refused = false, time.Now(), roleRefused(err)
		if nm := (*notMaster)(nil); errors.As(err, &nm) {
			rc.replicaOf = nm.of
		}
	}
	r.m[addr] = rc
	return rc
}

// roleRefused returns the error of a ROLE that the master will not answer
// however often it is asked, or nil for one that may be answered later (a
// lost reply, LOADING): the ACL refuses it (ErrAuth), or the server does
// not know it (renamed away, or a stand-in without it: ErrInvalid).
func roleRefused(err error) error {
	if _, ok := rueidis.IsRedisErr(err); !ok {
		return nil
	}
	switch classify(err) {
	case ErrAuth:
		return fmt.Errorf("%w: ROLE refused (%v): replica sync (Config.ReplicaSyncTimeout) asks it for the master's replicas: allow the user +role, or turn replica sync off (ReplicaSyncTimeout < 0)", ErrAuth, err)
	case ErrUnavailable:
		return nil
	}
	return fmt.Errorf("%w: the server does not answer ROLE (%v): replica sync (Config.ReplicaSyncTimeout) asks it for the master's replicas: turn replica sync off (ReplicaSyncTimeout < 0) for a server without replicas", ErrInvalid, err)
}

// learnReplicasLater asks the master at addr for its replica count in
// the background, once at a time per master. The goroutine belongs to
// the Client (c.bg); it is started only by the watchdog's loop, which is
// itself in c.bg, so Close's wait covers it.
func (r *replicas) learnReplicasLater(addr string) {
	r.mu.Lock()
	if r.asking == nil {
		r.asking = map[string]bool{}
	}
	if r.asking[addr] {
		r.mu.Unlock()
		return
	}
	r.asking[addr] = true
	r.mu.Unlock()
	r.bg.Add(1)
	r.spawn(func() {
		defer r.bg.Done()
		r.learnReplicas(r.ctx, addr) // Close cancels settleCtx
		r.mu.Lock()
		delete(r.asking, addr)
		r.mu.Unlock()
	})
}

// acked notes a WAIT's answer for name's master: another number of
// replicas than were expected makes the count unknown, and the next
// request asks again (until then it waits as before). An answer that
// agrees with a count learnt since (a WAIT for one replica, decided while
// the count was unknown, answered 0 by a master that ROLE now says has
// none) changes nothing: undoing that count would make the next renewal
// wait for a replica the master does not have, and so on for ever.
//
// A WAIT acknowledged by a replica is also the sign that the name's master
// has replicas, whatever ROLE said or could not say: it keeps needing one
// (see sync) when it reports none later. A cluster Client whose table
// named a demoted node learns of its new master this way when the new
// master could not be asked yet.
func (r *replicas) acked(name string, s reentrant.Sync, acked int) {
	if s.Replicas == 0 {
		return
	}
	addr := r.at(name)
	if acked > 0 {
		r.mu.Lock()
		if r.had == nil {
			r.m, r.had = map[string]replicaCount{}, map[string]bool{}
		}
		r.had[addr] = true
		r.mu.Unlock()
	}
	if acked == s.Replicas {
		return
	}
	r.mu.Lock()
	if rc, ok := r.m[addr]; ok && !(rc.known && !rc.stale() && acked == rc.n) {
		rc.known, rc.asked = false, time.Time{}
		r.m[addr] = rc
	}
	r.mu.Unlock()
	if r.cfg.Cluster {
		r.refreshSlots() // a failover may have moved the slot
	}
}

// askReplicas asks the master at addr how many replicas are connected
// to it (ROLE).
func (r *replicas) askReplicas(ctx context.Context, addr string) (int, error) {
	node := r.rc
	if r.cfg.Cluster {
		if node = r.rc.Nodes()[addr]; node == nil {
			return 0, fmt.Errorf("no connection to %s", addr)
		}
	}
	if r.crc != nil {
		node = r.crc.on(node)
	}
	actx, cancel := context.WithTimeout(ctx, r.cfg.CommandTimeout)
	defer cancel()
	role, err := node.Do(actx, node.B().Role().Build()).ToArray()
	if err != nil {
		return 0, err
	}
	// A node that is not a master says nothing of the replicas of the
	// master the request will reach: a replica given as the master
	// answers READONLY to the request itself, but in a cluster the node
	// the slot table names may have been demoted by a failover, and the
	// request follows MOVED to its new master.
	if len(role) < 3 {
		return 0, fmt.Errorf("%s is not a master (ROLE answered %d elements)", addr, len(role))
	}
	if kind, _ := role[0].ToString(); kind != "master" {
		nm := &notMaster{addr: addr, role: kind}
		if kind == "slave" && len(role) >= 3 {
			host, _ := role[1].ToString()
			port, _ := role[2].AsInt64()
			nm.of = net.JoinHostPort(host, strconv.FormatInt(port, 10))
		}
		return 0, nm
	}
	reps, err := role[2].ToArray()
	if err != nil {
		return 0, err
	}
	return len(reps), nil
}

// notMaster is askReplicas's error for a node that does not answer ROLE
// as a master: a replica (of the master at of), or a sentinel.
type notMaster struct{ addr, role, of string }

func (e *notMaster) Error() string {
	if e.of != "" {
		return fmt.Sprintf("%s is not a master (ROLE %s of %s)", e.addr, e.role, e.of)
	}
	return fmt.Sprintf("%s is not a master (ROLE %s)", e.addr, e.role)
}

// maxUnsynced is how many acquisitions in a row no replica acknowledged
// before an attempt fails (each was given back).
const maxUnsynced = 3

// notSynced is the error of an acquisition or release that no replica
// acknowledged within s.Timeout.
func notSynced(s reentrant.Sync) error {
	return fmt.Errorf("%w: none of the master's %d replicas acknowledged it within %v (Config.ReplicaSyncTimeout)", ErrUnavailable, s.Replicas, s.Timeout)
}
