package lock_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/reentrant"
)

// callAll calls every exported method of v (a pointer, nil or not) with
// harmless arguments, and checks that none panics and that each error
// returned matches lock.ErrInvalid.
func callAll(t *testing.T, what string, v any) {
	t.Helper()
	rv := reflect.ValueOf(v)
	errType := reflect.TypeFor[error]()
	ctxType := reflect.TypeFor[context.Context]()
	for i := range rv.NumMethod() {
		m := rv.Type().Method(i)
		ft := rv.Method(i).Type()
		var args []reflect.Value
		for j := range ft.NumIn() {
			in := ft.In(j)
			switch {
			case ft.IsVariadic() && j == ft.NumIn()-1:
			case in == ctxType:
				args = append(args, reflect.ValueOf(bg()))
			case in.Kind() == reflect.String:
				args = append(args, reflect.ValueOf("x").Convert(in))
			default:
				args = append(args, reflect.Zero(in))
			}
		}
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%s.%s panics: %v", what, m.Name, p)
				}
			}()
			out := rv.Method(i).Call(args)
			for _, o := range out {
				if o.Type() != errType {
					continue
				}
				if err, _ := o.Interface().(error); !errors.Is(err, lock.ErrInvalid) {
					t.Errorf("%s.%s = %v, want ErrInvalid", what, m.Name, err)
				}
			}
		}()
	}
}

// P1-42, P1-44, P3-RL18: nil and zero values answer ErrInvalid, never panic.
func TestNilAndZeroValues(t *testing.T) {
	var nilClient *lock.Client
	zeroClient := &lock.Client{}
	callAll(t, "(*Client)(nil)", nilClient)
	callAll(t, "&Client{}", zeroClient)
	callAll(t, "(*Mutex)(nil)", (*lock.Mutex)(nil))
	callAll(t, "&Mutex{}", &lock.Mutex{})
	callAll(t, "nil Client's Mutex", nilClient.Mutex("x"))
	callAll(t, "zero Client's Mutex", zeroClient.Mutex("x"))
	callAll(t, "(*Held)(nil)", (*lock.Held)(nil))
	callAll(t, "&Held{}", &lock.Held{})

	// A failed TryLock's Held: Unlock and Context are safe.
	c := newClient(t, lock.Config{})
	n := name(t)
	h, err := c.Mutex(n).TryLock(bg())
	must(t, err)
	defer h.Unlock(bg())
	h2, err := c.Mutex(n).TryLock(bg())
	if !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("second TryLock = %v, want ErrNotAcquired", err)
	}
	if err := h2.Unlock(bg()); !errors.Is(err, lock.ErrInvalid) {
		t.Fatalf("Unlock of a failed TryLock's Held = %v, want ErrInvalid", err)
	}
	if !errors.Is(context.Cause(h2.Context()), lock.ErrInvalid) {
		t.Fatalf("Context of a nil Held: cause %v, want ErrInvalid", context.Cause(h2.Context()))
	}
	<-h2.Done()
}

// checkOneLine fails unless err prints on one line with one "rlock: ".
func checkOneLine(t *testing.T, err error) {
	t.Helper()
	s := err.Error()
	if strings.Contains(s, "\n") || strings.Count(s, "rlock:") != 1 || !strings.HasPrefix(s, "rlock: ") {
		t.Errorf("error not on one line with one rlock: prefix: %q", s)
	}
}

