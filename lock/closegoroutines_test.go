package lock_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/reentrant"
)

// Issue 29, stage 3: no goroutine outlives Close by more than
// 2 × CommandTimeout. A renewal round trip in flight when Close comes, to
// a master that does not answer, was waited for up to its tick's timeout
// (up to one RenewInterval) plus watchdog.Config.Straggle
// (2 × CommandTimeout) after its send: rueidis sees no cancellation of a
// request alone on its connection, only its deadline, and Close's
// teardown waits for the watchdog loop, which waits for the round trip
// (measured before the fix: 904 ms after Close returned with New, whose
// dedicated connection rueidis cuts at ConnWriteTimeout, 1 s; 1.09 s with
// FromClient). The renewal is held by the fault proxy (the master
// answers everything else); Close is called, with a ctx of one
// CommandTimeout, as soon as the renewal reaches the proxy; the test
// measures how long after Close returned the last goroutine with a frame
// of rlock's packages ends (polled: nothing signals a goroutine's end).
func TestBoundGoroutinesEndWithinTwoCommandTimeoutsOfClose(t *testing.T) {
	const ct = 100 * time.Millisecond
	cfg := lock.Config{WatchdogTimeout: 3 * time.Second, RenewInterval: time.Second, CommandTimeout: ct}
	for _, how := range []string{"New", "FromClient"} {
		t.Run(how, func(t *testing.T) {
			// A void measurement (checkGoroutinesAfterClose) is made
			// again, up to three times in all.
			integration.Tries(t, 3, func(int) bool { return closeWithARenewalHeld(t, how, cfg, ct) })
		})
	}
}

// closeWithARenewalHeld is one measurement of
// TestBoundGoroutinesEndWithinTwoCommandTimeoutsOfClose on a Client made
// by how; it reports whether it was void.
func closeWithARenewalHeld(t *testing.T, how string, cfg lock.Config, ct time.Duration) (blind bool) {
	t.Helper()
	srv := integrationRedis(t)
	n := name(t)
	before := goroutineIDs()
	var c *lock.Client
	if how == "New" {
		c = newClient(t, cfg, srv) // renewals on a dedicated connection
	} else {
		rc := integration.NewClient(t, srv.Addr()) // through the proxy
		var err error
		c, err = lock.FromClient(rc, cfg) // renewals on rc's shared connection
		must(t, err)
		t.Cleanup(func() { _ = c.Close(bg()) })
	}
	h, err := c.Mutex(n).Lock(bg())
	must(t, err)
	// The lock's next renewal reaches the proxy, which holds it
	// far longer than the test measures.
	onWire := make(chan struct{})
	var at time.Time
	var once sync.Once
	inject(t, srv, integration.Rule{Match: integration.MatchFunc(func(cmd []string) bool {
		if len(cmd) > 3 && strings.EqualFold(cmd[0], "EVALSHA") && cmd[1] == reentrant.RenewScript.SHA1() && slices.Contains(cmd, n) {
			once.Do(func() { close(onWire) })
			return true
		}
		return false
	}), Action: integration.DelayRequest(30 * time.Second)})
	select {
	case <-onWire:
		at = time.Now()
	case <-h.Done():
		t.Fatalf("the hold ended before its renewal was held: %v", context.Cause(h.Context()))
	case <-time.After(10 * time.Second):
		t.Fatal("no renewal reached the proxy within 10 s")
	}
	ctx, cancel := context.WithTimeout(bg(), ct)
	defer cancel()
	err = c.Close(ctx)
	closed := time.Now()
	t.Logf("Close returned %v after the renewal reached the proxy: %v", closed.Sub(at).Round(time.Millisecond), err)
	return checkGoroutinesAfterClose(t, before, closed, ct)
}

// goroutineIDs returns the ids of the goroutines running now.
func goroutineIDs() map[string]bool {
	ids := map[string]bool{}
	for _, g := range stacks() {
		id, _, _ := strings.Cut(strings.TrimPrefix(g, "goroutine "), " ")
		ids[id] = true
	}
	return ids
}

