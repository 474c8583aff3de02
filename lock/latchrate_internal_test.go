package lock

import "time"

// Hooks for TestLatchCleanerAtThreeTimesPeak (package lock_test), which
// feeds a Client's latch cleaner at a rate no Lock+Unlock on the test's
// machine reaches. They are the cleaner's only entrance and the latches'
// life: the test depends on nothing else of the Client's insides.

// QueueLatch hands the latch of request id on lock name to c's cleaner,
// as an answered release does (env.queueLatch).
func QueueLatch(c *Client, name, id string) { c.e.queueLatch(name, id) }

// RecordTTL is the life c gives a latch (env.recordTTL).
func RecordTTL(c *Client) time.Duration { return c.e.recordTTL() }
