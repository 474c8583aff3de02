package multilock_test

import (
	"context"
	"sync"
	"testing"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/multilock"
)

// Run both in one go to see the ratio:
//
//	go test -run '^$' -bench . -benchtime 2000x -count 3 ./multilock/
//
// Clients connect to the servers directly, not through the test proxies.

// benchMutexes returns the lock called name on one Client per server.
func benchMutexes(b *testing.B, servers []*integration.Server, name string) []*lock.Mutex {
	ms := make([]*lock.Mutex, len(servers))
	for i, s := range servers {
		c, err := lock.New(context.Background(), lock.Config{Addrs: []string{s.DirectAddr()}})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close(context.Background()) })
		ms[i] = c.Mutex(name)
	}
	return ms
}

func BenchmarkSingleAcquireRelease(b *testing.B) {
	m := benchMutexes(b, shared[:1], name(b))[0]
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

// BenchmarkFiveSinglesInParallel is the floor under RedLock: the same
// five acquire-and-release pairs on five masters, in parallel, with no
// quorum logic. On a machine with fewer cores than masters + 1, RedLock's
// cost is this one's, not Single's: the masters' work itself competes for
// the CPU.
func BenchmarkFiveSinglesInParallel(b *testing.B) {
	ms := benchMutexes(b, shared, name(b))
	ctx := context.Background()
	one := func(m *lock.Mutex) {
		h, err := m.TryLock(ctx)
		if err != nil {
			b.Error(err)
			return
		}
		if err := h.Unlock(ctx); err != nil {
			b.Error(err)
		}
	}
	for b.Loop() {
		var wg sync.WaitGroup
		for _, m := range ms[1:] {
			wg.Go(func() { one(m) })
		}
		one(ms[0])
		wg.Wait()
	}
}

func BenchmarkRedLockAcquireRelease(b *testing.B) {
	benchRedLock(b)
}

func BenchmarkRedLockFencedAcquireRelease(b *testing.B) {
	benchRedLock(b, lock.Fenced())
}

func benchRedLock(b *testing.B, opts ...lock.Option) {
	l := multilock.NewRedLock(benchMutexes(b, shared, name(b))...)
	ctx := context.Background()
	for b.Loop() {
		h, err := l.TryLock(ctx, opts...)
		if err != nil {
			b.Fatal(err)
		}
		if err := h.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	multilock.WaitBackground(l)
}
