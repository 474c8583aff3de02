package lock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rlock-go/rlock/lock"
)

// exampleAddr is the test server; in your code, your Redis master.
func exampleAddr() string { return shared.Addr() }

func Example() {
	ctx := context.Background()
	c, err := lock.New(ctx, lock.Config{Addrs: []string{exampleAddr()}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close(context.Background())

	m := c.Mutex("example:orders:42")
	h, err := m.Lock(ctx) // waits until free; the watchdog keeps it
	if err != nil {
		fmt.Println(err)
		return
	}
	// The Held's context carries the owner: locking with it re-enters.
	inner, err := m.Lock(h.Context())
	if err != nil {
		fmt.Println(err)
		return
	}
	n, _ := m.HoldCount(h.Context())
	fmt.Println("hold count:", n)
	_ = inner.Unlock(ctx)
	_ = h.Unlock(ctx)
	locked, _ := m.IsLocked(ctx)
	fmt.Println("locked after unlock:", locked)
	// Output:
	// hold count: 2
	// locked after unlock: false
}

func ExampleMutex_TryLock() {
	ctx := context.Background()
	a, _ := lock.New(ctx, lock.Config{Addrs: []string{exampleAddr()}})
	defer a.Close(ctx)
	b, _ := lock.New(ctx, lock.Config{Addrs: []string{exampleAddr()}})
	defer b.Close(ctx)

	h, _ := a.Mutex("example:report").Lock(ctx)
	_, err := b.Mutex("example:report").TryLock(ctx, lock.Wait(50*time.Millisecond))
	fmt.Println("other process:", errors.Is(err, lock.ErrNotAcquired))
	_ = h.Unlock(ctx)

	h, err = b.Mutex("example:report").TryLock(ctx, lock.Lease(10*time.Second))
	fmt.Println("after release:", err == nil)
	_ = h.Unlock(ctx)
	// Output:
	// other process: true
	// after release: true
}

// Work guarded by a lock watches the Held's context: it is cancelled with
// cause ErrLockLost if the lease is lost.
func ExampleHeld_Context() {
	ctx := context.Background()
	c, _ := lock.New(ctx, lock.Config{Addrs: []string{exampleAddr()}})
	defer c.Close(ctx)
	m := c.Mutex("example:job")
	h, _ := m.Lock(ctx)

	_, _ = m.ForceUnlock(ctx) // an operator breaks the lock

	<-h.Done()
	fmt.Println("lost:", errors.Is(context.Cause(h.Context()), lock.ErrLockLost))
	fmt.Println("unlock:", errors.Is(h.Unlock(ctx), lock.ErrLockLost))
	// Output:
	// lost: true
	// unlock: true
}

// Fencing tokens increase with every acquisition; the guarded resource
// rejects a write carrying a token lower than one it has seen.
func ExampleFenced() {
	ctx := context.Background()
	c, _ := lock.New(ctx, lock.Config{Addrs: []string{exampleAddr()}})
	defer c.Close(ctx)
	m := c.Mutex("example:fenced")
	h1, _ := m.Lock(ctx, lock.Fenced())
	_ = h1.Unlock(ctx)
	h2, _ := m.Lock(ctx, lock.Fenced())
	_ = h2.Unlock(ctx)
	fmt.Println("increasing:", h2.Fence() > h1.Fence())
	// Output:
	// increasing: true
}
