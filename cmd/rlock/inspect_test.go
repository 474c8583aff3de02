package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/reentrant"
)

// inspectJSON runs "rlock inspect --json" and decodes its output.
func inspectJSON(t *testing.T, addr, name string) lockInfo {
	t.Helper()
	r := runRlock(t, "inspect", "--addr", addr, "--json", name)
	if r.code != 0 {
		t.Fatalf("exit %d; stderr: %s", r.code, r.stderr)
	}
	var info lockInfo
	if err := json.Unmarshal([]byte(r.stdout), &info); err != nil {
		t.Fatalf("%v in %s", err, r.stdout)
	}
	return info
}

func TestInspectReentrantLock(t *testing.T) {
	srv := newServer(t, integration.Options{})
	c := newClient(t, srv.Addr(), lock.Config{})
	name := lockName(t)
	m := c.Mutex(name)
	ctx := context.Background()
	h, err := m.TryLock(ctx, lock.Fenced())
	if err != nil {
		t.Fatal(err)
	}
	defer h.Unlock(ctx)
	h2, err := m.Lock(h.Context(), lock.Fenced()) // re-entry: hold count 2
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Unlock(ctx)
	owner := strconv.FormatUint(h.Owner(), 10)

	t.Run("json", func(t *testing.T) {
		info := inspectJSON(t, srv.Addr(), name)
		if !info.Locked || info.Type != "hash" || !info.Redisson {
			t.Fatalf("locked %v, type %q, redisson %v", info.Locked, info.Type, info.Redisson)
		}
		if len(info.Holders) != 1 {
			t.Fatalf("holders %+v", info.Holders)
		}
		want := holder{Field: c.ID() + ":" + owner, ClientID: c.ID(), OwnerID: owner, Count: 2}
		if info.Holders[0] != want {
			t.Fatalf("holder %+v, want %+v", info.Holders[0], want)
		}
		if info.TTLMillis <= 0 || info.TTLMillis > lock.DefaultWatchdogTimeout.Milliseconds() {
			t.Fatalf("ttl_ms %d", info.TTLMillis)
		}
		if info.Channel != reentrant.ChannelName(name) || info.TokenKey != reentrant.TokenName(name) {
			t.Fatalf("channel %q, token key %q", info.Channel, info.TokenKey)
		}
		if info.FenceToken == nil || uint64(*info.FenceToken) != h2.Fence() {
			t.Fatalf("fence token %v, want %d", info.FenceToken, h2.Fence())
		}
		if info.Subscribers != 0 || info.ShardSubscribers == nil || *info.ShardSubscribers != 0 {
			t.Fatalf("subscribers %d, shard %v", info.Subscribers, info.ShardSubscribers)
		}
	})

	t.Run("text", func(t *testing.T) {
		r := runRlock(t, "inspect", "--addr", srv.Addr(), name)
		if r.code != 0 {
			t.Fatalf("exit %d; stderr: %s", r.code, r.stderr)
		}
		for _, want := range []string{
			"locked", "Redisson RLock", "client " + c.ID(), "owner " + owner, "hold count 2",
			reentrant.ChannelName(name), "fence token:", strconv.FormatUint(h2.Fence(), 10),
		} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("output lacks %q:\n%s", want, r.stdout)
			}
		}
	})

	t.Run("waiter", func(t *testing.T) {
		other := newClient(t, srv.Addr(), lock.Config{})
		wctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = other.Mutex(name).TryLock(wctx, lock.Wait(time.Minute)) // ends with cancel
		}()
		defer func() { cancel(); wg.Wait() }()
		// Polls inspect itself: the waiter's subscription is what it shows.
		waitFor(t, "inspect to show one subscriber", func() bool {
			return inspectJSON(t, srv.Addr(), name).Subscribers == 1
		})
	})
}

