package watchdog_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/reentrant"
	"github.com/rlock-go/rlock/watchdog"
)

var srv *integration.Server

func TestMain(m *testing.M) {
	integration.Main(m, 1, integration.Options{}, func(s []*integration.Server) { srv = s[0] })
}

func client(t testing.TB) rueidis.Client {
	t.Helper()
	rc := integration.NewClient(t, srv.DirectAddr())
	if err := reentrant.Load(context.Background(), rc); err != nil {
		t.Fatal(err)
	}
	return rc
}

// acquire takes n locks named prefix:i for field with lease, in one round trip.
func acquire(t testing.TB, rc rueidis.Client, prefix, field string, n int, lease time.Duration) []string {
	t.Helper()
	prefix += ":" + reentrant.NewRequestID() // unique across -count runs
	names := make([]string, n)
	cmds := make([]rueidis.Completed, n)
	for i := range names {
		names[i] = prefix + ":" + strconv.Itoa(i)
		keys := []string{names[i], reentrant.LatchName(names[i], reentrant.NewRequestID()), reentrant.TokenName(names[i])}
		cmds[i] = reentrant.AcquireCountedScript.Eval(rc, keys, []string{strconv.FormatInt(lease.Milliseconds(), 10), field, "0", "0"})
	}
	for i, res := range rc.DoMulti(context.Background(), cmds...) {
		if v, err := res.AsInt64(); err != nil || v != 0 {
			t.Fatalf("acquire %s: %v, %v (want 0: a free lock's first hold, no token)", names[i], v, err)
		}
	}
	return names
}

// waitUntil blocks until the wall clock passes at. These tests are about
// time itself (a tick that comes late), so the clock is the signal.
func waitUntil(at time.Time) { <-time.After(time.Until(at)) }

