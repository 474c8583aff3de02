package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredislib "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"

	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/observe"
)

// locker is one library's lock over a name, on its own connections: what
// every scenario drives. Lock waits until the name is free or ctx ends.
type locker interface {
	Lock(ctx context.Context, name string) (unlock func(context.Context) error, err error)
	Close()
}

// stallAfter bounds a Lock whose wait cannot be long (a lock nobody
// holds, or one released within milliseconds). A call still blocked after
// it has stalled: rueidislock's WithContext can wait for ever when an
// acquire attempt outlived its TryNextAfter (20 ms) on a loaded machine,
// since it then waits for an invalidation of a key nobody touches. The
// harness cancels such a call, counts it, and calls Lock again.
const stallAfter = 2 * time.Second

// stalls counts stalled calls by scenario and library, for the page.
var stalls = struct {
	sync.Mutex
	n map[string]int
}{n: map[string]int{}}

func noteStall(where string) {
	stalls.Lock()
	stalls.n[where]++
	stalls.Unlock()
	logf("  stall: %s: a Lock call did not return within %v; cancelled and retried", where, stallAfter)
}

// lockBounded calls l.Lock and, when it stalls, cancels it and calls it
// again (at most 3 calls). where names the scenario and library. It
// reports whether any call stalled. The context of a successful call is
// cancelled only once the returned unlock has run (rueidislock releases a
// lock when it is). Until 2026-12-01 it was never cancelled: each cycle
// left its context among the run's context's children, a map that grew
// by one entry per cycle for the whole run, and that every garbage
// collection scanned.
func lockBounded(ctx context.Context, l locker, name, where string) (func(context.Context) error, bool, error) {
	stalled := false
	for try := 1; ; try++ {
		c, cancel := context.WithCancel(ctx)
		t := time.AfterFunc(stallAfter, cancel)
		unlock, err := l.Lock(c, name)
		if t.Stop() {
			if err != nil {
				cancel()
				return unlock, stalled, err
			}
			return func(uctx context.Context) error {
				defer cancel()
				return unlock(uctx)
			}, stalled, nil
		}
		cancel()
		if err == nil { // acquired just as the timer fired, and then cancelled
			unlock(context.Background())
		}
		if ctx.Err() != nil {
			return nil, stalled, ctx.Err()
		}
		stalled = true
		noteStall(where)
		if try == 3 {
			return nil, stalled, fmt.Errorf("%s: Lock stalled %d times in a row", where, try)
		}
	}
}

// library is how to open a locker of one library on one master.
type library struct {
	name   string
	config string // how it is configured here, for the page
	polls  bool   // waiters poll instead of being woken
	client string // the Redis client underneath: rueidis, "rueidis, pipelining" or go-redis
	open   func(ctx context.Context, addr string, o openOpts) (locker, error)
}

// openOpts are the scenario's wishes for a locker.
type openOpts struct {
	// requests, when set, counts every request the locker sends (a
	// script call counts once).
	requests *atomic.Int64
	// lease and renew set the renewing libraries' lease and renewal
	// period (rlock: WatchdogTimeout, RenewInterval; rueidislock:
	// KeyValidity, ExtendInterval); zero means their defaults.
	lease, renew time.Duration
	// observer receives rlock's events.
	observer *observe.Observer
	// replicaSync is rlock's Config.ReplicaSyncTimeout: zero means its
	// default (1 s), negative turns replica sync off.
	replicaSync time.Duration
}

// The polling waiters (redsync, redislock, and rlock's scripts polled)
// all retry with the same jittered exponential backoff: from pollBase,
// doubling up to pollCap, each delay drawn from [d/2, 3d/2).
const (
	pollBase = time.Millisecond
	pollCap  = 16 * time.Millisecond
)

