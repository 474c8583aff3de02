package faultsuite

import (
	"testing"
	"time"
)

// The history of round 4 of seed 118911596 (docker, single, 2026-11-23):
// an Unlock went unanswered during a partition, the watchdog judged the
// lease run out (LossRenewFailed) at 4470.5 ms and the Unlock returned it
// at 4495.0 ms, and a read at 4495.0–4495.6 ms still found the hold in
// Redis: the key outlives a loss judged by the client's clock. Its
// release window must reach past the Unlock's return, or porcupine calls
// a correct history not linearizable (as it did).
func TestReleaseWindowOfALossJudgedByTheClock(t *testing.T) {
	at := func(ms float64) instant { return instant(ms * float64(time.Millisecond)) }
	h := holding{ret: at(4096.4), lostAt: at(4470.5), unlockCall: at(4212.0), unlockRet: at(4495.0),
		foundLost: true, foundInRedis: false}
	end := at(7000)
	call, ret := releaseWindow(&h, end)
	if call != h.ret {
		t.Errorf("window starts at %v, want the grant %v", call, h.ret)
	}
	if ret <= at(4495.6) {
		t.Errorf("window ends at %v, before the read that still found the hold (4495.6ms)", ret)
	}
	// A loss found in Redis (the release found the lock gone) was over
	// before the Unlock returned.
	h.foundInRedis = true
	if _, ret := releaseWindow(&h, end); ret != h.unlockRet {
		t.Errorf("found in Redis: window ends at %v, want the Unlock's return %v", ret, h.unlockRet)
	}
}
