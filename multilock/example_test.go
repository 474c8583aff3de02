package multilock_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/multilock"
)

// exampleMutexes connects one Client to each of the five masters started
// by TestMain and returns the lock called name on each; close() closes
// the Clients.
func exampleMutexes(ctx context.Context, name string) (ms []*lock.Mutex, close func()) {
	var cs []*lock.Client
	close = func() {
		for _, c := range cs {
			if err := c.Close(ctx); err != nil {
				fmt.Println(err)
			}
		}
	}
	for _, s := range shared {
		c, err := lock.New(ctx, lock.Config{Addrs: []string{s.Addr()}})
		if err != nil {
			panic(err)
		}
		cs = append(cs, c)
		ms = append(ms, c.Mutex(name))
	}
	return ms, close
}

func ExampleNewRedLock() {
	ctx := context.Background()
	ms, closeClients := exampleMutexes(ctx, "example:orders:42")
	defer closeClients()

	l := multilock.NewRedLock(ms...)
	h, err := l.Lock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	// Lock returns once a quorum granted; the masters that grant later
	// join the acquisition. Settled: every master has answered.
	<-h.Settled()
	fmt.Printf("held on %d of %d masters, quorum %d\n", h.Masters(), l.Masters(), l.Quorum())

	// The holder's context carries its owner: locking with it re-enters.
	inner, err := l.Lock(h.Context())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("re-entered by the same owner:", inner.Owner() == h.Owner())
	if err := inner.Unlock(ctx); err != nil {
		fmt.Println(err)
		return
	}

	if err := h.Unlock(ctx); err != nil {
		fmt.Println(err)
	}
	fmt.Println("holder's context ended by Unlock:", h.Context().Err() != nil,
		errors.Is(context.Cause(h.Context()), lock.ErrLockLost))
	// Output:
	// held on 5 of 5 masters, quorum 3
	// re-entered by the same owner: true
	// holder's context ended by Unlock: true false
}

func ExampleLock_TryLock() {
	ctx := context.Background()
	ms, closeClients := exampleMutexes(ctx, "example:report")
	defer closeClients()
	l := multilock.NewRedLock(ms...)

	h, err := l.Lock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}

	// Another owner (a context without the holder's owner) cannot have it.
	_, err = l.TryLock(ctx)
	var qe *multilock.QuorumError
	fmt.Println(errors.Is(err, multilock.ErrQuorum), errors.Is(err, lock.ErrNotAcquired), errors.As(err, &qe))
	if qe != nil {
		// Masters the holder's round had not heard from yet when it
		// returned may grant this one: fewer than the quorum.
		fmt.Printf("fewer than %d of %d masters granted: %v\n", qe.Needed, qe.Masters, qe.Granted < qe.Needed)
	}
	if err := h.Unlock(ctx); err != nil {
		fmt.Println(err)
	}
	// Output:
	// true true true
	// fewer than 3 of 5 masters granted: true
}

func ExampleHeld_Fence() {
	ctx := context.Background()
	ms, closeClients := exampleMutexes(ctx, "example:ledger")
	defer closeClients()
	l := multilock.NewRedLock(ms...)

	var last uint64
	for range 3 {
		h, err := l.Lock(ctx, lock.Fenced())
		if err != nil {
			fmt.Println(err)
			return
		}
		// Send h.Fence() with each write; the ledger rejects a token
		// lower than the highest it has accepted.
		fmt.Println("token increased:", h.Fence() > last)
		last = h.Fence()
		if err := h.Unlock(ctx); err != nil {
			fmt.Println(err)
			return
		}
	}
	// Output:
	// token increased: true
	// token increased: true
	// token increased: true
}

// Redisson's getMultiLock(order, account) on one client: several names of
// one Client, locked together, all or nothing. On a Cluster Client the
// names may live on different masters.
func ExampleNewMultiLock() {
	ctx := context.Background()
	c, err := lock.New(ctx, lock.Config{Addrs: []string{shared[0].Addr()}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close(ctx)

	l := multilock.NewMultiLock(c.Mutex("example:order:42"), c.Mutex("example:account:7"))
	h, err := l.Lock(ctx, lock.Fenced())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("held on both:", h.Masters() == 2)
	// Each name has its own fencing token, its own counter's: send each
	// with the writes to the resource it guards.
	fmt.Println("tokens:", h.FenceOf("example:order:42") > 0, h.FenceOf("example:account:7") > 0)

	// Another owner's lock of one of the names waits for the MultiLock.
	_, err = c.Mutex("example:account:7").TryLock(ctx)
	fmt.Println("account taken by another owner:", errors.Is(err, lock.ErrNotAcquired))
	if err := h.Unlock(ctx); err != nil {
		fmt.Println(err)
	}

	// A name given twice is refused.
	_, err = multilock.NewMultiLock(c.Mutex("example:order:42"), c.Mutex("example:order:42")).Lock(ctx)
	fmt.Println("name twice:", errors.Is(err, lock.ErrInvalid))
	// Output:
	// held on both: true
	// tokens: true true
	// account taken by another owner: true
	// name twice: true
}
