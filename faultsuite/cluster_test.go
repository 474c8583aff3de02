package faultsuite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/multilock"
	"github.com/rlock-go/rlock/observe"
)

// Timing of the suite. Leases are short so that a round takes seconds.
const (
	// watchdogLease is every Client's WatchdogTimeout, renewed every third
	// of it; it is the longest lease in the suite (the "max lease" of the
	// delayed-restart assumption).
	watchdogLease = 400 * time.Millisecond
	// explicitLease is the Lease of a holder that pauses past it.
	explicitLease = 300 * time.Millisecond
	// commandTimeout and dialTimeout make a stopped master fail fast,
	// well inside a lease.
	commandTimeout = 200 * time.Millisecond
	dialTimeout    = 300 * time.Millisecond
	// nMasters is the RedLock's masters; the single-master case uses the
	// first of them.
	nMasters = 5
	// nWorkers is how many clients contend for the lock.
	nWorkers = 3
)

// The tight Clients of the tight-timeout fault kind: CommandTimeout +
// RenewInterval just under WatchdogTimeout, the most New accepts, and
// explicit leases around CommandTimeout.
const (
	tightRenewInterval  = 150 * time.Millisecond
	tightCommandTimeout = watchdogLease - tightRenewInterval - 5*time.Millisecond
)

// renewIntervals are the workers' RenewInterval: the default (a third of
// the lease) and two that do not divide the lease, as services configured
// apart would have.
var renewIntervals = [nWorkers]time.Duration{0, 150 * time.Millisecond, 190 * time.Millisecond}

// cluster is the servers of one backend, shared by its cases.
type cluster struct {
	backend integration.Backend
	servers []*integration.Server
	// clock: the servers run under libfaketime, so clock faults work.
	clock bool
}

// startCluster starts nMasters servers with persistence (appendfsync
// always, so a restart keeping the data loses nothing acknowledged) and,
// when libfaketime is there, a controllable clock. It skips the test when
// the backend cannot run here, or fails it when RLOCK_REQUIRE names the
// backend.
func startCluster(t *testing.T, b integration.Backend) *cluster {
	t.Helper()
	start := func(clock bool) ([]*integration.Server, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		o := integration.Options{Backend: b, Persist: true}
		if clock {
			o.ClockRate = 1
		}
		return integration.StartMasters(ctx, nMasters, o)
	}
	c := &cluster{backend: b, clock: true}
	servers, err := start(true)
	if errors.Is(err, integration.ErrBackendUnavailable) {
		// Perhaps only libfaketime is missing: run without clock faults.
		var err2 error
		if servers, err2 = start(false); err2 == nil {
			t.Logf("no fake clock (%v): clock faults are left out", err)
			c.clock = false
			err = nil
		} else {
			err = err2
		}
	}
	if err != nil {
		if errors.Is(err, integration.ErrBackendUnavailable) && !integration.Required(b) {
			t.Skipf("backend %s unavailable: %v", b, err)
		}
		t.Fatalf("start %d %s masters (%s=%q): %v", nMasters, b, integration.RequireEnv, os.Getenv(integration.RequireEnv), err)
	}
	for _, s := range servers {
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Errorf("close server: %v", err)
			}
		})
	}
	c.servers = servers
	return c
}

// topology is one way of locking: one master, or RedLock over five.
type topology struct {
	name    string
	masters int // how many of the cluster's servers it uses
	quorum  int
	offset  uint64 // shifts the cycle of lead faults, so that the cases of a short run cover different ones
	spin    bool   // the workers take Redisson's spin lock (one master)
	fair    bool   // the workers take Redisson's fair lock (one master): no fencing tokens
	// rw: the workers take the write lock of Redisson's read-write lock,
	// without fencing tokens (Redisson has none for it), while readers
	// share its read lock (one master; readers_test.go).
	rw bool
	// multi: the workers take a MultiLock over nNames names of one Client,
	// and one worker plain Mutexes of those names (one master;
	// multi_test.go).
	multi bool
	// bounded > 0: the rounds of the bounded default run (CI's), when
	// fewer than defaultRounds, to keep CI's time.
	bounded int
}

