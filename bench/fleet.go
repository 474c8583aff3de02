package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/internal/redissonstandin"
	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/observe"
	"github.com/rlock-go/rlock/reentrant"
)

// Scenario 7: a mixed fleet. One lock is contended by one
// Redisson-protocol waiter, a stand-in for a Java service on Redisson's
// RLock, beside N Go waiters of rlock: either one lock.Client with N
// goroutines (one local queue, so one Go contender in Redis at a time,
// woken at once by the Client's own releases) or N lock.Clients with one
// goroutine each (N contenders, each woken by the unlock message, as the
// Java one is). Every contender loops Lock, hold, Unlock until the lock
// has been taken a fixed number of times; the share of the acquisitions
// each side got shows what rlock's waiting does to Java waiters. A
// control row puts N more Redisson stand-ins in the Go waiters' place: the
// share one Java waiter gets among its own kind.
//
// The stand-in sends Redisson's acquire and release scripts in their own
// text (as lock/redisson_test.go does) with a client id of its own, and
// waits as RedissonLock.lock() does: one attempt; if refused, SUBSCRIBE
// to the lock's channel on its pub/sub connection, then attempt again,
// and after each refusal wait on the entry's semaphore (released by every
// unlock message) up to the TTL the refusal returned; once acquired,
// UNSUBSCRIBE in the background (the next lock() waits for it, as
// Redisson's per-channel semaphore makes it). Its unlock deletes the
// unlock latch in the background afterwards, as Redisson's does. Its lease
// is Redisson's watchdog default (30 s); holds are far shorter, so it
// never renews.

type fleetResult struct {
	GoWaiters    int
	Hold         time.Duration
	Acquisitions int // per case and round
	Rounds       int
	RTT          summary
	Rows         []fleetRow
}

type fleetRow struct {
	Name    string
	Control bool          // the others are Redisson stand-ins too
	Pause   time.Duration // between a waiter's Unlock and its next Lock
	Java    fleetSide     // the one Redisson-protocol waiter
	Others  fleetSide     // the N Go waiters (or, in the control, N stand-ins)
	Shares  []float64     // the Java waiter's share in each round

	// What follows a release, counted over consecutive acquisitions: the
	// share of the acquisitions after a release by one of the others that
	// went to the Java waiter, and that went back to the very releaser
	// (it called Lock again at once and beat the woken waiters); and the
	// share of those after a release by the Java waiter that went back to
	// it.
	JavaAfterOther, OtherRebarge, JavaRebarge float64
}

type fleetSide struct {
	Waiters      int
	Acquisitions int64
	Share        float64 // of every acquisition
	Fair         float64 // Waiters / every waiter
	Attempts     float64 // acquire scripts sent per acquisition
	Wakes        float64 // Java: wake-ups by an unlock message per acquisition
	TTLWakes     int64   // Java: waits that ended on the TTL, not a message
	Wait         summary
	MinOne       int64 // fewest acquisitions of one waiter of the side
	MaxOne       int64

	waits samples
}

type fleetCase struct {
	name    string
	shared  bool          // the Go waiters share one lock.Client
	control bool          // the others are Redisson stand-ins
	pause   time.Duration // between a waiter's Unlock and its next Lock
}

// fleetCases are the cases: each with every waiter calling Lock again at
// once after Unlock (the releaser races the woken waiters: barging), and
// with a pause of one hold after Unlock (every acquisition goes to a
// waiter that was woken).
func fleetCases(n int, hold time.Duration) []fleetCase {
	var cs []fleetCase
	for _, pause := range []time.Duration{0, hold} {
		suffix := ""
		if pause > 0 {
			suffix = fmt.Sprintf(", pause %v", pause)
		}
		cs = append(cs,
			fleetCase{name: fmt.Sprintf("rlock, 1 Client × %d goroutines%s", n, suffix), shared: true, pause: pause},
			fleetCase{name: fmt.Sprintf("rlock, %d Clients × 1 goroutine%s", n, suffix), pause: pause},
			fleetCase{name: fmt.Sprintf("control: %d more Redisson stand-ins%s", n, suffix), control: true, pause: pause},
		)
	}
	return cs
}

