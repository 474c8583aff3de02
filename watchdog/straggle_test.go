package watchdog_test

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/reentrant"
	"github.com/rlock-go/rlock/watchdog"
)

// A renewal round trip that gets no answer (the fault proxy holds it) is
// waited for until Config.Straggle after its send, not for its tick's
// Interval: a tick sends it once and gives up on it at Straggle, and Run,
// whose ctx ends while it is on the wire, returns (having joined it)
// within Straggle of its send. Issue 29, stage 3: lock sets Straggle to
// 2 × CommandTimeout, the bound a goroutine may outlive Close by; before,
// the round trip was waited for up to Interval plus Straggle.
func TestAnUnansweredRoundTripIsWaitedForUntilStraggleAfterItsSend(t *testing.T) {
	const (
		straggle = 200 * time.Millisecond
		interval = time.Second
		slack    = 250 * time.Millisecond // a loaded machine's scheduling
	)
	rc := integration.NewClient(t, srv.Addr()) // through the proxy
	if err := reentrant.Load(context.Background(), rc); err != nil {
		t.Fatal(err)
	}
	field := reentrant.Field(reentrant.NewClientID(), 6)
	lease := 3 * time.Second
	r, err := watchdog.New(rc, watchdog.Config{Lease: lease, Interval: interval, Straggle: straggle})
	if err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	names := acquire(t, rc, t.Name(), field, 1, lease)
	r.Track(names[0], field, lease, true, sent, nil)
	onWire := make(chan time.Time, 16)
	f, err := srv.Inject(integration.Rule{Match: integration.MatchFunc(func(cmd []string) bool {
		if len(cmd) > 3 && strings.EqualFold(cmd[0], "EVALSHA") && cmd[1] == reentrant.RenewScript.SHA1() && slices.Contains(cmd, names[0]) {
			select {
			case onWire <- time.Now():
			default:
			}
			return true
		}
		return false
	}), Action: integration.DelayRequest(30 * time.Second), Times: math.MaxInt})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Remove)

	tickStart := time.Now()
	tk := r.Tick(context.Background())
	t.Logf("tick with its renewal held: %+v", tk)
	if n := len(onWire); tk.RoundTrips != 1 || n != 1 || tk.Renewed != 0 || tk.Failed != 1 {
		t.Errorf("tick %+v, %d renewals reached the proxy; want one round trip, sent once, failed", tk, n)
	}
	if stalled := integration.Stalled(tickStart, tickStart.Add(tk.Duration)); tk.Duration-stalled > straggle+slack {
		t.Errorf("the tick took %v (the process stalled %v of it), more than Straggle (%v): it waited for its round trip past Straggle", tk.Duration.Round(time.Millisecond), stalled.Round(time.Millisecond), straggle)
	}
	for len(onWire) > 0 {
		<-onWire
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	var at time.Time
	select {
	case at = <-onWire:
	case <-time.After(10 * interval):
		t.Fatalf("Run sent no renewal within %v", 10*interval)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run had not returned 10 s after its ctx ended")
	}
	over := time.Since(at)
	stalled := integration.Stalled(at, at.Add(over))
	t.Logf("Run returned %v after its renewal reached the proxy (the process stalled %v of it; Straggle %v, Interval %v)", over.Round(time.Millisecond), stalled.Round(time.Millisecond), straggle, interval)
	if over-stalled > straggle+slack {
		t.Errorf("Run returned %v after its renewal was sent, more than Straggle (%v)", over.Round(time.Millisecond), straggle)
	}
}
