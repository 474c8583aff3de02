package lock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/lock"
)

// TestReviewRenewalsBesideABusyBlockingPool: an application hands FromClient
// its rueidis client, whose pool of dedicated connections (BlockingPoolSize)
// is in use by its own blocking commands (a queue consumer's BLPOP 0). The
// watchdog's renewals went out on the shared pipelined connection; since
// 06529b7 they wait for a connection of that pool, with no bound
// (rueidis's Dedicated acquires with context.Background): no renewal is
// sent, the hold is lost, every tick leaves a goroutine blocked, and Close
// waits for them.
func TestReviewRenewalsBesideABusyBlockingPool(t *testing.T) {
	ctx := context.Background()
	rc := poolOfOne(t)
	queue := name(t) + ":queue"
	blctx, stopConsumer := context.WithCancel(ctx)
	consumed := make(chan struct{})
	go func() {
		defer close(consumed)
		_ = rc.Do(blctx, rc.B().Blpop().Key(queue).Timeout(0).Build()).Error()
	}()
	defer func() { stopConsumer(); <-consumed }()
	// Wait until the BLPOP blocks on the server.
	for {
		info, err := rc.Do(ctx, rc.B().Info().Section("clients").Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(info, "blocked_clients:0") {
			break
		}
		time.Sleep(5 * time.Millisecond) // polled: no signal for "blocked on the server"
	}

	// keepLease (1.5 s), not 600 ms: stop 41's CI machine froze the
	// process for longer than 600 ms less a renewal.
	c, err := lock.FromClient(rc, lock.Config{WatchdogTimeout: keepLease, RenewInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	h, err := c.Mutex(name(t)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.Done():
		t.Errorf("a renewed hold (lease 1.5 s, renewed every 100 ms) ended within 3 s while the application's BLPOP held the blocking pool: %v", context.Cause(h.Context()))
	case <-time.After(3 * time.Second):
	}
	closeWithin5s(t, c, "while the application's BLPOP holds the blocking pool", stopConsumer)
}

// poolOfOne returns a rueidis client on the shared server with one
// dedicated connection (BlockingPoolSize 1), closed when the test ends.
func poolOfOne(t *testing.T) rueidis.Client {
	t.Helper()
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{shared.DirectAddr()}, ForceSingleClient: true, DisableCache: true, BlockingPoolSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	return rc
}

// closeWithin5s calls Close with a context of 1 s and fails the test if it
// has not returned 5 s later; unblock then ends what it waits for, and
// closeWithin5s waits for Close to return.
func closeWithin5s(t *testing.T, c *lock.Client, while string, unblock func()) {
	t.Helper()
	closed := make(chan error, 1)
	go func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		closed <- c.Close(cctx)
	}()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Errorf("Close(ctx of 1 s) has not returned after 5 s %s", while)
		unblock()
		<-closed
	}
}

// TestReviewRenewalsBesideAWaiter: the same with no blocking command of the
// application: with BlockingPoolSize 1, the Client's own subscription
// connection (the pub/sub hub's Dedicate) takes the pool's one connection
// as soon as a Lock of the same Client waits, and the holder's renewals
// then wait for it: the hold is lost while its owner's process is healthy,
// and Close deadlocks.
func TestReviewRenewalsBesideAWaiter(t *testing.T) {
	ctx := context.Background()
	rc := poolOfOne(t)
	c, err := lock.FromClient(rc, lock.Config{WatchdogTimeout: 600 * time.Millisecond, RenewInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	m := c.Mutex(name(t))
	h, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	waited := make(chan error, 1)
	go func() {
		w, err := m.Lock(wctx)
		if err == nil {
			_ = w.Unlock(ctx)
		}
		waited <- err
	}()
	select {
	case <-h.Done():
		t.Errorf("a renewed hold (lease 600 ms, renewed every 100 ms) ended while another owner of the same Client waited for it: %v", context.Cause(h.Context()))
	case <-wctx.Done():
	}
	<-waited
	// Close waits (c.bg.Wait) for the latch cleaner and the watchdog's
	// sends, blocked in rueidis's pool; the connection they wait for is
	// the hub's, which Close gives back only after that wait.
	closeWithin5s(t, c, "beside a waiter's subscription", rc.Close) // rc.Close ends the pool's waits
}