// pollDelay is the delay before retry number n (1 for the first retry),
// bounded by ttl when the library knows the holder's remaining lease.
func pollDelay(n int, ttl time.Duration) time.Duration {
	d := pollBase << min(max(n-1, 0), 20)
	d = min(d, pollCap)
	d = d/2 + rand.N(d)
	if ttl > 0 {
		d = min(d, ttl)
	}
	return d
}

var (
	libRlock = library{
		client: "rueidis",
		name:   "rlock",
		config: "lock.New defaults (lease 30 s, watchdog); waiters woken by pub/sub",
		open:   openRlock,
	}
	libPoll = library{
		client: "rueidis",
		name:   "rlock-poll",
		config: "rlock (lock.New defaults), but a waiter calls TryLock without Wait in a loop, with the shared jittered backoff bounded by the TTL the failed attempt returned",
		polls:  true,
		open:   openPoll,
	}
	libSpin = library{
		client: "rueidis",
		name:   "rlock-spin",
		config: "rlock's spin lock (Client.SpinMutex, Redisson's getSpinLock): waiters poll with Redisson's backoff (1 ms doubling with jitter to 128 ms), releases publish nothing",
		polls:  true,
		open:   openSpin,
	}
	libFair = library{
		client: "rueidis",
		name:   "rlock-fair",
		config: "rlock's fair lock (Client.FairMutex, Redisson's getFairLock): waiters queue in Redis and are granted in order; a release wakes only the queue's head, on its own channel",
		open:   openFair,
	}
	libRW = library{
		client: "rueidis",
		name:   "rlock-rw",
		config: fmt.Sprintf("rlock's read-write lock (Client.ReadWriteMutex, Redisson's getReadWriteLock): one contender in %d takes the write lock, the others the read lock, which they share (so acquisitions can pass a mutex's ideal); waiters woken by pub/sub, readers without queueing", rwWriterEvery),
		open:   openRW,
	}
	libRedsync = library{
		client: "go-redis",
		name:   "redsync",
		config: "redsync v4, one go-redis v9 pool, expiry 8 s (default), unlimited tries, shared jittered backoff",
		polls:  true,
		open:   openRedsync,
	}
	libRedislock = library{
		client: "go-redis",
		name:   "redislock",
		config: "bsm/redislock on go-redis v9, TTL 30 s, shared jittered backoff as RetryStrategy",
		polls:  true,
		open:   openRedislock,
	}
	libRueidislock = library{
		client: "rueidis, pipelining", // client-side caching starts the pipe's reader and writer goroutines
		name:   "rueidislock",
		config: "rueidislock, KeyMajority 1 (one key, like the others), NoLoopTracking (its documented option for Redis >= 7.0.5), validity 5 s renewed every 2.5 s (defaults); waiters woken by client-side-caching invalidations",
		open: func(ctx context.Context, addr string, o openOpts) (locker, error) {
			return openRueidislock(ctx, addr, o, true)
		},
	}
	// libRueidislockDefaults leaves NoLoopTracking off, as NewLocker does:
	// a holder is then told of its own extensions and extends again at
	// once (see the renewal scenario).
	libRueidislockDefaults = library{
		client: "rueidis, pipelining",
		name:   "rueidislock (NoLoopTracking off)",
		config: "as rueidislock, but without NoLoopTracking (NewLocker's default)",
		open: func(ctx context.Context, addr string, o openOpts) (locker, error) {
			return openRueidislock(ctx, addr, o, false)
		},
	}
)

// ---- rlock ----

type rlockLocker struct {
	c  *lock.Client
	rc rueidis.Client // set when the bench made it (counting), closed after c
}