var topologies = []topology{
	{name: "single", masters: 1, quorum: 1, offset: 0},
	{name: "redlock", masters: nMasters, quorum: nMasters/2 + 1, offset: defaultRounds},
	{name: "spin", masters: 1, quorum: 1, offset: 2 * defaultRounds, spin: true},
	{name: "fair", masters: 1, quorum: 1, offset: 3 * defaultRounds, fair: true},
	{name: "rwlock", masters: 1, quorum: 1, offset: 4 * defaultRounds, rw: true},
	{name: "multi", masters: 1, quorum: 1, offset: 5 * defaultRounds, multi: true, bounded: 3},
}

// worker is one contending client: a lock.Client per master, as a separate
// process would have.
type worker struct {
	id      int
	clients []*lock.Client
	tight   []*lock.Client // CommandTimeout close to the lease
	sink    *eventSink
	spin    bool // takes Redisson's spin lock
	fair    bool // takes Redisson's fair lock, without fencing tokens
	rw      bool // takes the write lock of Redisson's read-write lock
	multi   bool // takes a MultiLock over several names, or a plain Mutex of one (plainWorker)
	// turn numbers the plain worker's holds in the multi topology, so
	// that they go round the names.
	turn atomic.Uint64
	// fresh connects Clients of the worker's own to the masters, as
	// clients but for one use (close-holding, close-stopped), with
	// FairLockWaitTimeout fairWait (0: the default).
	fresh func(ctx context.Context, fairWait time.Duration) ([]*lock.Client, error)
	// closedFor is the close-stopped fault this worker last took part
	// in (once per fault).
	closedFor *stopSignal
}

// newWorkers connects nWorkers workers to servers; their Clients are
// closed when the test ends.
func newWorkers(t *testing.T, servers []*integration.Server, sink *eventSink, topo topology) []*worker {
	t.Helper()
	ws := make([]*worker, nWorkers)
	for i := range ws {
		w := &worker{id: i, sink: sink, spin: topo.spin, fair: topo.fair, rw: topo.rw, multi: topo.multi}
		w.fresh = func(ctx context.Context, fairWait time.Duration) ([]*lock.Client, error) {
			var cs []*lock.Client
			for m, s := range servers {
				c, err := lock.New(ctx, lock.Config{Addrs: []string{s.Addr()}, WatchdogTimeout: watchdogLease,
					RenewInterval: renewIntervals[i], CommandTimeout: commandTimeout, DialTimeout: dialTimeout, Observer: sink.observer(i, m),
					FairLockWaitTimeout: fairWait})
				if err != nil {
					for _, c := range cs {
						_ = c.Close(context.WithoutCancel(ctx))
					}
					return nil, err
				}
				cs = append(cs, c)
			}
			return cs, nil
		}
		for _, tight := range []bool{false, true} {
			for m, s := range servers {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				cfg := lock.Config{
					Addrs:           []string{s.Addr()},
					WatchdogTimeout: watchdogLease,
					RenewInterval:   renewIntervals[i],
					CommandTimeout:  commandTimeout,
					DialTimeout:     dialTimeout,
					Observer:        sink.observer(i, m),
				}
				if tight {
					cfg.RenewInterval, cfg.CommandTimeout = tightRenewInterval, tightCommandTimeout
				}
				c, err := lock.New(ctx, cfg)
				cancel()
				if err != nil {
					t.Fatalf("lock.New(%s): %v", s.Addr(), err)
				}
				t.Cleanup(func() {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					if err := c.Close(ctx); err != nil && !errors.Is(err, lock.ErrClosed) {
						// A hold left by a round that ended during a fault
						// may not be releasable; Close still stops everything.
						t.Logf("close client of worker %d: %v", w.id, err)
					}
				})
				if tight {
					w.tight = append(w.tight, c)
				} else {
					w.clients = append(w.clients, c)
				}
			}
		}
		ws[i] = w
	}
	return ws
}