// Errors print on one line, "rlock:" once, naming the master.
func TestErrorsOneLine(t *testing.T) {
	ctx, cancel := context.WithTimeout(bg(), 2*time.Second)
	defer cancel()
	_, err := lock.New(ctx, lock.Config{Addrs: []string{"127.0.0.1:1"}})
	if !errors.Is(err, lock.ErrUnavailable) {
		t.Fatalf("New on a closed port = %v, want ErrUnavailable", err)
	}
	checkOneLine(t, err)
	if !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("error does not name the master: %q", err)
	}

	c := newClient(t, lock.Config{})
	n := name(t)
	h, err := c.Mutex(n).Lock(bg())
	must(t, err)
	defer h.Unlock(bg())
	cctx, cancel2 := context.WithTimeout(bg(), 50*time.Millisecond)
	defer cancel2()
	_, err = c.Mutex(n).Lock(cctx)
	if !errors.Is(err, lock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock of a held lock with a deadline = %v", err)
	}
	checkOneLine(t, err)
	_, err = c.Mutex(n).TryLock(bg())
	checkOneLine(t, err)
	_, err = c.Mutex(n).HoldCount(bg())
	checkOneLine(t, err)
}

// notLock puts a non-lock under a lock name with setup, then checks that
// every call on it is ErrNotLock and leaves the key as it was.
func notLock(t *testing.T, c *lock.Client, n string, ctx context.Context, dump func() string) {
	t.Helper()
	before := dump()
	m := c.Mutex(n)
	calls := map[string]func() error{
		"TryLock":        func() error { _, err := m.TryLock(ctx); return err },
		"TryLock Fenced": func() error { _, err := m.TryLock(ctx, lock.Fenced()); return err },
		"TryLock Wait":   func() error { _, err := m.TryLock(ctx, lock.Wait(time.Second)); return err },
		"Lock": func() error {
			lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			_, err := m.Lock(lctx)
			return err
		},
		"HoldCount": func() error { _, err := m.HoldCount(ctx); return err },
	}
	for what, f := range calls {
		start := time.Now()
		err := f()
		if !errors.Is(err, lock.ErrNotLock) {
			t.Errorf("%s on a non-lock = %v, want ErrNotLock", what, err)
			continue
		}
		if time.Since(start) > time.Second {
			t.Errorf("%s on a non-lock took %v", what, time.Since(start))
		}
		checkOneLine(t, err)
		if after := dump(); after != before {
			t.Errorf("%s changed the key: %s, was %s", what, after, before)
		}
	}
}

// P1-78, P1-79, P1-80, P1-82, P3-RL16: a key that is not a lock is
// ErrNotLock, and is left as it is.
func TestNotALock(t *testing.T) {
	srv := integrationRedis(t)
	rc := raw(t, srv)
	c := newClient(t, lock.Config{}, srv)
	ctx := lock.WithOwner(bg())
	owner, _ := lock.OwnerFrom(ctx)
	field := c.ID() + ":" + itoa(owner)
	dumpOf := func(key string) func() string {
		return func() string {
			ks, _ := do(t, rc, "KEYS", "*").AsStrSlice()
			// An earlier subtest's answered release leaves its latch
			// until the cleaner deletes it, 200 ms later: not a change
			// these calls made. Latches of key itself stay in the dump.
			own := reentrant.LatchName(key, "")
			ks = slices.DeleteFunc(ks, func(k string) bool {
				return strings.HasPrefix(k, "redisson_unlock_latch:") && !strings.HasPrefix(k, own)
			})
			slices.Sort(ks)
			typ, _ := do(t, rc, "TYPE", key).ToString()
			return typ + " " + strings.Join(ks, ",")
		}
	}
	t.Run("string", func(t *testing.T) {
		must(t, do(t, rc, "SET", "str", "x").Error())
		notLock(t, c, "str", ctx, dumpOf("str"))
	})
	t.Run("list", func(t *testing.T) {
		must(t, do(t, rc, "RPUSH", "list", "x").Error())
		notLock(t, c, "list", ctx, dumpOf("list"))
	})
	t.Run("another lock's fencing counter", func(t *testing.T) {
		h, err := c.Mutex("x").Lock(bg(), lock.Fenced())
		must(t, err)
		must(t, h.Unlock(bg()))
		notLock(t, c, "redisson_lock_token:{x}", ctx, dumpOf("redisson_lock_token:{x}"))
	})
	t.Run("non-integer hold count", func(t *testing.T) {
		must(t, do(t, rc, "HSET", "nonint", field, "abc").Error())
		notLock(t, c, "nonint", ctx, func() string {
			v, _ := do(t, rc, "HGETALL", "nonint").AsStrMap()
			return dumpOf("nonint")() + " " + v[field]
		})
	})
	t.Run("held lock overwritten by a string", func(t *testing.T) {
		h, err := c.Mutex("over").Lock(bg())
		must(t, err)
		must(t, do(t, rc, "SET", "over", "ABCD").Error())
		err = h.Unlock(bg())
		if !errors.Is(err, lock.ErrNotLock) {
			t.Fatalf("Unlock of a lock overwritten by a string = %v, want ErrNotLock", err)
		}
		checkOneLine(t, err)
		if v, _ := do(t, rc, "GET", "over").ToString(); v != "ABCD" {
			t.Fatalf("the string was changed to %q", v)
		}
	})
}

