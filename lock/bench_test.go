package lock_test

import (
	"context"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/observe"
	"github.com/rlock-go/rlock/reentrant"
)

// BenchmarkLockUnlock and BenchmarkRawEvalsha run on the same server and
// connection kind, so their ratio shows what a lock costs beyond its two
// round trips (acquire script, release script).
func BenchmarkLockUnlock(b *testing.B) { benchLockUnlock(b, context.Background()) }

// BenchmarkLockUnlockCancellable is BenchmarkLockUnlock with a ctx that
// can be cancelled (as a server's request ctx): each send is then armed
// so that a cancellation cuts it (bounded.go, Cancellations).
func BenchmarkLockUnlockCancellable(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	benchLockUnlock(b, ctx)
}

// benchLockUnlock times TryLock+Unlock of one free lock with ctx.
func benchLockUnlock(b *testing.B, ctx context.Context) {
	c := newClient(b, lock.Config{Addrs: []string{shared.DirectAddr()}})
	m := c.Mutex(name(b))
	for b.Loop() {
		h, err := m.TryLock(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := h.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkScriptsRaw sends what an uncontended TryLock+Unlock sends
// (rlock's acquire and release scripts, one round trip each) on a plain
// rueidis client in direct mode, as the bench module's "rlock's scripts"
// floor does (its ctx has a deadline): with context.Background. A ctx
// that can be cancelled and has no deadline turns a rueidis connection
// to pipelining for good, which cost 20–31 µs a cycle on loopback. Its
// ratio to BenchmarkLockUnlockCancellable is what the Client adds as the
// bench module's rlock row measures it (a ctx that can be cancelled: the
// sends are armed); to BenchmarkLockUnlock, without the arming.
func BenchmarkScriptsRaw(b *testing.B) {
	rc := integration.NewClient(b, shared.DirectAddr())
	ctx := context.Background()
	key, field := name(b), reentrant.Field(reentrant.NewClientID(), 1)
	for b.Loop() {
		a, err := reentrant.AcquireRequest{Name: key, Field: field, Lease: 30 * time.Second, RequestID: reentrant.NewRequestID()}.Run(ctx, rc)
		if err != nil || a.Status != reentrant.Acquired {
			b.Fatal(a.Status, err)
		}
		r, err := reentrant.Release{Name: key, Field: field, Lease: 30 * time.Second, RequestID: reentrant.NewRequestID(),
			Publish: reentrant.Publish, LatchTTL: 30 * time.Second}.Run(ctx, rc)
		if err != nil || r != reentrant.Released {
			b.Fatal(r, err)
		}
	}
}

// BenchmarkRawEvalsha is the floor: two round trips of a trivial script
// by EVALSHA on one rueidis client.
func BenchmarkRawEvalsha(b *testing.B) {
	rc := integration.NewClient(b, shared.DirectAddr())
	script := rueidis.NewLuaScript("return 1")
	ctx := context.Background()
	script.Exec(ctx, rc, nil, nil) // load it
	for b.Loop() {
		for i := 0; i < 2; i++ {
			if err := script.Exec(ctx, rc, []string{"k"}, nil).Error(); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkHeld holds 1,000 and 10,000 locks on one Client and reports
// the heap bytes each held lock costs and the goroutines added while
// holding them (which must not grow with the count). The renewed
// variant is the bench module's renewal scenario in small: the watchdog
// renews every 500ms, and the heap is read after a tick that renewed
// every lock (what the tick leaves behind counts too). Run with
// -benchtime 1x.
func BenchmarkHeld(b *testing.B) {
	for _, locks := range []int{1000, 10000} {
		b.Run("locks="+strconv.Itoa(locks), func(b *testing.B) {
			for b.Loop() {
				benchHeld(b, locks, false)
			}
		})
	}
	b.Run("renewed/locks=10000", func(b *testing.B) {
		for b.Loop() {
			benchHeld(b, 10000, true)
		}
	})
}

func benchHeld(b *testing.B, locks int, renewed bool) {
	cfg := lock.Config{Addrs: []string{shared.DirectAddr()}, WatchdogTimeout: time.Hour, RenewInterval: 30 * time.Minute}
	ticks := make(chan observe.Renew, 64)
	if renewed {
		cfg.WatchdogTimeout, cfg.RenewInterval = 5*time.Second, 500*time.Millisecond
		cfg.Observer = &observe.Observer{Renew: func(e observe.Renew) {
			select {
			case ticks <- e:
			default:
			}
		}}
	}
	c := newClient(b, cfg)
	base := name(b)
	ctx := context.Background()
	helds := make([]*lock.Held, locks)
	if renewed {
		// rueidis dials its second pipelined connection (GOMAXPROCS > 1)
		// on the first keyed command that picks it: dial it now, so that
		// its buffers (about 1.3 MiB) do not count as the locks'.
		rc := c.Redis()
		for i := 0; i < 32; i++ {
			_ = rc.Do(ctx, rc.B().Exists().Key(base+":warm:"+strconv.Itoa(i)).Build()).Error()
		}
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	g0 := runtime.NumGoroutine()
	var wg sync.WaitGroup
	const workers = 32
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < locks; i += workers {
				m := c.Mutex(base + ":" + strconv.Itoa(i))
				lockf := m.TryLock
				if renewed {
					lockf = m.Lock // as the bench module's scenario
				}
				h, err := lockf(ctx)
				if err != nil {
					b.Error(err)
					return
				}
				helds[i] = h
			}
		}()
	}
	wg.Wait()
	if renewed {
		awaitRenewal(b, ticks, locks)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	g1 := runtime.NumGoroutine()
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(locks), "B/lock")
	b.ReportMetric(float64(g1-g0), "goroutines-added")
	for _, h := range helds {
		if h != nil {
			_ = h.Unlock(ctx)
		}
	}
	_ = c.Close(ctx)
}

// awaitRenewal waits for a tick that renewed every one of locks.
func awaitRenewal(b *testing.B, ticks <-chan observe.Renew, locks int) {
	b.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case e := <-ticks:
			if e.Renewed == locks {
				return
			}
		case <-deadline:
			b.Fatalf("no tick renewed all %d locks within 30s", locks)
		}
	}
}

// BenchmarkLockUnlockVsFloor interleaves blocks of Lock+Unlock and of the
// floor (two trivial EVALSHAs) on the same server, so that the noise of a
// shared machine hits both alike, and reports the ratio of their medians.
func BenchmarkLockUnlockVsFloor(b *testing.B) {
	c := newClient(b, lock.Config{Addrs: []string{shared.DirectAddr()}})
	m := c.Mutex(name(b))
	rc := integration.NewClient(b, shared.DirectAddr())
	script := rueidis.NewLuaScript("return 1")
	ctx := context.Background()
	script.Exec(ctx, rc, nil, nil)
	const block = 50
	var lockNs, floorNs []float64
	for b.Loop() {
		start := time.Now()
		for i := 0; i < block; i++ {
			h, err := m.TryLock(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if err := h.Unlock(ctx); err != nil {
				b.Fatal(err)
			}
		}
		lockNs = append(lockNs, float64(time.Since(start).Nanoseconds())/block)
		start = time.Now()
		for i := 0; i < block; i++ {
			script.Exec(ctx, rc, []string{"k"}, nil)
			script.Exec(ctx, rc, []string{"k"}, nil)
		}
		floorNs = append(floorNs, float64(time.Since(start).Nanoseconds())/block)
	}
	l, f := median(lockNs), median(floorNs)
	b.ReportMetric(l, "lock-ns/op")
	b.ReportMetric(f, "floor-ns/op")
	b.ReportMetric(l/f, "ratio")
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}
