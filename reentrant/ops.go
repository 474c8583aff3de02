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

// ms renders a duration as whole milliseconds, Redisson's unit, never
// rounding a positive duration down to 0.
func ms(d time.Duration) string {
	m := d.Milliseconds()
	if m <= 0 && d > 0 {
		m = 1
	}
	return strconv.FormatInt(m, 10)
}

// Attempt is the outcome of one acquire attempt.
type Attempt struct {
	// Acquired is true when the hold count of the field went up by one.
	Acquired bool
	// TTL is the remaining lease of the current holder when not acquired;
	// negative when the key has no expiry (not written by a lock).
	TTL time.Duration
	// Token is the fencing token taken by a fenced acquire (0 otherwise).
	Token uint64
}

// Acquire runs the acquire script once: take the lock for field, or add
// one hold when field already holds it, with the given lease.
func Acquire(ctx context.Context, c rueidis.Client, name, field string, lease time.Duration) (Attempt, error) {
	res := AcquireScript.Run(ctx, c, []string{name}, []string{ms(lease), field})
	return parseAcquire(res)
}

func parseAcquire(res rueidis.RedisResult) (Attempt, error) {
	err := res.Error()
	if rueidis.IsRedisNil(err) {
		return Attempt{Acquired: true}, nil
	}
	if err != nil {
		return Attempt{}, err
	}
	pttl, err := res.AsInt64()
	if err != nil {
		return Attempt{}, fmt.Errorf("%w: acquire: %v", ErrUnexpectedReply, err)
	}
	return Attempt{TTL: time.Duration(pttl) * time.Millisecond}, nil
}

// AcquireFenced is Acquire with Redisson's fenced-lock script: every
// acquisition, re-entry included, INCRs TokenName(name) and returns it.
func AcquireFenced(ctx context.Context, c rueidis.Client, name, field string, lease time.Duration) (Attempt, error) {
	res := AcquireFencedScript.Run(ctx, c, []string{name, TokenName(name)}, []string{ms(lease), field})
	vals, err := res.AsIntSlice()
	if err != nil {
		if res.Error() != nil {
			return Attempt{}, err
		}
		return Attempt{}, fmt.Errorf("%w: fenced acquire: %v", ErrUnexpectedReply, err)
	}
	if len(vals) != 2 {
		return Attempt{}, fmt.Errorf("%w: fenced acquire: %d values", ErrUnexpectedReply, len(vals))
	}
	if vals[0] == -1 {
		return Attempt{Acquired: true, Token: uint64(vals[1])}, nil
	}
	return Attempt{TTL: time.Duration(vals[0]) * time.Millisecond}, nil
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
	Publish   string        // Publish or ShardedPublish
	LatchTTL  time.Duration // how long the latch answers retries
}

// Run sends the release script once.
func (r Release) Run(ctx context.Context, c rueidis.Client) (ReleaseResult, error) {
	res := ReleaseScript.Run(ctx, c,
		[]string{r.Name, ChannelName(r.Name), LatchName(r.Name, r.RequestID)},
		[]string{UnlockMessage, ms(r.Lease), r.Field, r.Publish, ms(r.LatchTTL)})
	err := res.Error()
	if rueidis.IsRedisNil(err) {
		return NotHeld, nil
	}
	if err != nil {
		return NotHeld, err
	}
	v, err := res.AsInt64()
	switch {
	case err != nil:
		return NotHeld, fmt.Errorf("%w: release: %v", ErrUnexpectedReply, err)
	case v == 0:
		return StillHeld, nil
	case v == 1:
		return Released, nil
	case v == 2:
		return Fenced, nil
	}
	return NotHeld, fmt.Errorf("%w: release returned %d", ErrUnexpectedReply, v)
}

// DeleteLatch removes the request's latch once its answer is known.
func (r Release) DeleteLatch(ctx context.Context, c rueidis.Client) error {
	return c.Do(ctx, c.B().Del().Key(LatchName(r.Name, r.RequestID)).Build()).Error()
}

// ForceUnlock deletes the lock whoever holds it and, when there was one,
// publishes the unlock message. It reports whether a lock was deleted.
func ForceUnlock(ctx context.Context, c rueidis.Client, name, publish string) (bool, error) {
	res := ForceUnlockScript.Run(ctx, c, []string{name, ChannelName(name)}, []string{UnlockMessage, publish})
	v, err := res.AsInt64()
	if err != nil {
		if res.Error() != nil {
			return false, err
		}
		return false, fmt.Errorf("%w: force unlock: %v", ErrUnexpectedReply, err)
	}
	return v == 1, nil
}
