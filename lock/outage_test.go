package lock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/reentrant"
)

// Outages are ridden out (issue 14; misuse cases P2-13 and P2-09 of the
// review of db82bdb, which failed there).

// P2-13: renewals that fail on reset connections are retried within the
// tick, so resets while Redis is healthy lose nothing.
func TestRenewalsSurviveConnectionResets(t *testing.T) {
	srv := integrationRedis(t)
	c := newClient(t, lock.Config{WatchdogTimeout: time.Second, RenewInterval: 333 * time.Millisecond}, srv)
	n := name(t)
	h, err := c.Mutex(n).Lock(bg())
	must(t, err)
	f := inject(t, srv, integration.Rule{Match: integration.MatchFunc(func(cmd []string) bool {
		return len(cmd) > 3 && strings.EqualFold(cmd[0], "EVALSHA") && cmd[1] == reentrant.RenewScript.SHA1()
	}), Action: integration.ResetAfterRequest, Times: 3})
	wctx, cancel := context.WithTimeout(bg(), 10*time.Second)
	defer cancel()
	must(t, f.Wait(wctx)) // three renewals cut, one after another
	select {
	case <-h.Done():
		t.Fatalf("lost while Redis was up: %v", context.Cause(h.Context()))
	case <-time.After(1500 * time.Millisecond): // more than a lease after the last reset
	}
	must(t, h.Unlock(bg()))
}

// P2-09: a blocking Lock waits out a one-second restart of its master.
func TestLockRidesOutARestart(t *testing.T) {
	srv := integrationRedis(t)
	holder := newClient(t, lock.Config{}, srv)
	c := newClient(t, lock.Config{CommandTimeout: 200 * time.Millisecond}, srv)
	n := name(t)
	h, err := holder.Mutex(n).Lock(bg())
	must(t, err)
	_ = h
	got := make(chan error, 1)
	ctx, cancel := context.WithTimeout(bg(), 15*time.Second)
	defer cancel()
	go func() {
		g, err := c.Mutex(n).Lock(ctx)
		if err == nil {
			err = g.Unlock(bg())
		}
		got <- err
	}()
	time.Sleep(100 * time.Millisecond) // the waiter is waiting (the fault's timing, not a signal)
	must(t, srv.Kill(bg()))
	time.Sleep(time.Second)
	must(t, srv.Restart(bg(), integration.RestartOptions{})) // data gone: the lock is free
	if err := <-got; err != nil {
		if errors.Is(err, lock.ErrUnavailable) {
			t.Fatalf("Lock gave up during a 1s restart: %v", err)
		}
		t.Fatal(err)
	}
}
