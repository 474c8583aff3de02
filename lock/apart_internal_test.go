package lock

import (
	"context"
	"fmt"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rlock-go/rlock/integration"
)

// pipelinedConns counts the rueidis connections in pipelining mode (each
// has a reader goroutine) among the goroutines labelled with label: those
// started, directly or not, by code run under pprof.Do with it. Other
// clients of the test binary (TestMain's) are not counted.
func pipelinedConns(label string) int {
	var b strings.Builder
	_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
	n := 0
	for _, rec := range strings.Split(b.String(), "\n\n") {
		if !strings.Contains(rec, "rueidis.(*pipe)._backgroundRead") || !strings.Contains(rec, label) {
			continue
		}
		for _, line := range strings.Split(rec, "\n") {
			var k int
			if _, err := fmt.Sscanf(line, "%d @", &k); err == nil {
				n += k
				break
			}
		}
	}
	return n
}

// TestBackgroundWorkLeavesTheCallersConnectionDirect: a lone caller's
// Lock and Unlock keep their connection in direct mode while the
// watchdog renews another hold every 20 ms and the latch cleaner deletes
// latches: their round trips go out on a connection of their own. Sent
// on the shared connection while a caller's request was in flight, they
// switched it to pipelining for good (every later request then pays two
// goroutine handoffs). The lease is 3 s (the renewals' pace is
// RenewInterval's): a 300 ms lease was lost in a CI run on a machine that
// froze the process for longer.
func TestBackgroundWorkLeavesTheCallersConnectionDirect(t *testing.T) {
	srv := integration.Redis(t, integration.Options{})
	// The Client and its goroutines (the watchdog's, the cleaner's, and
	// rueidis's started by either or by the caller) carry this label.
	label := "rlock-apart-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	var c *Client
	var renewed *Held
	var n int
	pprof.Do(context.Background(), pprof.Labels("test", label), func(ctx context.Context) {
		var err error
		c, err = New(ctx, Config{Addrs: []string{srv.DirectAddr()}, WatchdogTimeout: 3 * time.Second, RenewInterval: 20 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		renewed, err = c.Mutex("apart:renewed").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m := c.Mutex("apart:loop")
		end := time.Now().Add(2500 * time.Millisecond) // two latch flushes, 125 renewals
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
	})
	ctx := context.Background()
	defer c.Close(ctx)
	select {
	case <-renewed.Done():
		t.Fatalf("the renewed hold ended: %v", context.Cause(renewed.Context()))
	default:
	}
	if got := pipelinedConns(label); got != 0 {
		t.Fatalf("after %d Lock+Unlock cycles beside the watchdog and the latch cleaner, %d connection(s) of the Client are in pipelining mode; want 0", n, got)
	}
	if err := renewed.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