func itoa(n uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

// P1-61, P1-62: a DB out of the server's range is ErrInvalid.
func TestDBOutOfRange(t *testing.T) {
	for _, db := range []int{99, 1 << 40} {
		_, err := lock.New(bg(), lock.Config{Addrs: []string{shared.Addr()}, DB: db})
		if !errors.Is(err, lock.ErrInvalid) {
			t.Fatalf("New with DB %d = %v, want ErrInvalid", db, err)
		}
		checkOneLine(t, err)
	}
}

// P1-86, P1-87: OOM (maxmemory reached, noeviction) is ErrUnavailable;
// nothing is left, and the lock works once memory is freed.
func TestOOM(t *testing.T) {
	srv := integrationRedis(t)
	rc := raw(t, srv)
	c := newClient(t, lock.Config{}, srv)
	must(t, do(t, rc, "CONFIG", "SET", "maxmemory-policy", "noeviction").Error())
	setMax := func(v string) { t.Helper(); must(t, do(t, rc, "CONFIG", "SET", "maxmemory", v).Error()) }

	// P1-87 first: hold, fill, Unlock.
	h, err := c.Mutex("held").Lock(bg())
	must(t, err)
	setMax("1")
	uctx, cancel := context.WithTimeout(bg(), 300*time.Millisecond)
	err = h.Unlock(uctx)
	cancel()
	if !errors.Is(err, lock.ErrUnavailable) {
		t.Fatalf("Unlock at maxmemory = %v, want ErrUnavailable", err)
	}
	checkOneLine(t, err)

	// P1-86: TryLock at maxmemory.
	tctx, cancel := context.WithTimeout(bg(), 300*time.Millisecond)
	_, err = c.Mutex("free").TryLock(tctx)
	cancel()
	if !errors.Is(err, lock.ErrUnavailable) || !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("TryLock at maxmemory = %v, want ErrUnavailable and ErrNotAcquired", err)
	}
	checkOneLine(t, err)
	if exists(t, rc, "free") {
		t.Fatal("a refused TryLock left the lock")
	}

	setMax("0")
	// The unconfirmed Unlock is settled in the background: the lock goes.
	deadline := time.Now().Add(10 * time.Second)
	for exists(t, rc, "held") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if exists(t, rc, "held") {
		t.Fatal("the lock whose Unlock failed at maxmemory is still held after memory was freed")
	}
	if err := h.Unlock(bg()); err != nil {
		t.Fatalf("Unlock again after the settlement = %v, want nil", err)
	}
	h, err = c.Mutex("free").TryLock(bg())
	must(t, err)
	must(t, h.Unlock(bg()))
}

