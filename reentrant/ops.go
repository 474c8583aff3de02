package reentrant

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// ErrUnexpectedReply is returned when a script's reply does not have the
// shape the protocol promises (another program wrote the key, or the key
// is not a lock).
var ErrUnexpectedReply = errors.New("rlock: unexpected reply from redis")

// ErrUnannounced is the error of a force unlock that deleted the lock but
// whose unlock message the server refused (the ACL forbids PUBLISH to the
// lock's channel): waiters elsewhere are not woken by it.
var ErrUnannounced = errors.New("rlock: deleted without its unlock message: the server refused to publish it to the lock's channel (its ACL)")

// ms renders a duration as whole milliseconds, Redisson's unit, never
// rounding a positive duration down to 0.
func ms(d time.Duration) string {
	m := d.Milliseconds()
	if m <= 0 && d > 0 {
		m = 1
	}
	return strconv.FormatInt(m, 10)
}

// ReleaseResult is the outcome of a release.
type ReleaseResult int

const (
	// NotHeld: the field held no hold on the lock; nothing changed.
	NotHeld ReleaseResult = iota
	// StillHeld: one hold was released and at least one remains; the lease
	// was reset.
	StillHeld
	// Released: the last hold was released, the key deleted and the unlock
	// message published.
	Released
	// Fenced: a Settle ran before this request, which therefore changed
	// nothing and never will.
	Fenced
)

func (r ReleaseResult) String() string {
	switch r {
	case StillHeld:
		return "still held"
	case Released:
		return "released"
	case Fenced:
		return "fenced"
	default:
		return "not held"
	}
}

// Release describes one release request. RequestID identifies the request
// across its retries: a retry with the same RequestID returns the first
// attempt's answer instead of releasing a second hold.
type Release struct {
	Name      string
	Field     string
	Lease     time.Duration // lease to reset when a hold remains
	RequestID string        // NewRequestID(), one per Unlock call
	Publish   string        // Publish or ShardedPublish; "" publishes nothing (a spin lock)
	LatchTTL  time.Duration // how long the latch answers retries
	Sync      Sync          // wait for replicas (see Sync and RunSynced)
	Mode      Mode          // the lock kind (ModeLock: Redisson's RLock)
	// KeepPlace, for a ModeFair give-back of the field's last hold that
	// is tried again at once (no replica acknowledged its grant), is the
	// fair wait (Redisson's threadWaitTime): the field heads the queue
	// again instead of waking the next waiter. Zero: a release.
	KeepPlace time.Duration
}

// Run sends the release script once (with r.Sync, followed by WAIT).
func (r Release) Run(ctx context.Context, c rueidis.Client) (ReleaseResult, error) {
	res, _, err := r.RunSynced(ctx, c)
	return res, err
}

// RunSynced is Run that also returns how many replicas acknowledged the
// release (-1 without r.Sync, or when not known). The latch's expiry is
// set again after the script: a write, so that the WAIT of a release sent
// again, answered from the latch, still covers the copy that ran.
func (r Release) RunSynced(ctx context.Context, c rueidis.Client) (ReleaseResult, int, error) {
	o, err := r.RunOutcome(ctx, c)
	return o.Result, o.Acked, err
}

// ReleaseOutcome is a release's answer in full (RunOutcome).
type ReleaseOutcome struct {
	Result ReleaseResult
	Acked  int // replicas that acknowledged it, as RunSynced returns
	// Unannounced: the release took the lock's last hold, but the server
	// refused the unlock message (an ACL without PUBLISH, or without the
	// lock's channel): nobody was told, and waiters elsewhere wake only
	// when the lease they saw ends. Result is Released.
	Unannounced bool
	// Latch is the release's unlock latch key: LatchName of its name and
	// request id.
	Latch string
}

// RunOutcome is RunSynced that also reports a release made without its
// unlock message (ReleaseOutcome.Unannounced).
func (r Release) RunOutcome(ctx context.Context, c rueidis.Client) (ReleaseOutcome, error) {
	latch := LatchName(r.Name, r.RequestID)
	rearm := func() []rueidis.Completed {
		return []rueidis.Completed{c.B().Pexpire().Key(latch).Milliseconds(r.LatchTTL.Milliseconds()).Build()}
	}
	sc, keys, args := r.call(latch)
	res, acked := r.Sync.runSynced(ctx, c, sc, keys, args, rearm)
	o, err := parseRelease(res)
	o.Acked, o.Latch = acked, latch
	return o, err
}

// parseRelease reads a release script's reply: nil not held, 0 still held,
// 1 released, 2 fenced, 4 released without the unlock message.
func parseRelease(res rueidis.RedisResult) (ReleaseOutcome, error) {
	err := res.Error()
	if rueidis.IsRedisNil(err) {
		return ReleaseOutcome{Result: NotHeld}, nil
	}
	if err != nil {
		return ReleaseOutcome{Result: NotHeld}, err
	}
	v, err := res.AsInt64()
	switch {
	case err != nil:
		return ReleaseOutcome{Result: NotHeld}, fmt.Errorf("%w: release: %v", ErrUnexpectedReply, err)
	case v == 0:
		return ReleaseOutcome{Result: StillHeld}, nil
	case v == 1:
		return ReleaseOutcome{Result: Released}, nil
	case v == 2:
		return ReleaseOutcome{Result: Fenced}, nil
	case v == 4:
		return ReleaseOutcome{Result: Released, Unannounced: true}, nil
	}
	return ReleaseOutcome{Result: NotHeld}, fmt.Errorf("%w: release returned %d", ErrUnexpectedReply, v)
}

// ForceUnlock deletes the lock whoever holds it and, when there was one,
// publishes the unlock message. It reports whether a lock was deleted;
// deleted but with the message refused (the ACL forbids PUBLISH to the
// lock's channel), it returns true and ErrUnannounced.
func ForceUnlock(ctx context.Context, c rueidis.Client, name, publish string) (bool, error) {
	res := ForceUnlockScript.Run(ctx, c, []string{name, ChannelName(name)}, []string{UnlockMessage, publish})
	return forced(res)
}

// forced reads a force unlock script's reply: 1 deleted, 0 not, 4
// deleted without its message (true, ErrUnannounced).
func forced(res rueidis.RedisResult) (bool, error) {
	if v, err := res.AsInt64(); err == nil && v == 4 {
		return true, ErrUnannounced
	}
	return isOne(res, "force unlock")
}

// isOne reads a script's integer reply as a boolean, 1 being true; what
// names the script in the error of a reply of another shape. An error
// reply is returned as is.
func isOne(res rueidis.RedisResult, what string) (bool, error) {
	v, err := res.AsInt64()
	if err != nil {
		if res.Error() != nil {
			return false, err
		}
		return false, fmt.Errorf("%w: %s: %v", ErrUnexpectedReply, what, err)
	}
	return v == 1, nil
}
