package lock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rlock-go/rlock/lock"
)

// P1-77, ForceUnlock: a Client whose ACL may not PUBLISH to a lock's
// channel deletes the lock without its unlock message and says so
// (ErrAuth, reporting the lock deleted), for every kind that publishes;
// before, the script failed after its DEL (plain, fair: deleted, and an
// error said nothing was) or before it (read-write: the lock stayed).
func TestNoPermToPublishForceUnlock(t *testing.T) {
	srv := integrationRedis(t)
	rc := raw(t, srv)
	// The holder hears of the force unlock from its next renewal (no
	// message comes): renewed every second.
	holder := newClient(t, lock.Config{WatchdogTimeout: 3 * time.Second}, srv)
	for _, deny := range noPublish {
		must(t, do(t, rc, "ACL", "SETUSER", "forcer-"+deny.what, "reset", "on", ">pw", "~*", "&*", "+@all", deny.rule).Error())
		c := newClient(t, lock.Config{Username: "forcer-" + deny.what, Password: "pw"}, srv)
		for kind, m := range publishingKinds {
			t.Run(deny.what+"/"+kind, func(t *testing.T) {
				n := name(t)
				h, err := m(holder, n).Lock(bg())
				must(t, err)
				var waiter <-chan returned
				if kind == "fair" {
					// A fair force unlock tells the queue's head only.
					wctx, cancel := context.WithTimeout(bg(), 30*time.Second)
					defer cancel()
					waiter = goAcquire(func() (*lock.Held, error) { return m(holder, n).Lock(lock.WithOwner(wctx)) })
					awaitQueued(t, rc, n, 1)
					defer func() {
						cancel()
						<-waiter
					}()
				}
				deleted, err := m(c, n).ForceUnlock(bg())
				if !deleted || !errors.Is(err, lock.ErrAuth) || !strings.Contains(err.Error(), "without its unlock message") {
					t.Fatalf("ForceUnlock without PUBLISH permission = %v, %v; want true and ErrAuth saying it deleted without the message", deleted, err)
				}
				checkOneLine(t, err)
				left := exists(t, rc, n)
				if kind == "fair" && left {
					// The fair waiter may take the lock as soon as it is
					// gone (its own timer): the forced holder's field
					// must be.
					field := fmt.Sprintf("%s:%d", holder.ID(), h.Owner())
					v, err := do(t, rc, "HEXISTS", n, field).AsInt64()
					must(t, err)
					left = v == 1
				}
				if left {
					t.Fatal("ForceUnlock without PUBLISH permission left the lock in Redis")
				}
				select {
				case <-h.Done():
				case <-time.After(10 * time.Second):
					t.Fatal("the holder's Held did not end within 10 s of the force unlock")
				}
			})
		}
	}
}

// P1-77, Close: a Client without PUBLISH permission that is closed while
// it holds a lock releases it without the unlock message, and Close's
// error says so (ErrAuth, naming the lock), as Unlock's does; before,
// Close said nothing of it.
func TestNoPermToPublishClose(t *testing.T) {
	srv := integrationRedis(t)
	rc := raw(t, srv)
	must(t, do(t, rc, "ACL", "SETUSER", "closer", "reset", "on", ">pw", "~*", "&*", "+@all", "-publish").Error())
	c, err := lock.New(bg(), lock.Config{Addrs: []string{srv.Addr()}, Username: "closer", Password: "pw"})
	must(t, err)
	n := name(t)
	if _, err := c.Mutex(n).Lock(bg()); err != nil {
		t.Fatal(err)
	}
	err = c.Close(bg())
	if !errors.Is(err, lock.ErrAuth) || !strings.Contains(err.Error(), "without its unlock message") || !strings.Contains(err.Error(), n) {
		t.Fatalf("Close without PUBLISH permission = %v, want ErrAuth saying %q went without its unlock message", err, n)
	}
	if exists(t, rc, n) {
		t.Fatal("Close without PUBLISH permission left the lock in Redis")
	}
}