// P1-77: an ACL user that may run the scripts but not PUBLISH to a lock's
// channel (no channel at all, or not the PUBLISH command) releases without
// the unlock message: the lock is free, the Held has ended, and Unlock
// says so with ErrAuth. Before, the release was refused whole: the lock
// stayed until its lease ran out, and Close could not release it either.
// noPublish are the two ways an ACL refuses a script's PUBLISH.
var noPublish = []struct{ what, rule string }{
	{"channels", "resetchannels"}, // no channel at all: the script's PUBLISH is refused
	{"command", "-publish"},       // channels allowed, the PUBLISH command not
}

// publishingKinds are the lock kinds whose releases publish a message.
var publishingKinds = map[string]func(*lock.Client, string) *lock.Mutex{
	"plain": (*lock.Client).Mutex,
	"fair":  (*lock.Client).FairMutex,
	"read":  func(c *lock.Client, n string) *lock.Mutex { return c.ReadWriteMutex(n).ReadLock() },
	"write": func(c *lock.Client, n string) *lock.Mutex { return c.ReadWriteMutex(n).WriteLock() },
}

func TestNoPermToPublish(t *testing.T) {
	srv := integrationRedis(t)
	rc := raw(t, srv)
	other := newClient(t, lock.Config{}, srv)
	for _, deny := range noPublish {
		must(t, do(t, rc, "ACL", "SETUSER", "locker-"+deny.what, "reset", "on", ">pw", "~*", "&*", "+@all", deny.rule).Error())
		c := newClient(t, lock.Config{Username: "locker-" + deny.what, Password: "pw"}, srv)
		for kind, m := range publishingKinds {
			t.Run(deny.what+"/"+kind, func(t *testing.T) {
				n := name(t)
				h, err := m(c, n).Lock(bg())
				must(t, err)
				err = h.Unlock(bg())
				if kind == "fair" {
					// A fair release tells only the queue's head: with
					// nobody queued there is no message to refuse.
					must(t, err)
				} else {
					if !errors.Is(err, lock.ErrAuth) || !strings.Contains(err.Error(), "without its unlock message") {
						t.Fatalf("Unlock without PUBLISH permission = %v, want ErrAuth saying it released without the message", err)
					}
					checkOneLine(t, err)
				}
				if exists(t, rc, n) {
					t.Fatal("Unlock without PUBLISH permission left the lock in Redis")
				}
				if h.Context().Err() == nil || errors.Is(context.Cause(h.Context()), lock.ErrLockLost) {
					t.Fatalf("the released Held's context: %v, want ended without a loss", context.Cause(h.Context()))
				}
				if err := h.Unlock(bg()); !errors.Is(err, lock.ErrNotHeld) {
					t.Fatalf("second Unlock = %v, want ErrNotHeld", err)
				}
				oh, err := m(other, n).TryLock(bg())
				if err != nil {
					t.Fatalf("another Client's TryLock after the release: %v", err)
				}
				must(t, oh.Unlock(bg()))
			})
		}
	}
}

