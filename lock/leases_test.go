package lock_test

import (
	"slices"
	"testing"
	"time"

	"github.com/rlock-go/rlock/lock"
)

// Issue 29, stage 4: leases and keys. Each test failed first against the
// code before its fix by the finding's own assertion.

// R3-11: Go write-lock re-entries keep the key's expiry at one lease (a
// writer that dies frees the lock at most one lease after it last held).
func TestWriteReentriesDoNotOutliveOneLease(t *testing.T) {
	lease := 2 * time.Second
	for _, explicit := range []bool{false, true} {
		t.Run(map[bool]string{false: "watchdog", true: "lease"}[explicit], func(t *testing.T) {
			rc := raw(t)
			c := newClient(t, lock.Config{WatchdogTimeout: lease})
			var opts []lock.Option
			if explicit {
				opts = append(opts, lock.Lease(lease))
			}
			n := name(t)
			w := c.ReadWriteMutex(n).WriteLock()
			h, err := w.Lock(bg(), opts...)
			must(t, err)
			helds := []*lock.Held{h}
			defer func() {
				for _, g := range slices.Backward(helds) {
					_ = g.Unlock(bg())
				}
			}()
			var ttls []time.Duration
			over := false
			for range 5 {
				g, err := w.Lock(h.Context(), opts...)
				must(t, err)
				helds = append(helds, g)
				p := pttl(t, rc, n)
				ttls = append(ttls, p)
				over = over || p > lease
			}
			if over {
				t.Fatalf("after 1..5 write re-entries with a %v lease the key's PTTL is %v: more than one lease", lease, ttls)
			}
		})
	}
}