// held is what a worker needs of a hold: lock.Held and multilock.Held.
type held interface {
	Context() context.Context
	Owner() uint64
	Fence() uint64
	Unlock(ctx context.Context) error
}

// locker acquires the lock called name for one worker.
type locker interface {
	// lock acquires with a fencing token. blocking waits until ctx ends,
	// otherwise it is one attempt; lease > 0 is an explicit lease without
	// the watchdog.
	lock(ctx context.Context, blocking bool, lease time.Duration) (held, error)
	// spans are the names a hold h of this locker covers, with its token
	// for each.
	spans(h held) []span
	// multilock: its calls are package multilock's (measured against
	// their deadlines, not bounded: slack_test.go).
	multilock() bool
}

func (w *worker) locker(name string, tight bool) locker {
	cs := w.clients
	if tight {
		cs = w.tight
	}
	return w.lockerOn(cs, name)
}

// lockerOn is locker on the Clients cs, one per master.
func (w *worker) lockerOn(cs []*lock.Client, name string) locker {
	if len(cs) == 1 && w.multi {
		return w.multiLocker(cs[0], name)
	}
	if len(cs) == 1 && w.spin {
		return single{m: cs[0].SpinMutex(name, lock.SpinBackoff{})}
	}
	if len(cs) == 1 && w.fair {
		return single{m: cs[0].FairMutex(name), noFence: true}
	}
	if len(cs) == 1 && w.rw {
		return single{m: cs[0].ReadWriteMutex(name).WriteLock(), noFence: true}
	}
	if len(cs) == 1 {
		return single{m: cs[0].Mutex(name)}
	}
	ms := make([]*lock.Mutex, len(cs))
	for i, c := range cs {
		ms[i] = c.Mutex(name)
	}
	return redlock{multilock.NewRedLock(ms...), w.sink.roundObserver(w.id)}
}

type single struct {
	m       *lock.Mutex
	noFence bool // a fair lock, a read-write lock's write half: no token (Fence 0)
	idx     int  // the index of its name in the round's (the multi topology's plain worker)
}

func (s single) spans(h held) []span { return []span{{lock: s.idx, token: h.Fence()}} }

func (single) multilock() bool { return false }

func (s single) lock(ctx context.Context, blocking bool, lease time.Duration) (held, error) {
	var opts []lock.Option
	if !s.noFence {
		opts = append(opts, lock.Fenced())
	}
	if lease > 0 {
		opts = append(opts, lock.Lease(lease))
	}
	var h *lock.Held
	var err error
	if blocking {
		h, err = s.m.Lock(ctx, opts...)
	} else {
		h, err = s.m.TryLock(ctx, opts...)
	}
	if err != nil {
		return nil, err
	}
	return h, nil
}

type redlock struct {
	l   *multilock.Lock
	obs *observe.Observer
}

func (r redlock) spans(h held) []span { return []span{{token: h.Fence()}} }

func (redlock) multilock() bool { return true }

func (r redlock) lock(ctx context.Context, blocking bool, lease time.Duration) (held, error) {
	opts := []lock.Option{lock.Fenced(), multilock.Observe(r.obs)}
	if lease > 0 {
		opts = append(opts, lock.Lease(lease))
	}
	var h *multilock.Held
	var err error
	if blocking {
		h, err = r.l.Lock(ctx, opts...)
	} else {
		h, err = r.l.TryLock(ctx, opts...)
	}
	if err != nil {
		return nil, err
	}
	return h, nil
}

// lockName is unique per case and round, so that every round starts with
// a fresh lock and a fresh fencing counter.
func lockName(b integration.Backend, topo topology, seed uint64) string {
	return fmt.Sprintf("faultsuite:%s:%s:%d:%d", b, topo.name, seed, time.Now().UnixNano())
}