// READONLY (a master demoted to a replica after New: New refuses a
// replica) and BUSY (a script running) are ErrUnavailable, bounded by
// the ctx; nothing is left.
func TestTransientRefusals(t *testing.T) {
	t.Run("READONLY", func(t *testing.T) {
		master := integrationRedis(t)
		replica := integrationRedis(t)
		c := newClient(t, lock.Config{}, replica)
		rc := raw(t, replica)
		host, port, _ := strings.Cut(master.DirectAddr(), ":")
		must(t, do(t, rc, "REPLICAOF", host, port).Error())
		defer do(t, rc, "REPLICAOF", "NO", "ONE")
		ctx, cancel := context.WithTimeout(bg(), 300*time.Millisecond)
		defer cancel()
		_, err := c.Mutex("ro").TryLock(ctx)
		if !errors.Is(err, lock.ErrUnavailable) {
			t.Fatalf("TryLock on a replica = %v, want ErrUnavailable", err)
		}
		checkOneLine(t, err)
	})
	t.Run("READONLY past the failover window", func(t *testing.T) {
		// A blocking Lock takes a replica's READONLY for a failover in
		// progress, but not for ever: past the window it is reported.
		master := integrationRedis(t)
		replica := integrationRedis(t)
		c := newClient(t, lock.Config{WatchdogTimeout: time.Second}, replica)
		rc := raw(t, replica)
		host, port, _ := strings.Cut(master.DirectAddr(), ":")
		must(t, do(t, rc, "REPLICAOF", host, port).Error())
		defer do(t, rc, "REPLICAOF", "NO", "ONE")
		ctx, cancel := context.WithTimeout(bg(), time.Minute)
		defer cancel()
		_, err := c.Mutex("ro-blocking").Lock(ctx)
		if !errors.Is(err, lock.ErrUnavailable) || ctx.Err() != nil {
			t.Fatalf("Lock on a replica = %v (ctx %v), want ErrUnavailable before the ctx ends", err, ctx.Err())
		}
	})
	t.Run("BUSY", func(t *testing.T) {
		srv := integrationRedis(t)
		rc := raw(t, srv)
		looper := integration.NewClient(t, srv.DirectAddr())
		c := newClient(t, lock.Config{}, srv)
		must(t, do(t, rc, "CONFIG", "SET", "busy-reply-threshold", "50").Error())
		go do(t, looper, "EVAL", "while true do end", "0")
		deadline := time.Now().Add(5 * time.Second)
		for err := do(t, rc, "PING").Error(); err == nil || !strings.HasPrefix(err.Error(), "BUSY"); err = do(t, rc, "PING").Error() {
			if time.Now().After(deadline) {
				t.Fatalf("the script never made Redis busy: %v", err)
			}
		}
		ctx, cancel := context.WithTimeout(bg(), 300*time.Millisecond)
		_, err := c.Mutex("busy").TryLock(ctx)
		cancel()
		for i := 0; ; i++ { // the kill may need the script's next check
			err := do(t, rc, "SCRIPT", "KILL").Error()
			if err == nil || strings.HasPrefix(err.Error(), "NOTBUSY") {
				break
			}
			if i == 100 {
				t.Fatalf("SCRIPT KILL: %v", err)
			}
		}
		if !errors.Is(err, lock.ErrUnavailable) {
			t.Fatalf("TryLock while Redis is busy = %v, want ErrUnavailable", err)
		}
		checkOneLine(t, err)
		for i := 0; do(t, rc, "PING").Error() != nil; i++ {
			if i == 1000 {
				t.Fatal("still busy after SCRIPT KILL")
			}
		}
		if exists(t, rc, "busy") {
			t.Fatal("lock left")
		}
	})
}

// A Lock or TryLock whose ctx has already ended sends nothing: no acquire
// whose grant would only be given back (for a fair lock, also no place in
// the queue to leave again).
func TestEndedContextSendsNoAcquire(t *testing.T) {
	srv := integrationRedis(t)
	c := newClient(t, lock.Config{}, srv)
	rc := raw(t, srv)
	evals := func() int64 {
		info, err := do(t, rc, "INFO", "commandstats").ToString()
		must(t, err)
		var n int64
		for _, line := range strings.Split(info, "\r\n") {
			if rest, ok := strings.CutPrefix(line, "cmdstat_evalsha:calls="); ok {
				n, _ = strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
			}
		}
		return n
	}
	ctx, cancel := context.WithCancel(bg())
	cancel()
	for _, m := range []*lock.Mutex{c.Mutex(name(t)), c.FairMutex(name(t) + ":fair")} {
		before := evals()
		if _, err := m.Lock(ctx); !errors.Is(err, lock.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
			t.Fatalf("Lock with an ended ctx = %v", err)
		}
		if _, err := m.TryLock(ctx); !errors.Is(err, lock.ErrNotAcquired) {
			t.Fatalf("TryLock with an ended ctx = %v", err)
		}
		if n := evals() - before; n != 0 {
			t.Fatalf("%s: %d scripts sent for calls whose ctx had ended", m.Name(), n)
		}
	}
}
