package lock_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/observe"
	"github.com/rlock-go/rlock/reentrant"
)

// TestNameMapper: a Client with Config.NameMapper locks the mapped name,
// as Redisson's nameMapper does: its key, token and channel are the
// mapped name's, so it excludes, and is woken by, a Mutex made with the
// mapped name directly (a Client without a mapper, or a Java service
// whose mapper is the same), and not one made with the unmapped name.
func TestNameMapper(t *testing.T) {
	const prefix = "app1:"
	mapped := newClient(t, lock.Config{NameMapper: func(n string) string { return prefix + n }})
	wc := newWakeCounter()
	direct := newClient(t, lock.Config{Observer: wc.observer()})
	rc := raw(t)
	n := name(t)

	m := mapped.Mutex(n)
	if m.Name() != prefix+n {
		t.Fatalf("Mutex.Name() = %q, want the mapped %q", m.Name(), prefix+n)
	}
	h, err := m.Lock(bg(), lock.Fenced())
	must(t, err)
	if h.Name() != prefix+n {
		t.Fatalf("Held.Name() = %q, want the mapped %q", h.Name(), prefix+n)
	}
	if !exists(t, rc, prefix+n) || exists(t, rc, n) {
		t.Fatalf("keys %v: want the mapped name's key and not the unmapped one's", keys(t, rc, n))
	}
	if !exists(t, rc, reentrant.TokenName(prefix+n)) {
		t.Fatalf("keys %v: no token key of the mapped name", keys(t, rc, n))
	}

	// The mapped name made directly is the same lock.
	if _, err := direct.Mutex(prefix + n).TryLock(bg()); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("TryLock of the mapped name by another Client: %v, want ErrNotAcquired", err)
	}
	// The unmapped name is another lock.
	other, err := direct.Mutex(n).TryLock(bg())
	must(t, err)
	must(t, other.Unlock(bg()))

	// A waiter on the mapped name is woken by the mapper's release: the
	// unlock message goes to the mapped name's channel.
	got := make(chan error, 1)
	go func() {
		h2, err := direct.Mutex(prefix+n).TryLock(bg(), lock.Wait(time.Minute))
		if err == nil {
			err = h2.Unlock(bg())
		}
		got <- err
	}()
	<-wc.waiting
	if s := numsub(t, rc, reentrant.ChannelName(prefix+n)); s != 1 {
		t.Fatalf("%d subscribers on the mapped name's channel while waiting, want 1", s)
	}
	must(t, h.Unlock(bg()))
	must(t, <-got)
	if r := <-wc.woken; r != observe.WakeMessage {
		t.Fatalf("woken by %v, want the mapper's unlock message", r)
	}

	// And the other way round: the mapper's Mutex excludes a holder of the
	// mapped name.
	h3, err := direct.Mutex(prefix + n).Lock(bg())
	must(t, err)
	if _, err := m.TryLock(bg()); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("TryLock by the mapper while the mapped name is held: %v, want ErrNotAcquired", err)
	}
	must(t, h3.Unlock(bg()))
}

// TestNameMapperBadName: a mapped name is checked like any name; a bad
// one is ErrInvalid from every method and leaves nothing in Redis, and a
// bad name is refused before it is mapped.
func TestNameMapperBadName(t *testing.T) {
	rc := raw(t)
	n := name(t)
	for _, tc := range []struct {
		what   string
		mapper func(string) string
		name   string
	}{
		{"mapped to empty", func(string) string { return "" }, n},
		{"mapped to non-UTF-8", func(s string) string { return s + "\xff" }, n},
		{"mapped past 8 KiB", func(s string) string { return s + strings.Repeat("x", 8<<10) }, n},
		{"empty before mapping", func(s string) string { return "prefix:" + s }, ""},
	} {
		t.Run(tc.what, func(t *testing.T) {
			called := 0
			c := newClient(t, lock.Config{NameMapper: func(s string) string { called++; return tc.mapper(s) }})
			m := c.Mutex(tc.name)
			_, err := m.TryLock(bg())
			if !errors.Is(err, lock.ErrInvalid) {
				t.Fatalf("TryLock: %v, want ErrInvalid", err)
			}
			if tc.name != "" && !strings.Contains(err.Error(), "NameMapper") {
				t.Fatalf("error %q does not say the mapper made the name", err)
			}
			if _, err := m.Lock(bg()); !errors.Is(err, lock.ErrInvalid) {
				t.Fatalf("Lock: %v, want ErrInvalid", err)
			}
			if _, err := m.IsLocked(bg()); !errors.Is(err, lock.ErrInvalid) {
				t.Fatalf("IsLocked: %v, want ErrInvalid", err)
			}
			if _, err := m.ForceUnlock(bg()); !errors.Is(err, lock.ErrInvalid) {
				t.Fatalf("ForceUnlock: %v, want ErrInvalid", err)
			}
			if tc.name == "" && called != 0 {
				t.Fatalf("the mapper was called %d times for an empty name", called)
			}
		})
	}
	if ks := keys(t, rc, n); len(ks) != 0 {
		t.Fatalf("keys left in Redis: %v", ks)
	}
}