// fleetContender is one waiter of a round.
type fleetContender struct {
	java bool // the designated Redisson-protocol waiter
	lock func(ctx context.Context) (unlock func(context.Context) error, err error)
}

// fleetCount is one round of one case.
type fleetCount struct {
	counts   []int64 // per contender; [0] is the Java waiter
	seq      []int32 // contender of each acquisition, in order
	waits    []samples
	attempts [2]int64 // Java, others: acquire scripts sent by calls that acquired
	wakes    int64
	ttlWakes int64
}

func runFleet(ctx context.Context, p params) (*fleetResult, error) {
	srv, err := startRedis(ctx)
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	addr := srv.Addr()
	rtt, err := pingRTT(ctx, addr, 2000)
	if err != nil {
		return nil, err
	}
	n := p.fleetGo
	r := &fleetResult{GoWaiters: n, Hold: p.hold, Acquisitions: p.fleetAcq, Rounds: p.fleetRounds, RTT: summarize(rtt)}
	cases := fleetCases(n, p.hold)
	counts := make([][]*fleetCount, len(cases))
	for round := range p.fleetRounds {
		for _, i := range rand.Perm(len(cases)) {
			fc, err := fleetRound(ctx, p, addr, cases[i], fmt.Sprintf("bench:fleet:%d:%d", i, round))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", cases[i].name, err)
			}
			counts[i] = append(counts[i], fc)
		}
	}
	for i, c := range cases {
		row := fleetRow{Name: c.name, Control: c.control, Pause: c.pause}
		row.Java.Waiters, row.Others.Waiters = 1, n
		total := float64(p.fleetAcq * p.fleetRounds)
		per := make([]int64, n+1)
		var attempts [2]int64
		var wakes int64
		var afterOther, javaAfterOther, otherRebarge, afterJava, javaRebarge int
		for _, fc := range counts[i] {
			for k := 1; k < len(fc.seq); k++ {
				prev, next := fc.seq[k-1], fc.seq[k]
				if prev == 0 {
					afterJava++
					if next == 0 {
						javaRebarge++
					}
					continue
				}
				afterOther++
				if next == 0 {
					javaAfterOther++
				} else if next == prev {
					otherRebarge++
				}
			}
			for k, v := range fc.counts {
				per[k] += v
			}
			row.Java.waits = append(row.Java.waits, fc.waits[0]...)
			for _, w := range fc.waits[1:] {
				row.Others.waits = append(row.Others.waits, w...)
			}
			attempts[0] += fc.attempts[0]
			attempts[1] += fc.attempts[1]
			wakes += fc.wakes
			row.Java.TTLWakes += fc.ttlWakes
			row.Shares = append(row.Shares, float64(fc.counts[0])/float64(p.fleetAcq))
		}
		row.Java.Acquisitions = per[0]
		row.Java.MinOne, row.Java.MaxOne = per[0], per[0]
		for _, v := range per[1:] {
			row.Others.Acquisitions += v
		}
		row.Others.MinOne, row.Others.MaxOne = slices.Min(per[1:]), slices.Max(per[1:])
		for k, s := range []*fleetSide{&row.Java, &row.Others} {
			s.Share = float64(s.Acquisitions) / total
			s.Fair = float64(s.Waiters) / float64(n+1)
			if s.Acquisitions > 0 {
				s.Attempts = float64(attempts[k]) / float64(s.Acquisitions)
			}
			s.waits = s.waits.sorted()
			if len(s.waits) > 0 {
				s.Wait = summarize(s.waits)
			}
		}
		if row.Java.Acquisitions > 0 {
			row.Java.Wakes = float64(wakes) / float64(row.Java.Acquisitions)
		}
		row.JavaAfterOther = float64(javaAfterOther) / float64(max(afterOther, 1))
		row.OtherRebarge = float64(otherRebarge) / float64(max(afterOther, 1))
		row.JavaRebarge = float64(javaRebarge) / float64(max(afterJava, 1))
		logf("  %-47s Redisson waiter %4d of %d (share %.3f, fair %.3f; per round %s), wait p50 %v p99 %v max %v, attempts/acq %.2f, TTL waits %d; Go waiters share %.3f, wait p50 %v p99 %v, attempts/acq %.2f; after another's release: Java %.3f, same releaser %.3f; after Java's release: Java %.3f",
			row.Name, row.Java.Acquisitions, int(total), row.Java.Share, row.Java.Fair, fmtShares(row.Shares), row.Java.Wait.P50, row.Java.Wait.P99, row.Java.Wait.Max, row.Java.Attempts, row.Java.TTLWakes,
			row.Others.Share, row.Others.Wait.P50, row.Others.Wait.P99, row.Others.Attempts, row.JavaAfterOther, row.OtherRebarge, row.JavaRebarge)
		r.Rows = append(r.Rows, row)
	}
	return r, nil
}

