package lock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/rlock-go/rlock/lock"
)

// exampleAddr is the test server; in your code, your Redis master.
func exampleAddr() string { return shared.Addr() }

// The README's quick start: this function's body is the README's first
// code block (TestReadme keeps them equal).
func Example() {
	ctx := context.Background()
	addr := exampleAddr() // your Redis master, such as "127.0.0.1:6379"
	c, err := lock.New(ctx, lock.Config{Addrs: []string{addr}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { // releases what is still held
		if err := c.Close(context.Background()); err != nil {
			fmt.Println("close:", err)
		}
	}()

	m := c.Mutex("example:orders:42") // Redisson: redisson.getLock("example:orders:42")
	h, err := m.Lock(ctx)             // waits until acquired or ctx ends; the watchdog renews it
	if err != nil {
		fmt.Println(err)
		return
	}
	// Redisson's lock.unlock() is h.Unlock: the owner of the hold lives in
	// h.Context(), not in ctx, so there is no m.Unlock(ctx).

	// The same owner re-enters: lock with h.Context().
	inner, err := m.Lock(h.Context())
	if err != nil {
		fmt.Println(err)
		return
	}
	n, err := m.HoldCount(h.Context())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("hold count:", n)
	if err := inner.Unlock(ctx); err != nil { // count 1: still held, still renewed
		fmt.Println(err)
		return
	}

	// Any other context is another owner: it waits, here not at all.
	_, err = m.TryLock(ctx)
	fmt.Println("another owner:", errors.Is(err, lock.ErrNotAcquired))

	// Work watches h.Context(): it ends with cause lock.ErrLockLost if
	// the lease is lost.
	select {
	case <-h.Done():
		fmt.Println("lost:", errors.Is(context.Cause(h.Context()), lock.ErrLockLost))
		return
	default:
		fmt.Println("still held")
	}
	if err := h.Unlock(ctx); err != nil {
		fmt.Println(err)
		return
	}

	// A bounded wait, with an explicit lease (no watchdog):
	h2, err := m.TryLock(ctx, lock.Wait(2*time.Second), lock.Lease(10*time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := h2.Unlock(ctx); err != nil {
		fmt.Println(err)
		return
	}

	// A fencing token for the resource to check (Redisson's RFencedLock):
	h3, err := m.Lock(ctx, lock.Fenced())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("fenced:", h3.Fence() > 0)
	if err := h3.Unlock(ctx); err != nil {
		fmt.Println(err)
	}
	// Output:
	// hold count: 2
	// another owner: true
	// still held
	// fenced: true
}

func ExampleMutex_TryLock() {
	ctx := context.Background()
	var clients []*lock.Client // two processes, say
	defer func() {
		for _, c := range clients {
			if err := c.Close(ctx); err != nil {
				fmt.Println(err)
			}
		}
	}()
	for range 2 {
		c, err := lock.New(ctx, lock.Config{Addrs: []string{exampleAddr()}})
		if err != nil {
			fmt.Println(err)
			return
		}
		clients = append(clients, c)
	}
	a, b := clients[0].Mutex("example:report"), clients[1].Mutex("example:report")

	h, err := a.Lock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = b.TryLock(ctx, lock.Wait(50*time.Millisecond))
	fmt.Println("other process:", errors.Is(err, lock.ErrNotAcquired))
	if err := h.Unlock(ctx); err != nil {
		fmt.Println(err)
		return
	}

	h, err = b.TryLock(ctx, lock.Lease(10*time.Second))
	fmt.Println("after release:", err == nil)
	if err != nil {
		return
	}
	if err := h.Unlock(ctx); err != nil {
		fmt.Println(err)
	}
	// Output:
	// other process: true
	// after release: true
}

// Work guarded by a lock watches the Held's context: it is cancelled with
// cause ErrLockLost if the lease is lost.
func ExampleHeld_Context() {
	ctx := context.Background()
	c, err := lock.New(ctx, lock.Config{Addrs: []string{exampleAddr()}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() {
		if err := c.Close(ctx); err != nil {
			fmt.Println(err)
		}
	}()
	m := c.Mutex("example:job")
	h, err := m.Lock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}

	if _, err := m.ForceUnlock(ctx); err != nil { // an operator breaks the lock
		fmt.Println(err)
		return
	}

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
	c, err := lock.New(ctx, lock.Config{Addrs: []string{exampleAddr()}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() {
		if err := c.Close(ctx); err != nil {
			fmt.Println(err)
		}
	}()
	m := c.Mutex("example:fenced")
	var last uint64
	for range 2 {
		h, err := m.Lock(ctx, lock.Fenced())
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println("increasing:", h.Fence() > last)
		last = h.Fence()
		if err := h.Unlock(ctx); err != nil {
			fmt.Println(err)
			return
		}
	}
	// Output:
	// increasing: true
	// increasing: true
}

// Redis Sentinel, as Redisson's sentinelServersConfig: the Client
// connects to the master the sentinels name and follows it across
// failovers. (Compiled, not run: it needs your sentinels.)
func ExampleConfig_sentinel() {
	ctx := context.Background()
	c, err := lock.New(ctx, lock.Config{
		MasterSet:        "mymaster",                                                           // masterName
		Addrs:            []string{"sentinel-1:26379", "sentinel-2:26379", "sentinel-3:26379"}, // sentinelAddresses
		Password:         os.Getenv("REDIS_PASSWORD"),                                          // password: the master's
		SentinelPassword: os.Getenv("REDIS_SENTINEL_PASSWORD"),                                 // sentinelPassword, if any
	})
	if err != nil { // ErrInvalid: a master set they do not monitor; ErrUnavailable: no sentinel answers
		fmt.Println(err)
		return
	}
	defer c.Close(ctx)
	fmt.Println("master:", c.Addr()) // the master of the moment: it changes with failovers
}

// A spin lock (Redisson's getSpinLock): the same lock as Mutex(name) on
// the wire, but its release publishes nothing and its waiters poll with
// a backoff instead of subscribing, for names with many waiting processes.
func ExampleClient_SpinMutex() {
	ctx := context.Background()
	c, err := lock.New(ctx, lock.Config{Addrs: []string{exampleAddr()}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() {
		if err := c.Close(ctx); err != nil {
			fmt.Println(err)
		}
	}()
	m := c.SpinMutex("example:batch", lock.SpinBackoff{}) // Redisson's default: 1 ms to 128 ms
	h, err := m.Lock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("held:", h.Name())
	if err := h.Unlock(ctx); err != nil {
		fmt.Println(err)
		return
	}
	// Output: held: example:batch
}

// A non-reentrant lock (Redisson's getNonReentrantLock): its owner's
// second acquisition is refused at once instead of counting a re-entry.
func ExampleClient_NonReentrantMutex() {
	ctx := context.Background()
	c, err := lock.New(ctx, lock.Config{Addrs: []string{exampleAddr()}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() {
		if err := c.Close(ctx); err != nil {
			fmt.Println(err)
		}
	}()
	m := c.NonReentrantMutex("example:once")
	h, err := m.Lock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = m.Lock(h.Context()) // the same owner again
	fmt.Println("re-entry refused:", errors.Is(err, lock.ErrReentered))
	if err := h.Unlock(ctx); err != nil {
		fmt.Println(err)
		return
	}
	// Output: re-entry refused: true
}

// A fair lock (Redisson's getFairLock): waiters of every process, Java
// and Go alike, join one queue in Redis and are granted the lock in the
// order they came; one that gives up leaves the queue.
func ExampleClient_FairMutex() {
	ctx := context.Background()
	c, err := lock.New(ctx, lock.Config{Addrs: []string{exampleAddr()}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() {
		if err := c.Close(ctx); err != nil {
			fmt.Println(err)
		}
	}()
	m := c.FairMutex("example:hold")
	h, err := m.Lock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	// Another owner queues behind the holder for 50 ms, then leaves.
	_, err = m.TryLock(ctx, lock.Wait(50*time.Millisecond))
	fmt.Println("the second owner waited in the queue and gave up:", errors.Is(err, lock.ErrNotAcquired))
	if err := h.Unlock(ctx); err != nil {
		fmt.Println(err)
		return
	}
	// Output: the second owner waited in the queue and gave up: true
}

// A read-write lock (Redisson's getReadWriteLock): readers share it, a
// writer excludes everyone else, and the writer may also read.
func ExampleClient_ReadWriteMutex() {
	ctx := context.Background()
	c, err := lock.New(ctx, lock.Config{Addrs: []string{exampleAddr()}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() {
		if err := c.Close(ctx); err != nil {
			fmt.Println(err)
		}
	}()
	rw := c.ReadWriteMutex("example:catalog")
	r1, err := rw.ReadLock().Lock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	r2, err := rw.ReadLock().Lock(ctx) // another owner: readers share
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = rw.WriteLock().TryLock(ctx)
	fmt.Println("writer while reading:", errors.Is(err, lock.ErrNotAcquired))
	for _, h := range []*lock.Held{r1, r2} {
		if err := h.Unlock(ctx); err != nil {
			fmt.Println(err)
			return
		}
	}
	w, err := rw.WriteLock().Lock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	r, err := rw.ReadLock().Lock(w.Context()) // the writer reads too
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, h := range []*lock.Held{r, w} {
		if err := h.Unlock(ctx); err != nil {
			fmt.Println(err)
			return
		}
	}
	fmt.Println("done")
	// Output:
	// writer while reading: true
	// done
}