// stacks returns the stack of every goroutine, one entry each.
func stacks() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Split(string(buf[:n]), "\n\n")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// libGoroutines returns the stacks of the goroutines not in before that
// run a function of rlock's packages (its tests and package integration
// aside): rlock's own goroutines, and rueidis's called by them.
func libGoroutines(before map[string]bool) []string {
	var out []string
	for _, g := range stacks() {
		id, _, _ := strings.Cut(strings.TrimPrefix(g, "goroutine "), " ")
		if before[id] {
			continue
		}
		own, _, _ := strings.Cut(g, "\ncreated by ")
		for _, l := range strings.Split(own, "\n") {
			if isLibFrame(l) {
				out = append(out, g)
				break
			}
		}
	}
	return out
}

// awaitLibGoroutines polls (no signal says a goroutine ended) until no
// goroutine of libGoroutines is left, and returns how long after since
// that was, the rlock frames of those still running at since+bound, and
// the stacks of those still running at since+limit.
func awaitLibGoroutines(before map[string]bool, since time.Time, bound, limit time.Duration) (last time.Duration, atBound, left []string) {
	for {
		gs := libGoroutines(before)
		now := time.Now()
		if len(gs) == 0 {
			if atBound == nil && now.Sub(since) > bound {
				// Not looked at since before bound: what ran then is not
				// known (blind, below).
				atBound = []string{}
			}
			return now.Sub(since), atBound, nil
		}
		if atBound == nil && now.Sub(since) > bound {
			for _, g := range gs {
				atBound = append(atBound, rlockFrames(g))
			}
		}
		if now.Sub(since) > limit {
			return now.Sub(since), atBound, gs
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// rlockFrames is the head of a goroutine's stack, its innermost function
// and its functions of rlock's packages, innermost first.
func rlockFrames(g string) string {
	own, _, _ := strings.Cut(g, "\ncreated by ")
	lines := strings.Split(own, "\n")
	out := []string{lines[0]}
	for i, l := range lines {
		if i == 1 || i > 1 && isLibFrame(l) {
			out = append(out, "  "+l)
		}
	}
	return strings.Join(out, "\n")
}

// isLibFrame reports whether a stack line is a function of rlock's
// packages (its tests and package integration aside).
func isLibFrame(l string) bool {
	return strings.HasPrefix(l, "github.com/rlock-go/rlock/") && !strings.HasPrefix(l, "github.com/rlock-go/rlock/integration") && !strings.HasPrefix(l, "github.com/rlock-go/rlock/lock_test")
}

// The same bound with the master stopped (SIGSTOP) when Close comes, on a
// Client of New, whose connections Close's teardown closes: rueidis sends
// a PING on closing a connection and waits up to a second for its answer,
// which a stopped master never gives (measured before the fix: the last
// goroutine of rlock ended 870-903 ms after Close returned, with a
// CommandTimeout of 100 ms).
func TestBoundGoroutinesEndWithinTwoCommandTimeoutsOfCloseTheMasterStopped(t *testing.T) {
	const ct = 100 * time.Millisecond
	cfg := lock.Config{WatchdogTimeout: 3 * time.Second, RenewInterval: time.Second, CommandTimeout: ct}
	srv := integrationRedis(t)
	n := name(t)
	before := goroutineIDs()
	c := newClient(t, cfg, srv)
	h, err := c.Mutex(n).Lock(bg())
	must(t, err)
	resume := pause(t, srv)
	ctx, cancel := context.WithTimeout(bg(), ct)
	defer cancel()
	err = c.Close(ctx)
	closed := time.Now()
	t.Logf("Close returned: %v", err)
	if h.Context().Err() == nil {
		t.Error("the Held's context was not done when Close returned")
	}
	notBlind(t, checkGoroutinesAfterClose(t, before, closed, ct))
	resume()
}

// The same with the Client's pub/sub connection open (a waiter subscribed
// once): the Hub closes that connection in teardown, with rueidis's PING,
// and kept Close's last goroutine a second past it (review of 7e826ca,
// whose cut came after the Hub's close: 1.004 s).
func TestBoundGoroutinesEndWithinTwoCommandTimeoutsOfCloseWithTheHubConnected(t *testing.T) {
	const ct = 100 * time.Millisecond
	cfg := lock.Config{WatchdogTimeout: 3 * time.Second, RenewInterval: time.Second, CommandTimeout: ct}
	srv := integrationRedis(t)
	n := name(t)
	other := newClient(t, cfg, srv)
	before := goroutineIDs()
	c := newClient(t, cfg, srv)
	g, err := other.Mutex(n).Lock(bg())
	must(t, err)
	woke := goCall(func() error {
		h, err := c.Mutex(n).TryLock(bg(), lock.Wait(5*time.Second)) // subscribes: the Hub connects
		if err == nil {
			return h.Unlock(bg())
		}
		return err
	})
	// The waiter subscribes before it first tries (or just after): give
	// it the lock only once the subscription is there.
	awaitSubscribers(t, srv, n, 1)
	must(t, g.Unlock(bg()))
	r := awaitCall(t, "the waiter", woke, time.Now().Add(5*time.Second), func() {})
	must(t, r.err)
	resume := pause(t, srv)
	ctx, cancel := context.WithTimeout(bg(), ct)
	defer cancel()
	err = c.Close(ctx)
	closed := time.Now()
	t.Logf("Close returned: %v", err)
	notBlind(t, checkGoroutinesAfterClose(t, before, closed, ct))
	resume()
}

// Close on a master that answers closes the connections gracefully: a
// request an application sends on Client.Redis() while Close runs is
// answered, or refused unsent (rueidis.ErrClosing), never run by Redis
// without its answer (review of 7e826ca, whose write failure on every
// close made 9 INCRs fail with "use of closed network connection" and
// 71 run unanswered over 10 rounds).
//
// With slow, a Close whose own work (slowHolds releases, one after
// another) lasts past one CommandTimeout: the second review of 222e13d found the
// cut, timed from Close's start, failing them again (50 INCRs run
// unanswered, 44 errors).
func TestCloseAnswersWhatTheApplicationSent(t *testing.T) {
	for _, slow := range []bool{false, true} {
		t.Run(map[bool]string{false: "quick", true: "slow"}[slow], func(t *testing.T) { testCloseAnswers(t, slow) })
	}
}

// slowHolds is how many holds the slow case's Close releases, one after
// the other: more than it releases in one CommandTimeout (250 ms).
const slowHolds = 2000

func testCloseAnswers(t *testing.T, slow bool) {
	srv := integrationRedis(t)
	r := raw(t, srv)
	key := name(t)
	answered := 0
	other := map[string]int{}
	rounds, cfg := 10, lock.Config{}
	if slow {
		// A CommandTimeout a loaded machine's answers keep within (CI's
		// busy pass: with 20 ms, 2 of 34,892 INCRs went unanswered), and
		// more holds than Close releases in one CommandTimeout.
		rounds, cfg = 3, lock.Config{CommandTimeout: 250 * time.Millisecond, WatchdogTimeout: 3 * time.Second, RenewInterval: time.Second}
	}
	for round := 0; round < rounds; round++ {
		c := newClient(t, cfg, srv)
		warm(t, c)
		if slow {
			for i := range slowHolds {
				_, err := c.Mutex(fmt.Sprintf("%s:%d:%d", key, round, i)).Lock(bg())
				must(t, err)
			}
		}
		rc := c.Redis()
		var wg sync.WaitGroup
		var mu sync.Mutex
		started := make(chan struct{}, 16)
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					err := rc.Do(bg(), rc.B().Incr().Key(key).Build()).Error()
					if i == 0 {
						started <- struct{}{}
					}
					mu.Lock()
					if err == nil {
						answered++
					} else if !errors.Is(err, rueidis.ErrClosing) {
						other[err.Error()]++
					}
					mu.Unlock()
					if err != nil {
						return
					}
				}
			}()
		}
		for range 16 {
			<-started
		}
		began := time.Now()
		must(t, c.Close(bg()))
		if slow {
			t.Logf("round %d: Close took %v", round, time.Since(began).Round(time.Millisecond))
		}
		wg.Wait()
	}
	v, err := r.Do(bg(), r.B().Get().Key(key).Build()).AsInt64()
	must(t, err)
	t.Logf("INCRs answered %d, run by Redis %d; other errors: %v", answered, v, other)
	if len(other) > 0 || v != int64(answered) {
		t.Errorf("requests of the application sent while Close ran: %d run by Redis without their answer; errors other than ErrClosing: %v", v-int64(answered), other)
	}
}

