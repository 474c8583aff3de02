package lock

import (
	"context"
	"testing"
	"time"

	"github.com/rlock-go/rlock/integration"
)

// A hold ended by a loss (the watchdog's onLost) leaves its hold in
// Client.holds for ever: onLost empties l.helds but nobody calls unuse
// afterwards, and the Held's Unlock returns its LostError before useHold.
// Every Lock without an owner gets a fresh owner, so each lost lock leaks
// one hold until Close.
func TestReviewLostHoldLeavesNoLedger(t *testing.T) {
	srv := integration.Redis(t, integration.Options{})
	c, err := New(context.Background(), Config{Addrs: []string{srv.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	for i := 0; i < 20; i++ {
		h, err := c.Mutex("review:leak").Lock(context.Background(), Lease(60*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		<-h.Done()
		_ = h.Unlock(context.Background())
		time.Sleep(80 * time.Millisecond) // the key expires in Redis too
	}
	c.mu.Lock()
	n := len(c.index)
	c.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d holds left after 20 lost holds, all Unlocked", n)
	}
}