func TestInspectHandWritten(t *testing.T) {
	srv := newServer(t, integration.Options{})
	c := newClient(t, srv.Addr(), lock.Config{})
	rc := c.Redis()
	ctx := context.Background()
	do := func(cmd ...string) {
		t.Helper()
		if err := rc.Do(ctx, rc.B().Arbitrary(cmd[0]).Args(cmd[1:]...).Build()).Error(); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
	}

	t.Run("Redisson layout", func(t *testing.T) {
		// What a Java service's redisson.getFencedLock(name).lock() leaves:
		// thread 87 of client 1b4e28ba-..., held three times, token 41.
		name := lockName(t)
		const uuid = "1b4e28ba-2fa1-41d2-883f-0016d3cca427"
		do("HSET", name, uuid+":87", "3")
		do("PEXPIRE", name, "20000")
		do("SET", reentrant.TokenName(name), "41")
		info := inspectJSON(t, srv.Addr(), name)
		want := holder{Field: uuid + ":87", ClientID: uuid, OwnerID: "87", Count: 3}
		if !info.Locked || !info.Redisson || len(info.Holders) != 1 || info.Holders[0] != want {
			t.Fatalf("locked %v, redisson %v, holders %+v; want %+v", info.Locked, info.Redisson, info.Holders, want)
		}
		if info.FenceToken == nil || *info.FenceToken != 41 || info.TTLMillis <= 0 {
			t.Fatalf("fence token %v, ttl %d", info.FenceToken, info.TTLMillis)
		}
	})

	t.Run("other hash", func(t *testing.T) {
		// Not a lock (TestNotALock has more): no holders, exit 65.
		name := lockName(t)
		do("HSET", name, "color", "blue")
		r := runRlock(t, "inspect", "--addr", srv.Addr(), "--json", name)
		var info lockInfo
		if err := json.Unmarshal([]byte(r.stdout), &info); err != nil {
			t.Fatalf("%v in %s", err, r.stdout)
		}
		if r.code != exitDataErr || info.Locked || info.NotLock == "" || len(info.Holders) != 0 {
			t.Fatalf("exit %d: %+v", r.code, info)
		}
		if info.TTLMillis != -1 || info.FenceToken != nil {
			t.Fatalf("ttl %d, token %v", info.TTLMillis, info.FenceToken)
		}
	})

	t.Run("not a hash", func(t *testing.T) {
		name := lockName(t)
		do("SET", name, "x")
		r := runRlock(t, "inspect", "--addr", srv.Addr(), name)
		if r.code != exitDataErr || !strings.Contains(r.stdout, "not a lock: the key is a string") {
			t.Fatalf("exit %d, want %d; stdout %s", r.code, exitDataErr, r.stdout)
		}
	})
}

func TestInspectNotLocked(t *testing.T) {
	srv := newServer(t, integration.Options{})
	name := lockName(t)
	r := runRlock(t, "inspect", name, "--addr", srv.Addr()) // flags after the name too
	if r.code != 0 || !strings.Contains(r.stdout, "not locked") {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	info := inspectJSON(t, srv.Addr(), name)
	if info.Locked || info.Type != "none" || info.TTLMillis != -2 || len(info.Holders) != 0 {
		t.Fatalf("%+v", info)
	}
}

func TestInspectErrors(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	srv := newServer(t, integration.Options{Password: "s3cret"})

	for _, tc := range []struct {
		name string
		args []string
		want int
	}{
		{"no name", []string{"--addr", closed}, exitUsage},
		{"two names", []string{"--addr", closed, "a", "b"}, exitUsage},
		{"unknown flag", []string{"--addr", closed, "--bogus", "a"}, exitUsage},
		{"unreachable", []string{"--addr", closed, "a"}, exitUnavailable},
		{"wrong password", []string{"--addr", srv.Addr(), "--password", "wrong", "a"}, exitAuth},
		{"no password", []string{"--addr", srv.Addr(), "a"}, exitAuth},
		{"right password", []string{"--addr", srv.Addr(), "--password", "s3cret", "a"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runRlock(t, append([]string{"inspect"}, tc.args...)...)
			if r.code != tc.want {
				t.Fatalf("exit %d, want %d; stderr: %s", r.code, tc.want, r.stderr)
			}
			if tc.want != 0 && !strings.HasPrefix(r.stderr, "rlock: ") {
				t.Fatalf("stderr %q", r.stderr)
			}
		})
	}
}

func TestInspectWarnings(t *testing.T) {
	srv := newServer(t, integration.Options{})
	c := newClient(t, srv.Addr(), lock.Config{})
	rc := c.Redis()
	ctx := context.Background()
	do := func(cmd ...string) {
		t.Helper()
		if err := rc.Do(ctx, rc.B().Arbitrary(cmd[0]).Args(cmd[1:]...).Build()).Error(); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
	}
	const uuid = "1b4e28ba-2fa1-41d2-883f-0016d3cca427"
	for _, tc := range []struct {
		name     string
		setup    func(name string)
		redisson bool
		warning  string // in the only warning; "" for none
	}{
		{"healthy", func(n string) { do("HSET", n, uuid+":1", "1"); do("PEXPIRE", n, "30000") }, true, ""},
		{"no TTL", func(n string) { do("HSET", n, uuid+":1", "1") }, true, "no TTL"},
		{"two holders", func(n string) {
			do("HSET", n, uuid+":1", "1", uuid+":2", "1")
			do("PEXPIRE", n, "30000")
		}, true, "2 holders"},
		{"read-write lock", func(n string) {
			do("HSET", n, "mode", "read", uuid+":1", "1", uuid+":2", "3")
			do("PEXPIRE", n, "30000")
		}, true, ""},
		{"two writers", func(n string) {
			do("HSET", n, "mode", "write", uuid+":1:write", "1", uuid+":2:write", "1")
			do("PEXPIRE", n, "30000")
		}, true, "2 writers"},
		{"custom client id", func(n string) { do("HSET", n, "go-orders-host1:7", "2"); do("PEXPIRE", n, "30000") }, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := lockName(t)
			tc.setup(name)
			info := inspectJSON(t, srv.Addr(), name)
			if !info.Locked || info.Redisson != tc.redisson {
				t.Fatalf("locked %v, redisson %v, want true, %v", info.Locked, info.Redisson, tc.redisson)
			}
			switch {
			case tc.warning == "" && len(info.Warnings) != 0:
				t.Fatalf("warnings %q, want none", info.Warnings)
			case tc.warning != "" && (len(info.Warnings) != 1 || !strings.Contains(info.Warnings[0], tc.warning)):
				t.Fatalf("warnings %q, want one with %q", info.Warnings, tc.warning)
			}
			r := runRlock(t, "inspect", "--addr", srv.Addr(), name)
			if r.code != 0 || (tc.warning != "" && !strings.Contains(r.stdout, "warning:")) {
				t.Fatalf("exit %d; stdout %s", r.code, r.stdout)
			}
		})
	}
	t.Run("custom client id split", func(t *testing.T) {
		other := newClient(t, srv.Addr(), lock.Config{ClientID: "go-orders-host1"})
		name := lockName(t)
		h, err := other.Mutex(name).TryLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Unlock(ctx)
		info := inspectJSON(t, srv.Addr(), name)
		owner := strconv.FormatUint(h.Owner(), 10)
		want := holder{Field: "go-orders-host1:" + owner, ClientID: "go-orders-host1", OwnerID: owner, Count: 1}
		if !info.Redisson || len(info.Holders) != 1 || info.Holders[0] != want || len(info.Warnings) != 0 {
			t.Fatalf("%+v, want Redisson's layout with %+v", info, want)
		}
	})
}