// awaitSubscribers polls (the server signals no subscription) until the
// unlock channel of lock n has want subscribers, for 5 s at most.
func awaitSubscribers(t *testing.T, srv *integration.Server, n string, want int64) {
	t.Helper()
	r := raw(t, srv)
	ch := reentrant.ChannelName(n)
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		m, err := do(t, r, "PUBSUB", "NUMSUB", ch).ToArray()
		must(t, err)
		if got, _ := m[1].AsInt64(); got >= want {
			return
		}
	}
	t.Fatalf("the channel %s had fewer than %d subscribers for 5 s", ch, want)
}

// The same bound on a Cluster whose masters are all stopped: rueidis's
// cluster client closes its connections in the background, so the cut
// must not stop when its Close returns (the second review of 222e13d:
// 1.004 s and 1.003 s, each connection's PING waited for).
func TestBoundGoroutinesEndWithinTwoCommandTimeoutsOfCloseOnACluster(t *testing.T) {
	const ct = 100 * time.Millisecond
	env := newClusterEnv(t)
	before := goroutineIDs()
	c := env.client(t, lock.Config{WatchdogTimeout: 3 * time.Second, RenewInterval: time.Second, CommandTimeout: ct})
	for _, ns := range env.names(t, 1) {
		_, err := c.Mutex(ns[0]).Lock(bg())
		must(t, err)
	}
	for _, s := range env.cl.Nodes() {
		pause(t, s)
	}
	ctx, cancel := context.WithTimeout(bg(), ct)
	defer cancel()
	err := c.Close(ctx)
	closed := time.Now()
	t.Logf("Close returned: %v", err)
	notBlind(t, checkGoroutinesAfterClose(t, before, closed, ct))
}