// A late tick still renews a lock whose lease is valid, and a tick after
// the local deadline still trusts Redis's answer: 1 means the hold never
// lapsed, since nobody could take the key while our field was in it.
func TestLateTickRenewsWhatIsStillHeld(t *testing.T) {
	rc := client(t)
	field := reentrant.Field(reentrant.NewClientID(), 1)
	lease := 300 * time.Millisecond
	r, err := watchdog.New(rc, watchdog.Config{Lease: lease, Interval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	lostCh := make(chan *watchdog.LossError, 2)
	onLost := func(_ *watchdog.Entry, e *watchdog.LossError) { lostCh <- e }

	// Redis holds it for 2s, the registry believes 300ms.
	sent := time.Now()
	names := acquire(t, rc, t.Name(), field, 1, 2*time.Second)
	r.Track(names[0], field, lease, true, sent, onLost)
	waitUntil(sent.Add(lease + 50*time.Millisecond)) // three intervals late, past the local deadline
	tk := r.Tick(context.Background())
	if tk.Renewed != 1 || tk.Lost != 0 || tk.RoundTrips != 1 {
		t.Fatalf("late tick %+v, want the lock renewed", tk)
	}
	select {
	case e := <-lostCh:
		t.Fatalf("reported lost: %v", e)
	default:
	}
	pttl, err := rc.Do(context.Background(), rc.B().Pttl().Key(names[0]).Build()).AsInt64()
	// A renewal never shortens an expiry: Redis's 2s stands.
	if err != nil || pttl <= lease.Milliseconds() {
		t.Fatalf("PTTL %d, %v after renewal, want the longer expiry kept (> %d)", pttl, err, lease.Milliseconds())
	}
	// Gone from Redis: lost at once, with the reason.
	rc.Do(context.Background(), rc.B().Del().Key(names[0]).Build())
	tk = r.Tick(context.Background())
	if tk.Lost != 1 || r.Len() != 0 {
		t.Fatalf("tick %+v, len %d; want the lock lost and forgotten", tk, r.Len())
	}
	if e := <-lostCh; e.Name != names[0] || e.Reason == "" {
		t.Fatalf("loss %+v", e)
	}
}

// Renewals that fail only become a loss once the lease must have run
// out; an explicit lease (no renewal) is lost when it ends.
func TestFailedRenewalsLoseOnlyAtTheDeadline(t *testing.T) {
	rc := client(t)
	field := reentrant.Field(reentrant.NewClientID(), 2)
	lease := 300 * time.Millisecond
	r, err := watchdog.New(rc, watchdog.Config{Lease: lease, Interval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	lost := 0
	sent := time.Now()
	names := acquire(t, rc, t.Name(), field, 2, lease)
	r.Track(names[0], field, lease, true, sent, func(*watchdog.Entry, *watchdog.LossError) { lost++ })
	r.Track(names[1], field, lease, false, sent, func(*watchdog.Entry, *watchdog.LossError) { lost++ })

	cancelled, cancel := context.WithCancel(context.Background())
	cancel() // every renewal fails at once
	tk := r.Tick(cancelled)
	if tk.Failed != 1 || tk.Lost != 0 || lost != 0 {
		t.Fatalf("tick %+v, lost %d: a failed renewal inside the lease is not a loss", tk, lost)
	}
	waitUntil(sent.Add(lease))
	tk = r.Tick(cancelled)
	if tk.Lost != 2 || lost != 2 || r.Len() != 0 {
		t.Fatalf("tick %+v, lost %d, len %d; want both lost past the deadline", tk, lost, r.Len())
	}
}

func TestRemoveAndBusyEntriesAreNotRenewed(t *testing.T) {
	rc := client(t)
	field := reentrant.Field(reentrant.NewClientID(), 3)
	r, err := watchdog.New(rc, watchdog.Config{Lease: time.Second, Interval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	names := acquire(t, rc, t.Name(), field, 3, time.Second)
	now := time.Now()
	a := r.Track(names[0], field, time.Second, true, now, nil)
	b := r.Track(names[1], field, time.Second, true, now, nil)
	r.Track(names[2], field, time.Second, true, now, nil)
	if r.Len() != 3 {
		t.Fatalf("len %d after tracking 3", r.Len())
	}
	if !r.Remove(a) || r.Remove(a) {
		t.Fatal("Remove should succeed once")
	}
	if err := r.Begin(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	tk := r.Tick(context.Background())
	r.End(b)
	if tk.Renewed != 1 {
		t.Fatalf("tick %+v, want only the third lock renewed", tk)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	for _, cfg := range []watchdog.Config{{}, {Lease: time.Second}, {Lease: time.Second, Interval: time.Second}, {Lease: time.Second, Interval: -1}} {
		if _, err := watchdog.New(nil, cfg); err == nil {
			t.Fatalf("New accepted %+v", cfg)
		}
	}
}

// BenchmarkTick renews n held locks per tick: one round trip however many
// (the custom metrics say how many round trips and commands a tick took).
func BenchmarkTick(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run("locks="+strconv.Itoa(n), func(b *testing.B) {
			rc := client(b)
			field := reentrant.Field(reentrant.NewClientID(), 4)
			r, err := watchdog.New(rc, watchdog.Config{Lease: time.Minute, Interval: time.Second})
			if err != nil {
				b.Fatal(err)
			}
			now := time.Now()
			for _, name := range acquire(b, rc, b.Name(), field, n, time.Minute) {
				r.Track(name, field, time.Minute, true, now, nil)
			}
			var tk watchdog.Tick
			for b.Loop() {
				tk = r.Tick(context.Background())
				if tk.Renewed != n {
					b.Fatalf("renewed %d of %d", tk.Renewed, n)
				}
			}
			b.ReportMetric(float64(tk.RoundTrips), "roundtrips/tick")
			b.ReportMetric(float64(tk.Commands), "commands/tick")
			rc.Do(context.Background(), rc.B().Flushall().Build())
		})
	}
}

// With Config.Sync, a renewal counts only once a replica acknowledged it:
// on a master with no replica to acknowledge (WAIT answers 0), renewals
// run on the master but never extend the lease, and the lock is declared
// lost at its first deadline, with the reason; a lock the master no
// longer holds is lost at once as before. Acked hears every WAIT.
//
// The last tick comes after the judgement, so its round trip has one
// RoundTrip (20 ms) to be answered, less than Redis's lag in answering
// a WAIT that timed out (up to 100 ms): it is usually cut, and the loss
// must still say that the renewals were never synced.
func TestUnsyncedRenewalsDoNotExtendTheLease(t *testing.T) {
	rc := client(t)
	field := reentrant.Field(reentrant.NewClientID(), 4)
	lease := 600 * time.Millisecond
	var waits []int
	r, err := watchdog.New(rc, watchdog.Config{Lease: lease, Interval: 200 * time.Millisecond, RoundTrip: 20 * time.Millisecond,
		Sync: func(_ context.Context, name string) (string, reentrant.Sync) {
			return "the master", reentrant.Sync{Replicas: 1, Timeout: 20 * time.Millisecond}
		},
		Acked: func(_ string, _ reentrant.Sync, acked int) { waits = append(waits, acked) },
	})
	if err != nil {
		t.Fatal(err)
	}
	var lost []*watchdog.LossError
	sent := time.Now()
	names := acquire(t, rc, t.Name(), field, 2, lease)
	for _, n := range names {
		r.Track(n, field, lease, true, sent, func(_ *watchdog.Entry, le *watchdog.LossError) { lost = append(lost, le) })
	}
	if err := rc.Do(context.Background(), rc.B().Del().Key(names[1]).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	tk := r.Tick(context.Background())
	if tk.Renewed != 0 || tk.Lost != 1 || len(lost) != 1 || lost[0].Name != names[1] {
		t.Fatalf("tick %+v, lost %v: want nothing renewed and only the deleted lock lost", tk, lost)
	}
	if len(waits) == 0 || waits[0] != 0 {
		t.Fatalf("WAIT answers %v, want 0 (no replica)", waits)
	}
	unrenewed := lease - time.Since(sent) // what the key would have left, never renewed
	pttl, err := rc.Do(context.Background(), rc.B().Pttl().Key(names[0]).Build()).AsInt64()
	if err != nil || pttl <= (unrenewed+50*time.Millisecond).Milliseconds() {
		t.Fatalf("PTTL %d, %v: the renewal did not run on the master", pttl, err)
	}
	waitUntil(sent.Add(lease))
	tk = r.Tick(context.Background())
	if tk.Lost != 1 || len(lost) != 2 || r.Len() != 0 {
		t.Fatalf("tick %+v, lost %v, len %d: want the unsynced lock lost at its first deadline", tk, lost, r.Len())
	}
	var ue *watchdog.UnsyncedError
	if !errors.As(lost[1], &ue) || ue.Replicas != 1 {
		t.Fatalf("loss %v, want it to wrap an UnsyncedError", lost[1])
	}
}

// Run sleeps until the next tick or the earliest judgement, and is woken
// only by an entry judged before that: a lock with a short lease taken
// while Run sleeps for an hour is still declared lost at its lease's end.
func TestRunWakesForAnEarlierJudgement(t *testing.T) {
	rc := client(t)
	field := reentrant.Field(reentrant.NewClientID(), 5)
	r, err := watchdog.New(rc, watchdog.Config{Lease: 2 * time.Hour, Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	long := acquire(t, rc, t.Name()+":long", field, 1, time.Hour)
	r.Track(long[0], field, time.Hour, false, time.Now(), func(*watchdog.Entry, *watchdog.LossError) {})
	lost := make(chan *watchdog.LossError, 1)
	short := acquire(t, rc, t.Name()+":short", field, 1, 300*time.Millisecond)
	r.Track(short[0], field, 300*time.Millisecond, false, time.Now(), func(_ *watchdog.Entry, le *watchdog.LossError) { lost <- le })
	select {
	case le := <-lost:
		if le.Name != short[0] {
			t.Fatalf("lost %v, want %s", le, short[0])
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the short lease was not judged at its end: Run slept on")
	}
	if r.Len() != 1 {
		t.Fatalf("%d entries left, want the long one", r.Len())
	}
}
