package multilock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/multilock"
)

// Issue 28: a MultiLock over several names of one Client, as Redisson's
// getMultiLock(a, b, c) on one RedissonClient.

// namesOn returns n lock names unique to the test.
func namesOn(t *testing.T, n int) []string {
	base := name(t)
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s:%c", base, 'a'+i)
	}
	return out
}

// keysLeft returns which of names exist, asking every node of rs (a
// cluster's nodes answer MOVED for the slots they do not own).
func keysLeft(t *testing.T, rs []rueidis.Client, names []string) []string {
	t.Helper()
	var left []string
	for _, n := range names {
		for _, rc := range rs {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			v, err := rc.Do(ctx, rc.B().Exists().Key(n).Build()).AsInt64()
			cancel()
			if err == nil && v == 1 {
				left = append(left, n)
			}
		}
	}
	return left
}

// holdsAllThree checks a MultiLock over three names of one Client: it
// holds all three, excludes another owner (another Client) from each,
// and leaves nothing after Unlock.
func holdsAllThree(t *testing.T, c, other *lock.Client, rs []rueidis.Client, names []string) {
	t.Helper()
	var ms []*lock.Mutex
	for _, n := range names {
		ms = append(ms, c.Mutex(n))
	}
	l := multilock.NewMultiLock(ms...)
	h, err := l.Lock(bg(t))
	if err != nil {
		t.Fatalf("MultiLock over %d names of one Client: %v", len(names), err)
	}
	if got := h.Masters(); got != len(names) {
		t.Errorf("Masters() = %d, want %d (one per name)", got, len(names))
	}
	if left := keysLeft(t, rs, names); len(left) != len(names) {
		t.Errorf("keys in Redis while held: %v, want all of %v", left, names)
	}
	for _, n := range names {
		oh, err := other.Mutex(n).TryLock(bg(t))
		if err == nil {
			oh.Unlock(bg(t))
			t.Errorf("another Client was granted %q while the MultiLock holds it", n)
		} else if !errors.Is(err, lock.ErrNotAcquired) {
			t.Errorf("another Client's TryLock(%q): %v, want ErrNotAcquired", n, err)
		}
	}
	// Re-entry with the Held's context, on every name.
	inner, err := l.TryLock(h.Context())
	if err != nil {
		t.Fatalf("re-entry: %v", err)
	}
	if err := inner.Unlock(bg(t)); err != nil {
		t.Fatalf("Unlock of the re-entry: %v", err)
	}
	if err := h.Unlock(bg(t)); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	multilock.WaitBackground(l)
	if left := keysLeft(t, rs, names); len(left) != 0 {
		t.Errorf("keys left after Unlock: %v", left)
	}
}

func TestMultiLockNamesOfOneClient(t *testing.T) {
	cs := clients(t, shared[:1], lock.Config{})
	others := clients(t, shared[:1], lock.Config{})
	holdsAllThree(t, cs[0], others[0], raws(t, shared[:1]), namesOn(t, 3))
}