// checkGoroutinesAfterClose waits (polling: nothing signals a goroutine's
// end) until no goroutine with a frame of rlock started after before is
// left, and fails the test when the last ended more than 2 × ct (plus
// boundSlack, and stalls of the process: lateness) after closed, when
// Close returned.
//
// It reports blind, and asserts nothing, when the poll that found none
// left came after bound and no poll came between bound and it: the
// goroutines may have ended at any time in between. Seen once, in the
// busy pass of this session's clean-clone CI (2026-11-30): one poll came
// 4.99 s after Close, the one before it before 200 ms, and the retest
// meter saw no stall of the machine meanwhile; what held the poller
// (runtime.Stack stops the world) is not known.
func checkGoroutinesAfterClose(t *testing.T, before map[string]bool, closed time.Time, ct time.Duration) (blind bool) {
	t.Helper()
	bound := 2 * ct
	last, atBound, left := awaitLibGoroutines(before, closed, bound, 5*time.Second)
	_, stalled := lateness(closed, closed.Add(last))
	t.Logf("the last goroutine with a frame of rlock ended %v after Close returned%s (issue 29: %v; asserted %v)", last.Round(time.Millisecond), stalledNote(stalled), bound, bound+boundSlack)
	if left != nil {
		t.Fatalf("%d goroutines with a frame of rlock still ran 5 s after Close returned:\n%s", len(left), strings.Join(left, "\n\n"))
	}
	if last-stalled <= bound+boundSlack {
		return false
	}
	if atBound != nil && len(atBound) == 0 {
		t.Logf("no poll between %v and %v after Close: the measurement is void", bound, last.Round(time.Millisecond))
		return true
	}
	t.Errorf("a goroutine of rlock outlived Close by %v, more than 2 × CommandTimeout (%v); at %v:\n%s", last.Round(time.Millisecond), bound, bound, strings.Join(atBound, "\n"))
	return false
}

// notBlind fails the test when its one measurement was void: the tests
// that cannot repeat theirs.
func notBlind(t *testing.T, blind bool) {
	t.Helper()
	if blind {
		t.Error("the goroutines after Close were not polled between the bound and the end: nothing measured")
	}
}