// TestInspectShowsHost: the holder rlock run leaves names its host and
// pid, in a field Redisson's layout accepts.
func TestInspectShowsHost(t *testing.T) {
	srv := newServer(t, integration.Options{})
	name := lockName(t)
	s := startRlock(t, "run", "--addr", srv.Addr(), "--name", name, "--", "sh", "-c", trapTERM)
	s.expectLine("started")
	info := inspectJSON(t, srv.Addr(), name)
	host, _ := os.Hostname()
	if !info.Redisson || len(info.Holders) != 1 {
		t.Fatalf("%+v", info)
	}
	h := info.Holders[0]
	if h.PID != s.cmd.Process.Pid || h.Host != sanitizeHost(host) || !strings.HasPrefix(h.Field, h.Host+"-"+strconv.Itoa(h.PID)+"-") {
		t.Fatalf("holder %+v, want host %q pid %d", h, host, s.cmd.Process.Pid)
	}
	r := runRlock(t, "inspect", "--addr", srv.Addr(), name)
	if want := fmt.Sprintf("rlock on host %s, pid %d", h.Host, h.PID); !strings.Contains(r.stdout, want) {
		t.Fatalf("stdout lacks %q:\n%s", want, r.stdout)
	}
	s.signal(syscall.SIGTERM)
	s.expectLine("got TERM")
	s.wait()
}