func fmtShares(s []float64) string {
	out := ""
	for i, v := range s {
		if i > 0 {
			out += " "
		}
		out += strconv.FormatFloat(v, 'f', 3, 64)
	}
	return out
}

// fleetRound runs one case until key has been acquired p.fleetAcq times.
func fleetRound(ctx context.Context, p params, addr string, c fleetCase, key string) (*fleetCount, error) {
	n := p.fleetGo
	var goAttempts atomic.Int64
	obs := &observe.Observer{AcquireEnd: func(_ context.Context, e observe.AcquireEnd) {
		if e.Acquired {
			goAttempts.Add(int64(e.Attempts))
		}
	}}
	var clients []*lock.Client
	var stand []*redissonWaiter
	defer func() {
		for _, c := range clients {
			c.Close(context.Background())
		}
		for _, s := range stand {
			s.Close()
		}
	}()
	newStandIn := func() (*redissonWaiter, error) {
		s, err := newRedissonWaiter(addr, key)
		if err == nil {
			stand = append(stand, s)
		}
		return s, err
	}
	java, err := newStandIn()
	if err != nil {
		return nil, err
	}
	cs := []fleetContender{{java: true, lock: java.lock}}
	for i := range n {
		switch {
		case c.control:
			s, err := newStandIn()
			if err != nil {
				return nil, err
			}
			cs = append(cs, fleetContender{lock: s.lock})
		case c.shared && i > 0:
			cs = append(cs, fleetContender{lock: cs[1].lock})
		default:
			cl, err := lock.New(ctx, lock.Config{Addrs: []string{addr}, Observer: obs})
			if err != nil {
				return nil, err
			}
			clients = append(clients, cl)
			cs = append(cs, fleetContender{lock: func(ctx context.Context) (func(context.Context) error, error) {
				h, err := cl.Mutex(key).Lock(ctx)
				if err != nil {
					return nil, err
				}
				return h.Unlock, nil
			}})
		}
	}
	for _, ct := range cs { // warm up: connect, load scripts, subscribe once
		unlock, err := ct.lock(ctx)
		if err != nil {
			return nil, err
		}
		if err := unlock(ctx); err != nil {
			return nil, err
		}
	}
	goAttempts.Store(0)
	for _, s := range stand {
		s.attempts.Store(0)
		s.wakes.Store(0)
		s.ttlWakes.Store(0)
	}

	// A round that cannot finish is a finding, not a hang: it is bounded.
	runCtx, stop := context.WithTimeout(ctx, 2*time.Minute)
	defer stop()
	fc := &fleetCount{counts: make([]int64, len(cs)), waits: make([]samples, len(cs)), seq: make([]int32, p.fleetAcq)}
	var (
		total atomic.Int64
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	fail := func(err error) {
		mu.Lock()
		if first == nil {
			first = err
		}
		mu.Unlock()
		stop()
	}
	for i, ct := range cs {
		wg.Go(func() {
			for runCtx.Err() == nil {
				t := time.Now()
				unlock, err := ct.lock(runCtx)
				if err != nil {
					if runCtx.Err() == nil {
						fail(err)
					}
					return
				}
				if k := total.Add(1); k <= int64(p.fleetAcq) {
					fc.seq[k-1] = int32(i)
					fc.counts[i]++
					fc.waits[i] = append(fc.waits[i], time.Since(t))
					if k == int64(p.fleetAcq) {
						stop()
					}
				}
				time.Sleep(p.hold)
				if err := unlock(context.Background()); err != nil {
					fail(err)
					return
				}
				if c.pause > 0 {
					time.Sleep(c.pause)
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		return nil, first
	}
	if got := total.Load(); got < int64(p.fleetAcq) {
		return nil, fmt.Errorf("only %d of %d acquisitions in 2m", got, p.fleetAcq)
	}
	fc.attempts[0] = java.attempts.Load()
	fc.wakes, fc.ttlWakes = java.wakes.Load(), java.ttlWakes.Load()
	if c.control {
		for _, s := range stand[1:] {
			fc.attempts[1] += s.attempts.Load()
		}
	} else {
		fc.attempts[1] = goAttempts.Load()
	}
	return fc, nil
}

// ---- the Redisson stand-in ----

// Redisson's scripts, in their own text (RedissonLock.tryLockInnerAsync
// and unlockInnerAsync, as in docs/design.md section 2).
var (
	redissonAcquire = rueidis.NewLuaScript(`if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then ` +
		`redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; ` +
		`return redis.call('pttl', KEYS[1]);`)
	redissonRelease = rueidis.NewLuaScript(`local val = redis.call('get', KEYS[3]); if val ~= false then return tonumber(val); end; ` +
		`if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil; end; ` +
		`local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); ` +
		`if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); redis.call('set', KEYS[3], 0, 'px', ARGV[5]); return 0; ` +
		`else redis.call('del', KEYS[1]); redis.call(ARGV[4], KEYS[2], ARGV[1]); redis.call('set', KEYS[3], 1, 'px', ARGV[5]); return 1; end;`)
)

const (
	redissonLease      = "30000" // lockWatchdogTimeout's default, ms
	redissonLatchTTL   = "13500" // (timeout 3000 + retryInterval 1500) × retryAttempts 3, ms
	redissonUnlockMsg  = "0"
	redissonThread     = 1
	redissonMaxPermits = 1 << 12
)

// redissonWaiter is one Java thread of a service on Redisson, locking one
// name: its own connections (commands, pub/sub), its own client id. Its
// lock and unlock are called by one goroutine at a time.
type redissonWaiter struct {
	rc       rueidis.Client
	sub      rueidis.DedicatedClient
	release  func()
	name     string
	channel  string
	field    string
	sem      atomic.Pointer[chan struct{}] // the subscribed entry's semaphore, nil when not subscribed
	unsubbed chan struct{}                 // closed when the last UNSUBSCRIBE was answered
	bg       sync.WaitGroup

	attempts, wakes, ttlWakes atomic.Int64
}

func newRedissonWaiter(addr, name string) (*redissonWaiter, error) {
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, ForceSingleClient: true, DisableCache: true})
	if err != nil {
		return nil, err
	}
	r := &redissonWaiter{rc: rc, name: name, channel: reentrant.ChannelName(name),
		field: reentrant.Field(reentrant.NewClientID(), redissonThread), unsubbed: make(chan struct{})}
	close(r.unsubbed)
	r.sub, r.release = rc.Dedicate()
	r.sub.SetPubSubHooks(rueidis.PubSubHooks{OnMessage: r.onMessage})
	return r, nil
}

// onMessage is LockPubSub.onMessage: an unlock message releases one
// permit of the subscribed entry's semaphore.
func (r *redissonWaiter) onMessage(m rueidis.PubSubMessage) {
	if m.Channel != r.channel || m.Message != redissonUnlockMsg {
		return
	}
	if p := r.sem.Load(); p != nil {
		select {
		case *p <- struct{}{}:
		default:
		}
	}
}

// tryAcquire runs Redisson's acquire: acquired, or the holder's PTTL.
func (r *redissonWaiter) tryAcquire(ctx context.Context) (bool, time.Duration, error) {
	res := redissonAcquire.Exec(ctx, r.rc, []string{r.name}, []string{redissonLease, r.field})
	if err := res.Error(); rueidis.IsRedisNil(err) {
		return true, 0, nil
	} else if err != nil {
		return false, 0, err
	}
	ttl, err := res.AsInt64()
	if err != nil {
		return false, 0, err
	}
	return false, time.Duration(ttl) * time.Millisecond, nil
}

// lock is RedissonLock.lock() without a lease time. The attempts and
// wake-ups of a call that acquired are counted.
func (r *redissonWaiter) lock(ctx context.Context) (func(context.Context) error, error) {
	var attempts, wakes, ttlWakes int64
	acquired := func() (func(context.Context) error, error) {
		r.attempts.Add(attempts)
		r.wakes.Add(wakes)
		r.ttlWakes.Add(ttlWakes)
		return r.unlock, nil
	}
	attempts++
	ok, _, err := r.tryAcquire(ctx)
	if err != nil {
		return nil, err
	}
	if ok {
		return acquired()
	}
	select { // the previous lock()'s UNSUBSCRIBE comes first
	case <-r.unsubbed:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	sem := make(chan struct{}, redissonMaxPermits)
	r.sem.Store(&sem)
	defer r.unsubscribe()
	if err := r.sub.Do(ctx, r.sub.B().Subscribe().Channel(r.channel).Build()).Error(); err != nil {
		return nil, err
	}
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		attempts++
		ok, ttl, err := r.tryAcquire(ctx)
		if err != nil {
			return nil, err
		}
		if ok {
			return acquired()
		}
		var expired <-chan time.Time
		if ttl >= 0 {
			t.Reset(ttl)
			expired = t.C
		}
		select {
		case <-sem:
			wakes++
		case <-expired:
			ttlWakes++
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		t.Stop()
	}
}

// unsubscribe drops the entry and unsubscribes in the background.
func (r *redissonWaiter) unsubscribe() {
	r.sem.Store(nil)
	done := make(chan struct{})
	r.unsubbed = done
	r.bg.Go(func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = r.sub.Do(ctx, r.sub.B().Unsubscribe().Channel(r.channel).Build()).Error()
	})
}

// unlock is RedissonLock.unlock(): the release script, then the unlock
// latch deleted in the background.
func (r *redissonWaiter) unlock(ctx context.Context) error {
	latch := reentrant.LatchName(r.name, redissonstandin.NewRequestID()) // Redisson's: random per request
	res := redissonRelease.Exec(ctx, r.rc, []string{r.name, r.channel, latch},
		[]string{redissonUnlockMsg, redissonLease, r.field, "PUBLISH", redissonLatchTTL})
	if err := res.Error(); rueidis.IsRedisNil(err) {
		return errors.New("redisson stand-in: unlock of a lock it does not hold")
	} else if err != nil {
		return err
	}
	r.bg.Go(func() {
		_ = r.rc.Do(context.Background(), r.rc.B().Del().Key(latch).Build()).Error()
	})
	return nil
}

func (r *redissonWaiter) Close() {
	<-r.unsubbed
	r.bg.Wait()
	r.release()
	r.rc.Close()
}

func (r *fleetResult) check() error {
	if r.RTT.P50 <= 0 || len(r.Rows) != len(fleetCases(r.GoWaiters, r.Hold)) {
		return fmt.Errorf("fleet: missing rows")
	}
	for _, row := range r.Rows {
		if row.Java.Acquisitions+row.Others.Acquisitions != int64(r.Acquisitions*r.Rounds) || row.Others.Acquisitions == 0 || !(row.Java.Attempts > 0 || row.Java.Acquisitions == 0) {
			return fmt.Errorf("fleet: %s produced no numbers", row.Name)
		}
	}
	return nil
}
