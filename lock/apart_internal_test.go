package lock

import (
	"context"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/rlock-go/rlock/integration"
)

// pipelinedConns counts the rueidis connections of this process in
// pipelining mode: each has a reader goroutine.
func pipelinedConns() int {
	var b strings.Builder
	_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
	return strings.Count(b.String(), "rueidis.(*pipe)._backgroundRead")
}

// TestBackgroundWorkLeavesTheCallersConnectionDirect: a lone caller's
// Lock and Unlock keep their connection in direct mode while the
// watchdog renews another hold every 20 ms and the latch cleaner deletes
// latches: their round trips go out on a connection of their own. Sent
// on the shared connection while a caller's request was in flight, they
// switched it to pipelining for good (every later request then pays two
// goroutine handoffs).
func TestBackgroundWorkLeavesTheCallersConnectionDirect(t *testing.T) {
	srv := integration.Redis(t, integration.Options{})
	ctx := context.Background()
	before := pipelinedConns()
	c, err := New(ctx, Config{Addrs: []string{srv.DirectAddr()}, WatchdogTimeout: 300 * time.Millisecond, RenewInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	renewed, err := c.Mutex("apart:renewed").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m := c.Mutex("apart:loop")
	end := time.Now().Add(2500 * time.Millisecond) // two latch flushes, 125 renewals
	n := 0
	for time.Now().Before(end) {
		h, err := m.TryLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		n++
	}
	select {
	case <-renewed.Done():
		t.Fatalf("the renewed hold ended: %v", context.Cause(renewed.Context()))
	default:
	}
	if got := pipelinedConns() - before; got != 0 {
		t.Fatalf("after %d Lock+Unlock cycles beside the watchdog and the latch cleaner, %d connection(s) of the Client are in pipelining mode; want 0", n, got)
	}
	if err := renewed.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