func openRlock(ctx context.Context, addr string, o openOpts) (locker, error) {
	cfg := lock.Config{Addrs: []string{addr}, WatchdogTimeout: o.lease, RenewInterval: o.renew, Observer: o.observer, ReplicaSyncTimeout: o.replicaSync}
	if o.requests == nil {
		c, err := lock.New(ctx, cfg)
		if err != nil {
			return nil, err
		}
		return &rlockLocker{c: c}, nil
	}
	rc, err := rueidis.NewClient(rlockClientOption(addr))
	if err != nil {
		return nil, err
	}
	counted := &countingClient{Client: rc, n: o.requests}
	c, err := lock.FromClient(counted, cfg)
	if err != nil {
		rc.Close()
		return nil, err
	}
	return &rlockLocker{c: c, rc: rc}, nil
}

// rlockClientOption is the rueidis configuration lock.New makes.
func rlockClientOption(addr string) rueidis.ClientOption {
	return rueidis.ClientOption{
		InitAddress:         []string{addr},
		ForceSingleClient:   true,
		DisableCache:        true,
		Dialer:              net.Dialer{Timeout: 5 * time.Second},
		ConnWriteTimeout:    3 * time.Second, // lock.Config's default CommandTimeout
		ReadBufferEachConn:  64 << 10,        // lock.New's connBuffer
		WriteBufferEachConn: 64 << 10,
	}
}

func (l *rlockLocker) Lock(ctx context.Context, name string) (func(context.Context) error, error) {
	h, err := l.c.Mutex(name).Lock(ctx)
	if err != nil {
		return nil, err
	}
	return h.Unlock, nil
}

func (l *rlockLocker) Close() {
	l.c.Close(context.Background())
	if l.rc != nil {
		l.rc.Close()
	}
}

// ---- rlock, polled ----

// pollLocker is the baseline that shows what pub/sub wake-ups buy: rlock
// itself, but a waiter calls TryLock without Wait in a loop, sleeping a
// jittered backoff bounded by the holder's TTL that the failed attempt
// returned (lock.ConflictError), as the polling libraries do.
type pollLocker struct {
	*rlockLocker
}

func openPoll(ctx context.Context, addr string, o openOpts) (locker, error) {
	l, err := openRlock(ctx, addr, o)
	if err != nil {
		return nil, err
	}
	return pollLocker{l.(*rlockLocker)}, nil
}

// rwLocker takes rlock's read-write lock: the write lock when write, else
// the read lock.
type rwLocker struct {
	*rlockLocker
	write bool
}

// rwWriterEvery makes one rlock-rw contender in that many a writer.
const rwWriterEvery = 4

// rwOpened counts the rwLockers opened: every rwWriterEvery-th writes.
var rwOpened atomic.Int64

func openRW(ctx context.Context, addr string, o openOpts) (locker, error) {
	l, err := openRlock(ctx, addr, o)
	if err != nil {
		return nil, err
	}
	return rwLocker{l.(*rlockLocker), rwOpened.Add(1)%rwWriterEvery == 1}, nil
}

func (l rwLocker) Lock(ctx context.Context, name string) (func(context.Context) error, error) {
	rw := l.c.ReadWriteMutex(name)
	m := rw.ReadLock()
	if l.write {
		m = rw.WriteLock()
	}
	h, err := m.Lock(ctx)
	if err != nil {
		return nil, err
	}
	return h.Unlock, nil
}

// spinLocker takes rlock's spin lock.
type spinLocker struct{ *rlockLocker }

func openSpin(ctx context.Context, addr string, o openOpts) (locker, error) {
	l, err := openRlock(ctx, addr, o)
	if err != nil {
		return nil, err
	}
	return spinLocker{l.(*rlockLocker)}, nil
}

// fairLocker takes rlock's fair lock.
type fairLocker struct{ *rlockLocker }

func openFair(ctx context.Context, addr string, o openOpts) (locker, error) {
	l, err := openRlock(ctx, addr, o)
	if err != nil {
		return nil, err
	}
	return fairLocker{l.(*rlockLocker)}, nil
}

func (l fairLocker) Lock(ctx context.Context, name string) (func(context.Context) error, error) {
	h, err := l.c.FairMutex(name).Lock(ctx)
	if err != nil {
		return nil, err
	}
	return h.Unlock, nil
}

