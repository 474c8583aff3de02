package reentrant

import (
	"context"
	_ "embed"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

//go:embed acquire_fair.lua
var acquireFairSrc string

//go:embed release_fair.lua
var releaseFairSrc string

//go:embed force_unlock_fair.lua
var forceUnlockFairSrc string

//go:embed leave_fair.lua
var leaveFairSrc string

// The fair lock's scripts.
var (
	// AcquireFairScript is rlock's acquire of a fair lock (see
	// AcquireRequest with Kind Fair).
	AcquireFairScript     = newScript(acquireFairSrc)
	ReleaseFairScript     = newScript(releaseFairSrc)
	ForceUnlockFairScript = newScript(forceUnlockFairSrc)
	// LeaveFairScript takes a waiter out of a fair lock's queue (see
	// LeaveFair).
	LeaveFairScript = newScript(leaveFairSrc)
)

// FairQueueName is the list of a fair lock's waiting holder fields,
// "redisson_lock_queue:{name}".
func FairQueueName(name string) string { return prefixName("redisson_lock_queue", name) }

// FairTimeoutName is the sorted set of a fair lock's waiters' timeouts
// (milliseconds of the clients' clocks), "redisson_lock_timeout:{name}".
func FairTimeoutName(name string) string { return prefixName("redisson_lock_timeout", name) }

// FairWaiterChannel is the channel on which the waiter field of a fair
// lock is woken when it heads the queue: ChannelName(name) + ":" + field.
func FairWaiterChannel(name, field string) string { return ChannelName(name) + ":" + field }

// nowMs is the client's clock in Unix milliseconds, as the fair lock's
// scripts take it (Redisson's System.currentTimeMillis()).
func nowMs() string { return strconv.FormatInt(time.Now().UnixMilli(), 10) }

// callFair returns the script, keys and args of a ModeFair acquire.
func (r AcquireRequest) callFair(latch, known string) (*Script, []string, []string) {
	queue := "0"
	if r.Queue {
		queue = "1"
	}
	return AcquireFairScript, []string{r.Name, FairQueueName(r.Name), FairTimeoutName(r.Name), latch},
		[]string{ms(r.Lease), r.Field, known, ms(r.Wait), nowMs(), queue, ms(r.KeepPlace)}
}

// callFair returns the script, keys and args of a ModeFair release.
func (r Release) callFair(latch string) (*Script, []string, []string) {
	return ReleaseFairScript, []string{r.Name, FairQueueName(r.Name), FairTimeoutName(r.Name), ChannelName(r.Name), latch},
		[]string{UnlockMessage, ms(r.Lease), r.Field, r.Publish, ms(r.LatchTTL), nowMs(), ms(r.KeepPlace)}
}

// LeaveFair takes Field out of the fair lock Name's queue, as Redisson's
// acquireFailed does: the waiters behind it have their timeouts lowered by
// Wait (the wait it joined with). When it headed the queue and the lock
// is free, the next waiter is woken. It may be sent again (a second run
// does nothing), but must not be sent before an acquire of Field that may
// still run (settle it first): that could queue the field again.
type LeaveFair struct {
	Name    string
	Field   string
	Wait    time.Duration
	Publish string
}

// Run sends the script once; it reports whether the field was queued.
func (l LeaveFair) Run(ctx context.Context, c rueidis.Client) (bool, error) {
	res := LeaveFairScript.Run(ctx, c,
		[]string{l.Name, FairQueueName(l.Name), FairTimeoutName(l.Name), ChannelName(l.Name)},
		[]string{l.Field, ms(l.Wait), UnlockMessage, l.Publish})
	return isOne(res, "leave fair queue")
}

// ForceUnlockFair deletes the fair lock name whoever holds it and, when
// there was one, wakes the waiter at its queue's head. It reports whether
// a lock was deleted (true and ErrUnannounced: deleted, the message
// refused).
func ForceUnlockFair(ctx context.Context, c rueidis.Client, name, publish string) (bool, error) {
	res := ForceUnlockFairScript.Run(ctx, c,
		[]string{name, FairQueueName(name), FairTimeoutName(name), ChannelName(name)},
		[]string{UnlockMessage, publish, nowMs()})
	return forced(res)
}
