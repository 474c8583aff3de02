package multilock_test

import (
	"context"
	"testing"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/multilock"
)

// Run both in one go to see the ratio:
//
//	go test -run '^$' -bench 'AcquireRelease' -benchtime 2000x -count 3 ./multilock/
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

func BenchmarkRedLockAcquireRelease(b *testing.B) {
	benchRedLock(b)
}

func BenchmarkRedLockFencedAcquireRelease(b *testing.B) {
	benchRedLock(b, multilock.Fenced())
}

func benchRedLock(b *testing.B, opts ...multilock.Option) {
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