func TestMultiLockNamesOfOneClusterClient(t *testing.T) {
	cl := integration.RedisCluster(t, 3, integration.Options{})
	cfg := lock.Config{Cluster: true, Addrs: cl.Addrs()}
	c, err := lock.New(bg(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	other, err := lock.New(bg(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close(context.Background()) })
	rs := raws(t, cl.Nodes())
	// One name on each master.
	names := make([]string, 0, 3)
	owners := map[int]bool{}
	base := name(t)
	for i := 0; len(names) < 3 && i < 1000; i++ {
		n := fmt.Sprintf("%s:%d", base, i)
		o := ownerOf(t, rs, n)
		if !owners[o] {
			owners[o] = true
			names = append(names, n)
		}
	}
	if len(names) != 3 {
		t.Fatalf("found names on %d masters, want 3", len(names))
	}
	holdsAllThree(t, c, other, rs, names)
}

// ownerOf returns the index of the node of rs that owns key's slot.
func ownerOf(t *testing.T, rs []rueidis.Client, key string) int {
	t.Helper()
	for i, rc := range rs {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := rc.Do(ctx, rc.B().Exists().Key(key).Build()).Error()
		cancel()
		if err == nil {
			return i
		}
	}
	t.Fatalf("no node owns %q", key)
	return -1
}

// Names of one Client mixed with a Mutex of another Client (another
// master): all or nothing.
func TestMultiLockNamesMixedWithAnotherClient(t *testing.T) {
	cs := clients(t, shared[:2], lock.Config{})
	names := namesOn(t, 3)
	l := multilock.NewMultiLock(cs[0].Mutex(names[0]), cs[0].Mutex(names[1]), cs[1].Mutex(names[2]))
	// Another owner holds the third name: the MultiLock gets none.
	others := clients(t, shared[1:2], lock.Config{})
	oh, err := others[0].Mutex(names[2]).Lock(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	if h, err := l.TryLock(bg(t)); err == nil {
		h.Unlock(bg(t))
		t.Fatal("MultiLock granted while another owner holds one of its names")
	}
	multilock.WaitBackground(l)
	rs := raws(t, shared[:2])
	if left := keysLeft(t, rs[:1], names[:2]); len(left) != 0 {
		t.Errorf("a refused MultiLock left %v", left)
	}
	if err := oh.Unlock(bg(t)); err != nil {
		t.Fatal(err)
	}
	h, err := l.TryLock(bg(t), lock.Wait(5*time.Second))
	if err != nil {
		t.Fatalf("MultiLock after the other owner let go: %v", err)
	}
	if got := h.Masters(); got != 3 {
		t.Errorf("Masters() = %d, want 3", got)
	}
	if err := h.Unlock(bg(t)); err != nil {
		t.Fatal(err)
	}
}

// Six goroutines, two MultiLocks over overlapping names given in opposite
// orders: 10 acquisitions each within 30 s, no two at once on a name.
func TestMultiLocksOverlappingNamesOppositeOrders(t *testing.T) {
	for _, two := range []bool{false, true} {
		t.Run(map[bool]string{false: "OneClient", true: "TwoClients"}[two], func(t *testing.T) {
			cs := clients(t, shared[:1], lock.Config{})
			c1, c2 := cs[0], cs[0]
			if two {
				c2 = clients(t, shared[:1], lock.Config{})[0]
			}
			n := namesOn(t, 4)
			l1 := multilock.NewMultiLock(c1.Mutex(n[0]), c1.Mutex(n[1]), c1.Mutex(n[2]))
			l2 := multilock.NewMultiLock(c2.Mutex(n[3]), c2.Mutex(n[2]), c2.Mutex(n[1]))
			var in [4]atomic.Int32
			var overlaps atomic.Int32
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var wg sync.WaitGroup
			errs := make(chan error, 6)
			for g := range 6 {
				l, idx := l1, []int{0, 1, 2}
				if g%2 == 1 {
					l, idx = l2, []int{3, 2, 1}
				}
				wg.Go(func() {
					for k := range 10 {
						h, err := l.Lock(ctx)
						if err != nil {
							errs <- fmt.Errorf("goroutine %d, acquisition %d: %w", g, k, err)
							return
						}
						for _, i := range idx {
							if in[i].Add(1) != 1 {
								overlaps.Add(1)
							}
						}
						time.Sleep(time.Millisecond) // work under the lock
						for _, i := range idx {
							in[i].Add(-1)
						}
						if err := h.Unlock(context.Background()); err != nil {
							errs <- fmt.Errorf("goroutine %d: Unlock: %w", g, err)
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			if len(errs) > 0 {
				rc := raws(t, shared[:1])[0]
				for _, k := range n {
					v, _ := rc.Do(context.Background(), rc.B().Hgetall().Key(k).Build()).AsStrMap()
					p, _ := rc.Do(context.Background(), rc.B().Pttl().Key(k).Build()).AsInt64()
					t.Logf("after the failure, key %s holds %v, PTTL %d ms", k, v, p)
				}
			}
			for err := range errs {
				t.Error(err)
			}
			if o := overlaps.Load(); o != 0 {
				t.Errorf("%d overlaps on a name", o)
			}
			multilock.WaitBackground(l1)
			multilock.WaitBackground(l2)
			if left := keysLeft(t, raws(t, shared[:1]), n); len(left) != 0 {
				t.Errorf("keys left: %v", left)
			}
		})
	}
}

// A name given twice, and a RedLock on one master, are refused with a
// clear error on every method; nothing is sent.
func TestMultiLockNameTwiceAndRedLockOnOneMaster(t *testing.T) {
	cs := clients(t, shared[:1], lock.Config{})
	again := clients(t, shared[:1], lock.Config{}) // another Client on the same master
	n := namesOn(t, 2)
	for what, tc := range map[string]struct {
		l    *multilock.Lock
		want string
	}{
		"same Client, same name":           {multilock.NewMultiLock(cs[0].Mutex(n[0]), cs[0].Mutex(n[1]), cs[0].Mutex(n[0])), "given twice"},
		"two Clients on one master":        {multilock.NewMultiLock(cs[0].Mutex(n[0]), again[0].Mutex(n[0])), "given twice"},
		"a read and a write half":          {multilock.NewMultiLock(cs[0].ReadWriteMutex(n[0]).ReadLock(), cs[0].ReadWriteMutex(n[0]).WriteLock()), "given twice"},
		"RedLock on one Client":            {multilock.NewRedLock(cs[0].Mutex(n[0]), cs[0].Mutex(n[1]), cs[0].Mutex(n[0]+"x")), "independent masters"},
		"RedLock, two Clients, one master": {multilock.NewRedLock(cs[0].Mutex(n[0]), again[0].Mutex(n[0]), cs[0].Mutex(n[1])), "independent masters"},
	} {
		_, err := tc.l.TryLock(bg(t))
		if !errors.Is(err, lock.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: TryLock = %v, want ErrInvalid saying %q", what, err, tc.want)
		}
	}
	if left := keysLeft(t, raws(t, shared[:1]), []string{n[0], n[1], n[0] + "x"}); len(left) != 0 {
		t.Errorf("refused locks left %v", left)
	}
}

// With Fenced, each name has its own token, the one its own counter gives
// (as Redisson's fenced lock of that name), increasing across
// acquisitions of that name by anyone.
func TestMultiLockFenceTokenPerName(t *testing.T) {
	cs := clients(t, shared[:1], lock.Config{})
	n := namesOn(t, 2)
	l := multilock.NewMultiLock(cs[0].Mutex(n[0]), cs[0].Mutex(n[1]))
	// The second name's counter is ahead of the first's.
	for range 3 {
		h, err := cs[0].Mutex(n[1]).Lock(bg(t), lock.Fenced())
		if err != nil {
			t.Fatal(err)
		}
		h.Unlock(bg(t))
	}
	last := map[string]uint64{}
	for k := range 3 {
		h, err := l.Lock(bg(t), lock.Fenced())
		if err != nil {
			t.Fatal(err)
		}
		for _, nm := range n {
			f := h.FenceOf(nm)
			if f <= last[nm] {
				t.Errorf("round %d: FenceOf(%q) = %d after %d", k, nm, f, last[nm])
			}
			last[nm] = f
		}
		if h.FenceOf("not a member") != 0 {
			t.Errorf("FenceOf a name not in the lock = %d, want 0", h.FenceOf("not a member"))
		}
		if err := h.Unlock(bg(t)); err != nil {
			t.Fatal(err)
		}
		// A plain fenced lock of each name, by another owner, after it.
		for _, nm := range n {
			ph, err := cs[0].Mutex(nm).Lock(bg(t), lock.Fenced())
			if err != nil {
				t.Fatal(err)
			}
			if ph.Fence() <= last[nm] {
				t.Errorf("a later fenced Lock of %q got %d, not above the MultiLock's %d", nm, ph.Fence(), last[nm])
			}
			last[nm] = ph.Fence()
			ph.Unlock(bg(t))
		}
	}
	// The counters were each name's own: the first name's did not jump to
	// the second's.
	if last[n[0]] >= last[n[1]] {
		t.Errorf("first name's token %d caught up with the second's %d: counters were mixed", last[n[0]], last[n[1]])
	}
}

// The watchdog renews every name: a MultiLock held for three leases keeps
// every key and a live context. The lease is 1.5 s, renewed every 200 ms:
// a 600 ms lease renewed every 200 ms was lost in stop 41's CI, on a
// machine that froze the process for longer than 400 ms.
func TestMultiLockNamesRenewed(t *testing.T) {
	const lease = 1500 * time.Millisecond
	cs := clients(t, shared[:1], lock.Config{WatchdogTimeout: lease, RenewInterval: 200 * time.Millisecond})
	names := namesOn(t, 3)
	l := multilock.NewMultiLock(cs[0].Mutex(names[0]), cs[0].Mutex(names[1]), cs[0].Mutex(names[2]))
	h, err := l.Lock(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Unlock(bg(t))
	select {
	case <-h.Done():
		t.Fatalf("lost within three leases: %v", context.Cause(h.Context()))
	case <-time.After(3 * lease):
	}
	if left := keysLeft(t, raws(t, shared[:1]), names); len(left) != 3 {
		t.Errorf("after three leases, keys %v, want all of %v", left, names)
	}
}
