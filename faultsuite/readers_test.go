package faultsuite

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/lock"
)

// Readers of the rwlock topology. While the workers take the write lock of
// Redisson's read-write lock (without fencing tokens: Redisson has none
// for it), nReaders readers, each a Client of its own, share its read
// lock: each takes it, looks at the resource, works, looks again and
// unlocks, then thinks. They hold it less than half of the time: the
// read-write lock has no writer preference (as Redisson's), and readers
// that overlap without a gap would keep the writers out, and the round
// from its grants. The check counts a double grant when the older of a
// writer's and a reader's holds acts (a write, a look), believing it
// holds the lock, after the other was granted.
const (
	nReaders      = 2
	readerWait    = 2 * time.Second // a reader's Lock gives up after it
	minReaderWork = 20 * time.Millisecond
	maxReaderWork = 100 * time.Millisecond
	minReaderIdle = 100 * time.Millisecond
	maxReaderIdle = 300 * time.Millisecond
)

// reading is one hold of the read lock.
type reading struct {
	ret   instant   // Lock returned the hold
	looks []instant // when the reader looked at the resource, believing it held the lock
}

// readings collects a round's readings.
type readings struct {
	mu sync.Mutex
	rs []reading
}

func (rd *readings) add(x reading) {
	rd.mu.Lock()
	rd.rs = append(rd.rs, x)
	rd.mu.Unlock()
}

func (rd *readings) snapshot() []reading {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	return append([]reading(nil), rd.rs...)
}

// newReaders connects the readers' Clients to the master; they are closed
// when the test ends.
func newReaders(t *testing.T, srv *integration.Server) []*lock.Client {
	t.Helper()
	cs := make([]*lock.Client, nReaders)
	for i := range cs {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, err := lock.New(ctx, lock.Config{Addrs: []string{srv.Addr()}, WatchdogTimeout: watchdogLease,
			RenewInterval: renewIntervals[i%len(renewIntervals)], CommandTimeout: commandTimeout, DialTimeout: dialTimeout})
		cancel()
		if err != nil {
			t.Fatalf("lock.New(%s): %v", srv.Addr(), err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := c.Close(ctx); err != nil && !errors.Is(err, lock.ErrClosed) {
				t.Logf("close client of reader %d: %v", i, err)
			}
		})
		cs[i] = c
	}
	return cs
}

// read runs reader i on c until ctx ends.
func (r *round) read(ctx context.Context, i int, c *lock.Client) {
	rng := rand.New(rand.NewPCG(r.seed, uint64(1000+i)))
	m := c.ReadWriteMutex(r.name).ReadLock()
	for ctx.Err() == nil {
		lctx, cancel := context.WithTimeout(ctx, readerWait)
		var h *lock.Held
		err := r.timed(lctx, "Lock", false, func() (err error) { h, err = m.Lock(lctx); return err })
		cancel()
		if err != nil {
			think(ctx, randDuration(rng, minThink, maxThink))
			continue
		}
		x := reading{ret: r.hist.now()}
		look := func() {
			if h.Context().Err() == nil {
				x.looks = append(x.looks, r.hist.now())
			}
		}
		look()
		work(h.Context(), randDuration(rng, minReaderWork, maxReaderWork))
		look()
		uctx, ucancel := context.WithTimeout(context.WithoutCancel(ctx), unlockTimeout)
		_ = r.timed(uctx, "Unlock", false, func() error { return h.Unlock(uctx) }) // a failed or lost release only ends the reading
		ucancel()
		r.readings.add(x)
		think(ctx, randDuration(rng, minReaderIdle, maxReaderIdle))
	}
}

// rwOverlaps counts the double grants between writers' holdings and
// readings: the older one acted, believing it held the lock, after the
// newer one was granted.
func rwOverlaps(hs []holding, rs []reading) int {
	n := 0
	for i := range hs {
		h := &hs[i]
		for _, x := range rs {
			switch {
			case h.ret < x.ret:
				for _, w := range h.writes {
					if w.believed && w.at > x.ret {
						n++
						break
					}
				}
			case x.ret < h.ret:
				for _, at := range x.looks {
					if at > h.ret {
						n++
						break
					}
				}
			}
		}
	}
	return n
}