func (l spinLocker) Lock(ctx context.Context, name string) (func(context.Context) error, error) {
	h, err := l.c.SpinMutex(name, lock.SpinBackoff{}).Lock(ctx)
	if err != nil {
		return nil, err
	}
	return h.Unlock, nil
}

func (l pollLocker) Lock(ctx context.Context, name string) (func(context.Context) error, error) {
	m := l.c.Mutex(name)
	for n := 1; ; n++ {
		h, err := m.TryLock(ctx)
		if err == nil {
			return h.Unlock, nil
		}
		var conflict *lock.ConflictError
		if !errors.As(err, &conflict) {
			return nil, err
		}
		t := time.NewTimer(pollDelay(n, conflict.TTL))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// ---- redsync ----

type redsyncLocker struct {
	rdb []*goredislib.Client
	rs  *redsync.Redsync
}

func openRedsync(ctx context.Context, addr string, o openOpts) (locker, error) {
	return openRedsyncPools(ctx, []string{addr}, o)
}

// openRedsyncPools opens redsync over one pool per address: with several,
// redsync's Redlock.
func openRedsyncPools(ctx context.Context, addrs []string, o openOpts) (*redsyncLocker, error) {
	l := &redsyncLocker{}
	var pools []redsyncredis.Pool
	for _, a := range addrs {
		rdb := goredisClient(a, o)
		if err := rdb.Ping(ctx).Err(); err != nil {
			l.Close()
			rdb.Close()
			return nil, err
		}
		l.rdb = append(l.rdb, rdb)
		pools = append(pools, goredis.NewPool(rdb))
	}
	l.rs = redsync.New(pools...)
	return l, nil
}

func (l *redsyncLocker) Lock(ctx context.Context, name string) (func(context.Context) error, error) {
	m := l.rs.NewMutex(name,
		redsync.WithTries(math.MaxInt32),
		redsync.WithRetryDelayFunc(func(tries int) time.Duration { return pollDelay(tries, 0) }))
	if err := m.LockContext(ctx); err != nil {
		return nil, errors.Join(err, ctx.Err())
	}
	return func(ctx context.Context) error {
		ok, err := m.UnlockContext(ctx)
		if err == nil && !ok {
			err = errors.New("redsync: not unlocked")
		}
		return err
	}, nil
}

func (l *redsyncLocker) Close() {
	for _, c := range l.rdb {
		c.Close()
	}
}

// ---- redislock ----

type redislockLocker struct {
	rdb *goredislib.Client
	c   *redislock.Client
}

func openRedislock(ctx context.Context, addr string, o openOpts) (locker, error) {
	rdb := goredisClient(addr, o)
	if err := rdb.Ping(ctx).Err(); err != nil {
		rdb.Close()
		return nil, err
	}
	return &redislockLocker{rdb: rdb, c: redislock.New(rdb)}, nil
}

// pollStrategy is the shared backoff as a redislock RetryStrategy.
type pollStrategy struct{ n int }

func (s *pollStrategy) NextBackoff() time.Duration { s.n++; return pollDelay(s.n, 0) }

func (l *redislockLocker) Lock(ctx context.Context, name string) (func(context.Context) error, error) {
	lk, err := l.c.Obtain(ctx, name, 30*time.Second, &redislock.Options{RetryStrategy: &pollStrategy{}})
	if err != nil {
		return nil, err
	}
	return lk.Release, nil
}

func (l *redislockLocker) Close() { l.rdb.Close() }

// ---- rueidislock ----

type rueidisLocker struct {
	l rueidislock.Locker
}

func openRueidislock(ctx context.Context, addr string, o openOpts, noLoop bool) (locker, error) {
	opt := rueidislock.LockerOption{
		ClientOption:   rueidis.ClientOption{InitAddress: []string{addr}},
		KeyMajority:    1,
		NoLoopTracking: noLoop,
		KeyValidity:    o.lease,
		ExtendInterval: o.renew,
	}
	if o.requests != nil {
		opt.ClientBuilder = func(co rueidis.ClientOption) (rueidis.Client, error) {
			c, err := rueidis.NewClient(co)
			if err != nil {
				return nil, err
			}
			return &countingClient{Client: c, n: o.requests}, nil
		}
	}
	l, err := rueidislock.NewLocker(opt)
	if err != nil {
		return nil, err
	}
	return &rueidisLocker{l: l}, nil
}

func (l *rueidisLocker) Lock(ctx context.Context, name string) (func(context.Context) error, error) {
	_, cancel, err := l.l.WithContext(ctx, name)
	if err != nil {
		return nil, err
	}
	return func(context.Context) error { cancel(); return nil }, nil
}

func (l *rueidisLocker) Close() { l.l.Close() }

// ---- request counting ----

// goredisClient makes a go-redis client with its defaults, counting
// requests when asked.
func goredisClient(addr string, o openOpts) *goredislib.Client {
	rdb := goredislib.NewClient(&goredislib.Options{Addr: addr})
	if o.requests != nil {
		rdb.AddHook(countingHook{n: o.requests})
	}
	return rdb
}

type countingHook struct{ n *atomic.Int64 }

func (h countingHook) DialHook(next goredislib.DialHook) goredislib.DialHook { return next }

func (h countingHook) ProcessHook(next goredislib.ProcessHook) goredislib.ProcessHook {
	return func(ctx context.Context, cmd goredislib.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

func (h countingHook) ProcessPipelineHook(next goredislib.ProcessPipelineHook) goredislib.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredislib.Cmder) error {
		h.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// countingClient counts the requests sent through a rueidis client,
// dedicated connections (subscriptions) included.
type countingClient struct {
	rueidis.Client
	n *atomic.Int64
}

func (c *countingClient) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	c.n.Add(1)
	return c.Client.Do(ctx, cmd)
}

func (c *countingClient) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	c.n.Add(int64(len(cmds)))
	return c.Client.DoMulti(ctx, cmds...)
}

func (c *countingClient) DoCache(ctx context.Context, cmd rueidis.Cacheable, ttl time.Duration) rueidis.RedisResult {
	c.n.Add(1)
	return c.Client.DoCache(ctx, cmd, ttl)
}

func (c *countingClient) DoMultiCache(ctx context.Context, cmds ...rueidis.CacheableTTL) []rueidis.RedisResult {
	c.n.Add(int64(len(cmds)))
	return c.Client.DoMultiCache(ctx, cmds...)
}

func (c *countingClient) Receive(ctx context.Context, sub rueidis.Completed, fn func(rueidis.PubSubMessage)) error {
	c.n.Add(1)
	return c.Client.Receive(ctx, sub, fn)
}

func (c *countingClient) Dedicate() (rueidis.DedicatedClient, func()) {
	d, cancel := c.Client.Dedicate()
	return &countingDedicated{DedicatedClient: d, n: c.n}, cancel
}

func (c *countingClient) Dedicated(fn func(rueidis.DedicatedClient) error) error {
	return c.Client.Dedicated(func(d rueidis.DedicatedClient) error {
		return fn(&countingDedicated{DedicatedClient: d, n: c.n})
	})
}

type countingDedicated struct {
	rueidis.DedicatedClient
	n *atomic.Int64
}

func (c *countingDedicated) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	c.n.Add(1)
	return c.DedicatedClient.Do(ctx, cmd)
}

func (c *countingDedicated) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	c.n.Add(int64(len(cmds)))
	return c.DedicatedClient.DoMulti(ctx, cmds...)
}

func (c *countingDedicated) Receive(ctx context.Context, sub rueidis.Completed, fn func(rueidis.PubSubMessage)) error {
	c.n.Add(1)
	return c.DedicatedClient.Receive(ctx, sub, fn)
}
