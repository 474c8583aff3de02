package multilock_test

import (
	"testing"

	"github.com/rlock-go/rlock/lock"
)

// A RedLock of fair locks: its members' attempts never join the fair
// queues, so no release wakes its waiter; it polls, and gets the lock soon
// after the holder's Unlock, long before the 30 s leases could run out.
func TestRedLockOfFairLocksPolls(t *testing.T) {
	fair := func(c *lock.Client, n string) *lock.Mutex { return c.FairMutex(n) }
	redLockWaiterPolls(t, fair, fair)
}
