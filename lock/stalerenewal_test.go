package lock_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/observe"
	"github.com/rlock-go/rlock/reentrant"
)

// R3-6 (safety-3): a renewal whose round trip the watchdog gave up on
// reached Redis after the owner's release and its next Lock with an
// explicit Lease, and stretched that lease to WatchdogTimeout on a key
// nobody held (review: a 1 s lease left the key alive 3.3 s more). Issue
// 29 stage 4: a new acquire of the field goes out only once every renewal
// of that field given up on is answered (or its own bound ran out).
func TestStaleRenewalDoesNotStretchALaterExplicitLease(t *testing.T) {
	srv := integrationRedis(t)
	rc := raw(t, srv)
	n := name(t)
	// One tick that got no answer, reported by the Observer.
	gaveUp := make(chan struct{})
	var once sync.Once
	obs := &observe.Observer{Renew: func(e observe.Renew) {
		if e.Err != nil {
			once.Do(func() { close(gaveUp) })
		}
	}}
	watchdog := 4 * time.Second
	c := newClient(t, lock.Config{WatchdogTimeout: watchdog, RenewInterval: 300 * time.Millisecond, CommandTimeout: 500 * time.Millisecond, Observer: obs}, srv)
	other := newClient(t, lock.Config{}, srv)
	ctx := lock.WithOwner(bg())
	h, err := c.Mutex(n).Lock(ctx)
	must(t, err)
	// The next renewal of n is held 900 ms on its way to Redis: the tick
	// gives up on it (at its interval, 300 ms) long before it runs.
	delay := 900 * time.Millisecond
	f := inject(t, srv, integration.Rule{Match: integration.MatchFunc(func(cmd []string) bool {
		return len(cmd) > 3 && strings.EqualFold(cmd[0], "EVALSHA") && cmd[1] == reentrant.RenewScript.SHA1() && strings.Contains(strings.Join(cmd, " "), n)
	}), Action: integration.DelayRequest(delay)})
	select {
	case <-gaveUp:
	case <-time.After(10 * time.Second):
		t.Fatal("no renewal round trip was given up on within 10 s")
	}
	must(t, h.Unlock(ctx))
	lease := time.Second
	h2, err := c.Mutex(n).Lock(ctx, lock.Lease(lease))
	must(t, err)
	select {
	case <-h2.Done():
	case <-time.After(lease + 5*time.Second):
		t.Fatalf("the Held of a %v lease was live %v later", lease, lease+5*time.Second)
	}
	ended := time.Now()
	// The Held ended at its lease (judged a margin early): the key must go
	// with it, not live on for the renewal's WatchdogTimeout.
	time.Sleep(200 * time.Millisecond) // past the margin: the key's own expiry
	pttl, err := rc.Do(bg(), rc.B().Pttl().Key(n).Build()).AsInt64()
	must(t, err)
	if pttl > 0 {
		t.Errorf("R3-6: 200 ms after the Held of a %v lease ended, the key still has %v to live (a renewal given up on stretched it)", lease, time.Duration(pttl)*time.Millisecond)
	}
	if f.Hits() != 1 {
		t.Fatalf("the delayed renewal was not forwarded (hits %d): the fault did not happen", f.Hits())
	}
	g, err := other.Mutex(n).TryLock(bg())
	if err != nil {
		t.Fatalf("another owner was refused the lock %v after the %v lease ended: %v", time.Since(ended).Round(time.Millisecond), lease, err)
	}
	must(t, g.Unlock(bg()))
}