// A fair lock's queue is shown in order with each waiter's remaining
// timeout; a timed-out head of a free lock is warned about.
func TestInspectFairQueue(t *testing.T) {
	srv := newServer(t, integration.Options{})
	c := newClient(t, srv.Addr(), lock.Config{})
	name := lockName(t)
	ctx := context.Background()
	m := c.FairMutex(name)
	h, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rc := c.Redis()
	queued := func() int64 {
		n, err := rc.Do(ctx, rc.B().Llen().Key("redisson_lock_queue:{"+name+"}").Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	wctx, cancel := context.WithCancel(ctx)
	var owners []string
	done := make(chan error, 2)
	for i := range 2 {
		octx := lock.WithOwner(wctx)
		o, _ := lock.OwnerFrom(octx)
		owners = append(owners, strconv.FormatUint(o, 10))
		go func() {
			_, err := m.Lock(octx)
			done <- err
		}()
		waitFor(t, "a waiter to queue", func() bool { return queued() == int64(i+1) })
	}
	info := inspectJSON(t, srv.Addr(), name)
	if info.QueueKey != "redisson_lock_queue:{"+name+"}" || len(info.FairQueue) != 2 {
		t.Fatalf("queue %q: %+v", info.QueueKey, info.FairQueue)
	}
	for i, w := range info.FairQueue {
		if w.OwnerID != owners[i] || w.ClientID != c.ID() {
			t.Fatalf("waiter %d is %s:%s, want %s:%s", i, w.ClientID, w.OwnerID, c.ID(), owners[i])
		}
		// 5 minutes beyond the one ahead (the first: beyond the 30 s lease).
		lo, hi := int64(i)*300000+300000, int64(i)*300000+330000
		if w.TimeoutMillis == nil || *w.TimeoutMillis <= lo-5000 || *w.TimeoutMillis > hi {
			t.Fatalf("waiter %d timeout %v ms, want in (%d, %d]", i, w.TimeoutMillis, lo-5000, hi)
		}
	}
	r := runRlock(t, "inspect", "--addr", srv.Addr(), name)
	if !strings.Contains(r.stdout, "2 waiting, in order") || !strings.Contains(r.stdout, "owner "+owners[1]) {
		t.Fatalf("text output lacks the queue:\n%s", r.stdout)
	}
	cancel()
	for range 2 {
		if err := <-done; err == nil {
			t.Fatal("a cancelled waiter got the lock")
		}
	}
	if err := h.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	// A hand-written stale head of a free lock.
	for _, cmd := range []rueidis.Completed{
		rc.B().Rpush().Key("redisson_lock_queue:{" + name + "}").Element("gone:1").Build(),
		rc.B().Zadd().Key("redisson_lock_timeout:{"+name+"}").ScoreMember().ScoreMember(float64(time.Now().Add(-time.Minute).UnixMilli()), "gone:1").Build(),
	} {
		if err := rc.Do(ctx, cmd).Error(); err != nil {
			t.Fatal(err)
		}
	}
	info = inspectJSON(t, srv.Addr(), name)
	if len(info.Warnings) != 1 || !strings.Contains(info.Warnings[0], "timed out") {
		t.Fatalf("warnings %q, want the stale head's", info.Warnings)

	}
}

// TestInspectReadWriteLock: inspect recognises Redisson's read-write lock:
// its mode, readers with their counts, the writer, and its channel.
func TestInspectReadWriteLock(t *testing.T) {
	srv := newServer(t, integration.Options{})
	c := newClient(t, srv.Addr(), lock.Config{})
	name := lockName(t)
	rw := c.ReadWriteMutex(name)
	ctx := context.Background()
	w, err := rw.WriteLock().TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r1, err := rw.ReadLock().TryLock(w.Context()) // the writer reads too
	if err != nil {
		t.Fatal(err)
	}
	r2, err := rw.ReadLock().TryLock(w.Context())
	if err != nil {
		t.Fatal(err)
	}
	owner := strconv.FormatUint(w.Owner(), 10)
	info := inspectJSON(t, srv.Addr(), name)
	if !info.Locked || !info.Redisson || info.Mode != "write" || len(info.Warnings) != 0 {
		t.Fatalf("locked %v, redisson %v, mode %q, warnings %v", info.Locked, info.Redisson, info.Mode, info.Warnings)
	}
	want := []holder{
		{Field: c.ID() + ":" + owner, ClientID: c.ID(), OwnerID: owner, Count: 2, Kind: "read"},
		{Field: c.ID() + ":" + owner + ":write", ClientID: c.ID(), OwnerID: owner, Count: 1, Kind: "write"},
	}
	if len(info.Holders) != 2 || info.Holders[0] != want[0] || info.Holders[1] != want[1] {
		t.Fatalf("holders %+v, want %+v", info.Holders, want)
	}
	if info.Channel != reentrant.RWChannelName(name) {
		t.Fatalf("channel %q", info.Channel)
	}
	r := runRlock(t, "inspect", "--addr", srv.Addr(), name)
	for _, s := range []string{"RReadWriteLock, mode write", "reader:", "writer:", "hold count 2", "redisson_rwlock:{" + name + "}"} {
		if !strings.Contains(r.stdout, s) {
			t.Fatalf("text lacks %q:\n%s", s, r.stdout)
		}
	}
	for _, h := range []*lock.Held{r2, w} {
		if err := h.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if info := inspectJSON(t, srv.Addr(), name); info.Mode != "read" || len(info.Holders) != 1 || info.Holders[0].Count != 1 {
		t.Fatalf("after the write release: mode %q, holders %+v", info.Mode, info.Holders)
	}
	if err := r1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
