package lock_test

import (
	"context"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/lock"
)

// BenchmarkLockUnlock and BenchmarkRawEvalsha run on the same server and
// connection kind, so their ratio shows what a lock costs beyond its two
// round trips (acquire script, release script).
func BenchmarkLockUnlock(b *testing.B) {
	c := newClient(b, lock.Config{Addrs: []string{shared.DirectAddr()}})
	m := c.Mutex(name(b))
	ctx := context.Background()
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

// BenchmarkRawEvalsha is the floor: two round trips of a trivial script
// by EVALSHA on one rueidis client.
func BenchmarkRawEvalsha(b *testing.B) {
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{shared.DirectAddr()}, ForceSingleClient: true, DisableCache: true})
	if err != nil {
		b.Fatal(err)
	}
	defer rc.Close()
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

// BenchmarkHeld10k holds 10,000 locks on one Client and reports the heap
// bytes and goroutines each held lock costs (run with -benchtime 1x).
func BenchmarkHeld10k(b *testing.B) {
	const locks = 10000
	for b.Loop() {
		c := newClient(b, lock.Config{Addrs: []string{shared.DirectAddr()}, WatchdogTimeout: time.Hour, RenewInterval: 30 * time.Minute})
		base := name(b)
		ctx := context.Background()
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		g0 := runtime.NumGoroutine()
		helds := make([]*lock.Held, locks)
		var wg sync.WaitGroup
		const workers = 32
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < locks; i += workers {
					h, err := c.Mutex(base + ":" + strconv.Itoa(i)).TryLock(ctx)
					if err != nil {
						b.Error(err)
						return
					}
					helds[i] = h
				}
			}()
		}
		wg.Wait()
		runtime.GC()
		runtime.ReadMemStats(&after)
		g1 := runtime.NumGoroutine()
		// Less the 8 bytes per lock of the benchmark's own helds slice.
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/locks-8, "B/lock")
		b.ReportMetric(float64(g1-g0), "goroutines-added")
		for _, h := range helds {
			if h != nil {
				_ = h.Unlock(ctx)
			}
		}
		_ = c.Close(ctx)
	}
}
