package lock_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/multilock"
)

// Bad input gets a sentinel error, never a panic, and leaves nothing in
// Redis. Each case runs on a server of its own table, which must be empty
// afterwards.
func TestBadInput(t *testing.T) {
	srv := integrationRedis(t)
	pw := integrationRedis(t, integration.Options{Password: "s3cret"})
	rc := raw(t, srv)
	closedPort := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		must(t, err)
		addr := l.Addr().String()
		l.Close()
		return addr
	}()
	var nilCtx context.Context

	// client returns a fresh Client on the table's server; closed by the case.
	client := func(t *testing.T) *lock.Client {
		c, err := lock.New(bg(), lock.Config{Addrs: []string{srv.Addr()}})
		must(t, err)
		return c
	}
	// run calls f with a fresh Client, which it closes afterwards.
	run := func(f func(c *lock.Client) error) func(t *testing.T) error {
		return func(t *testing.T) error {
			c := client(t)
			defer c.Close(bg())
			return f(c)
		}
	}
	newWith := func(cfg lock.Config) func(t *testing.T) error {
		return func(t *testing.T) error {
			if len(cfg.Addrs) == 0 {
				cfg.Addrs = []string{srv.Addr()}
			}
			c, err := lock.New(bg(), cfg)
			if err == nil {
				c.Close(bg())
				t.Fatal("New accepted a bad Config")
			}
			return err
		}
	}
	tryLock := func(n string, opts ...lock.Option) func(t *testing.T) error {
		return run(func(c *lock.Client) error { _, err := c.Mutex(n).TryLock(bg(), opts...); return err })
	}

	cases := []struct {
		name string
		want error
		f    func(t *testing.T) error
	}{
		{"empty name", lock.ErrInvalid, tryLock("")},
		{"huge name", lock.ErrInvalid, tryLock(strings.Repeat("x", 8<<10+1))},
		{"binary name", lock.ErrInvalid, tryLock("lock\xff\xfe")},
		{"empty name IsLocked", lock.ErrInvalid, run(func(c *lock.Client) error { _, err := c.Mutex("").IsLocked(bg()); return err })},
		{"empty name ForceUnlock", lock.ErrInvalid, run(func(c *lock.Client) error { _, err := c.Mutex("").ForceUnlock(bg()); return err })},
		{"negative wait", lock.ErrInvalid, tryLock("bad", lock.Wait(-time.Second))},
		{"zero lease", lock.ErrInvalid, tryLock("bad", lock.Lease(0))},
		{"negative lease", lock.ErrInvalid, tryLock("bad", lock.Lease(-time.Second))},
		{"lease shorter than a round trip", lock.ErrInvalid, tryLock("bad", lock.Lease(time.Microsecond))},
		{"nil option", lock.ErrInvalid, tryLock("bad", nil)},
		{"Wait given to Lock", lock.ErrInvalid, run(func(c *lock.Client) error { _, err := c.Mutex("bad").Lock(bg(), lock.Wait(time.Second)); return err })},
		{"nil context Lock", lock.ErrInvalid, run(func(c *lock.Client) error { _, err := c.Mutex("bad").Lock(nilCtx); return err })},
		{"nil context Unlock", lock.ErrInvalid, run(func(c *lock.Client) error {
			h, err := c.Mutex("bad").TryLock(bg())
			if err != nil {
				return err
			}
			defer h.Unlock(bg())
			return h.Unlock(nilCtx)
		})},
		{"nil context New", lock.ErrInvalid, func(t *testing.T) error { _, err := lock.New(nilCtx, lock.Config{}); return err }},
		{"nil context Close", lock.ErrInvalid, run(func(c *lock.Client) error { return c.Close(nilCtx) })},
		{"renew interval not below the lease", lock.ErrInvalid, newWith(lock.Config{WatchdogTimeout: time.Second, RenewInterval: time.Second})},
		{"negative watchdog timeout", lock.ErrInvalid, newWith(lock.Config{WatchdogTimeout: -time.Second})},
		{"negative renew interval", lock.ErrInvalid, newWith(lock.Config{RenewInterval: -time.Second})},
		{"renew interval absurdly small", lock.ErrInvalid, newWith(lock.Config{RenewInterval: time.Millisecond})},
		{"command timeout + renew interval not below the lease", lock.ErrInvalid, newWith(lock.Config{WatchdogTimeout: time.Second, RenewInterval: 500 * time.Millisecond, CommandTimeout: 500 * time.Millisecond})},
		{"two addresses", lock.ErrInvalid, newWith(lock.Config{Addrs: []string{srv.Addr(), srv.Addr()}})},
		{"address without port", lock.ErrInvalid, newWith(lock.Config{Addrs: []string{"127.0.0.1"}})},
		{"negative DB", lock.ErrInvalid, newWith(lock.Config{DB: -1})},
		{"unknown pubsub mode", lock.ErrInvalid, newWith(lock.Config{PubSub: 7})},
		{"unreachable address", lock.ErrUnavailable, newWith(lock.Config{Addrs: []string{closedPort}})},
		{"wrong password", lock.ErrAuth, newWith(lock.Config{Addrs: []string{pw.Addr()}, Password: "wrong"})},
		{"no password", lock.ErrAuth, newWith(lock.Config{Addrs: []string{pw.Addr()}})},
		{"nil rueidis client", lock.ErrInvalid, func(t *testing.T) error { _, err := lock.FromClient(nil, lock.Config{}); return err }},
		{"Close twice", lock.ErrClosed, func(t *testing.T) error {
			c := client(t)
			must(t, c.Close(bg()))
			return c.Close(bg())
		}},
		{"Unlock twice", lock.ErrNotHeld, run(func(c *lock.Client) error {
			h, err := c.Mutex("bad").Lock(bg())
			must(t, err)
			must(t, h.Unlock(bg()))
			return h.Unlock(bg())
		})},
		{"Unlock after Close", lock.ErrClosed, func(t *testing.T) error {
			c := client(t)
			h, err := c.Mutex("bad").Lock(bg())
			must(t, err)
			must(t, c.Close(bg()))
			return h.Unlock(bg())
		}},
		{"Lock after Close", lock.ErrClosed, func(t *testing.T) error {
			c := client(t)
			must(t, c.Close(bg()))
			_, err := c.Mutex("bad").Lock(bg())
			return err
		}},
		{"IsLocked after Close", lock.ErrClosed, func(t *testing.T) error {
			c := client(t)
			must(t, c.Close(bg()))
			_, err := c.Mutex("bad").IsLocked(bg())
			return err
		}},
		{"a multilock option given to a Mutex", lock.ErrInvalid, run(func(c *lock.Client) error {
			_, err := c.Mutex("bad").TryLock(bg(), multilock.PerMasterTimeout(time.Second))
			return err
		})},
		{"HoldCount without an owner", lock.ErrNotHeld, run(func(c *lock.Client) error {
			h, err := c.Mutex("bad").Lock(bg())
			must(t, err)
			defer h.Unlock(bg())
			_, err = c.Mutex("bad").HoldCount(bg())
			return err
		})},
		{"Unlock twice", lock.ErrNotHeld, run(func(c *lock.Client) error {
			h, err := c.Mutex("bad").Lock(bg())
			must(t, err)
			must(t, h.Unlock(bg()))
			return h.Unlock(bg())
		})},
		{"Lock with a cancelled context", lock.ErrNotAcquired, run(func(c *lock.Client) error {
			ctx, cancel := context.WithCancel(bg())
			cancel()
			_, err := c.Mutex("bad").Lock(ctx)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("the context's error is not kept: %v", err)
			}
			return err
		})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Fatalf("panic: %v", p)
					}
				}()
				err = tc.f(t)
			}()
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			if n, err := do(t, rc, "DBSIZE").AsInt64(); err != nil || n != 0 {
				ks, _ := do(t, rc, "KEYS", "*").AsStrSlice()
				t.Fatalf("redis holds %d keys afterwards: %q", n, ks)
			}
		})
	}
	if len(cases) < 20 {
		t.Fatalf("only %d cases", len(cases))
	}
}
