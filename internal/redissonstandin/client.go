// Package redissonstandin speaks Redisson's lock kinds on the wire exactly
// as Redisson's Java client does: the plain lock (RedissonLock), the fair
// lock (RedissonFairLock), the read-write lock (RedissonReadLock,
// RedissonWriteLock), the spin lock (RedissonSpinLock) and the
// non-reentrant lock (RedissonNonReentrantLock, 4.4.0 and later).
//
// It is test support: rlock's tests use it as "a Java service" to check
// rlock against Redisson rather than against itself. It was written from
// Redisson's source alone (tags redisson-3.52.0 and redisson-4.7.0), not
// from rlock's scripts. Each Go method is one Redisson method, named in its
// comment, sending that method's script with its KEYS and ARGV in
// Redisson's order. The stand-in runs no watchdog and no waiting loop of
// its own (except SpinLock.Lock): tests call Renew and retry themselves.
//
// A Client is one Redisson instance (one ServiceManager id); a thread is a
// Java thread id. Lock objects carry the per-object state Redisson keeps
// (internalLockLeaseTime), so, as in Java, use one object per RLock.
package redissonstandin

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// Version is the Redisson release whose behaviour a Client follows where
// releases differ (see layout.go).
type Version int

const (
	// V3_52_0 is Redisson 3.52.0 (tag redisson-3.52.0).
	V3_52_0 Version = iota + 1
	// V4_7_0 is Redisson 4.7.0 (tag redisson-4.7.0).
	V4_7_0
)

// Tag is the git tag of the version in github.com/redisson/redisson.
func (v Version) Tag() string {
	switch v {
	case V3_52_0:
		return Tag3
	case V4_7_0:
		return Tag4
	}
	return "unknown"
}

// String is the tag.
func (v Version) String() string { return v.Tag() }

// Options configures a Client. Zero values mean Redisson's defaults.
type Options struct {
	// ID is the instance id (ServiceManager.id, a random UUID); NewID() when empty.
	ID string
	// Version selects the behaviour where releases differ; V4_7_0 when zero.
	Version Version
	// PublishCommand is "PUBLISH" (default) or "SPUBLISH" (sharded pub/sub in a cluster).
	PublishCommand string
	// WatchdogTimeout is Config.lockWatchdogTimeout: the lease when none is given,
	// and what renewals set. LockWatchdogTimeout when zero.
	WatchdogTimeout time.Duration
	// FairLockWaitTimeout is Config.fairLockWaitTimeout (the fair lock's
	// threadWaitTime). FairLockWaitTimeout when zero.
	FairLockWaitTimeout time.Duration
	// LatchTimeout is the unlock latch's PX. Redisson computes it per call as
	// (timeout + retryDelay.calcDelay(retryAttempts)) * retryAttempts, which with
	// the defaults is 16000 to 20000 ms; DefaultLatchTimeout when zero.
	LatchTimeout time.Duration
	// Now is the client's clock (System.currentTimeMillis, sent by the fair
	// lock's scripts); time.Now when nil.
	Now func() time.Time
}

// Client is one Redisson instance: an id and a connection.
type Client struct {
	rc rueidis.Client
	o  Options
}

// New returns a stand-in Redisson instance on rc.
func New(rc rueidis.Client, o Options) *Client {
	if o.ID == "" {
		o.ID = NewID()
	}
	if o.Version == 0 {
		o.Version = V4_7_0
	}
	if o.PublishCommand == "" {
		o.PublishCommand = "PUBLISH"
	}
	if o.WatchdogTimeout <= 0 {
		o.WatchdogTimeout = LockWatchdogTimeout
	}
	if o.FairLockWaitTimeout <= 0 {
		o.FairLockWaitTimeout = FairLockWaitTimeout
	}
	if o.LatchTimeout <= 0 {
		o.LatchTimeout = DefaultLatchTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Client{rc: rc, o: o}
}

// ID is the instance id, the first half of every field it writes.
func (c *Client) ID() string { return c.o.ID }

// Version is the Redisson version the client follows.
func (c *Client) Version() Version { return c.o.Version }

// Field is RedissonBaseLock.getLockName(threadId): "<id>:<threadId>".
func (c *Client) Field(thread uint64) string { return Field(c.o.ID, thread) }

// NewID returns a random UUID in Java's UUID.toString() form (36
// lowercase characters), as Redisson's ServiceManager id.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// NewRequestID returns an unlock request id as ServiceManager.generateId:
// 16 random bytes, hex (32 lowercase characters).
func NewRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Acquire is what a tryLockInnerAsync answered: acquired (nil reply), or
// not, with the reply as a number (a TTL in milliseconds for the EVAL_LONG
// scripts).
type Acquire struct {
	// Acquired is a nil reply: the lock is taken (or re-entered).
	Acquired bool
	// TTL is the reply when not acquired: milliseconds (PTTL, or the fair
	// lock's computed wait; 1 from the fair lock's tryLock() script).
	TTL int64
}

// Release is what an unlockInnerAsync answered.
type Release int

const (
	// NotHeld is a nil reply: Java throws IllegalMonitorStateException.
	NotHeld Release = iota
	// StillHeld is 0 (false): a re-entry was released, the lock is still held.
	StillHeld
	// Released is 1 (true): the lock (or this hold of it) is gone.
	Released
)

// String names the answer.
func (r Release) String() string {
	switch r {
	case StillHeld:
		return "still held (0)"
	case Released:
		return "released (1)"
	}
	return "not held (nil)"
}

// ErrUnexpected is an answer no Redisson code path produces.
var ErrUnexpected = errors.New("redissonstandin: unexpected reply")

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

func (c *Client) now() string { return strconv.FormatInt(c.o.Now().UnixMilli(), 10) }

// lease is the lease Redisson sends: the given one, or the watchdog
// timeout when none is given (leaseTime <= 0).
func (c *Client) lease(l time.Duration) time.Duration {
	if l > 0 {
		return l
	}
	return c.o.WatchdogTimeout
}

func (c *Client) eval(ctx context.Context, script string, keys []string, args ...string) rueidis.RedisResult {
	return c.rc.Do(ctx, c.rc.B().Eval().Script(script).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build())
}

// acquireReply reads an EVAL_LONG answer: nil is acquired, else the number.
func acquireReply(res rueidis.RedisResult) (Acquire, error) {
	if err := res.Error(); rueidis.IsRedisNil(err) {
		return Acquire{Acquired: true}, nil
	} else if err != nil {
		return Acquire{}, err
	}
	v, err := res.AsInt64()
	if err != nil {
		return Acquire{}, err
	}
	return Acquire{TTL: v}, nil
}

// releaseReply reads an EVAL_BOOLEAN answer of an unlock script.
func releaseReply(res rueidis.RedisResult) (Release, error) {
	if err := res.Error(); rueidis.IsRedisNil(err) {
		return NotHeld, nil
	} else if err != nil {
		return NotHeld, err
	}
	v, err := res.AsInt64()
	switch {
	case err != nil:
		return NotHeld, err
	case v == 0:
		return StillHeld, nil
	case v == 1:
		return Released, nil
	}
	return NotHeld, ErrUnexpected
}

// boolReply reads an EVAL_BOOLEAN answer of a force-unlock script.
func boolReply(res rueidis.RedisResult) (bool, error) {
	v, err := res.AsInt64()
	return v == 1, err
}

// unlock is RedissonBaseLock.unlockInnerAsync(threadId, requestId): the
// kind's script with a fresh request id, then DEL of the latch, as Java
// does after every answer.
func (c *Client) unlock(ctx context.Context, name string, inner func(context.Context, string) (Release, error)) (Release, error) {
	req := NewRequestID()
	r, err := inner(ctx, req)
	if err != nil {
		return r, err
	}
	return r, c.rc.Do(ctx, c.rc.B().Del().Key(LatchName(name, req)).Build()).Error()
}

// Renew is LockTask's batched renewal (RenewalTask every watchdog/3):
// for each name with its field, PEXPIRE the watchdog timeout when the
// field is there. It answers, per name, whether it was renewed. The
// plain, fair, spin, non-reentrant and write locks all renew this way
// (the write lock with its ":write" field).
func (c *Client) Renew(ctx context.Context, names, fields []string) ([]bool, error) {
	if len(names) != len(fields) || len(names) == 0 {
		return nil, errors.New("redissonstandin: Renew needs one field per name")
	}
	args := append([]string{ms(c.o.WatchdogTimeout)}, fields...)
	vs, err := c.eval(ctx, lockRenew, names, args...).AsIntSlice()
	if err != nil {
		return nil, err
	}
	out := make([]bool, len(vs))
	for i, v := range vs {
		out[i] = v == 1
	}
	return out, nil
}

func (c *Client) renewOne(ctx context.Context, name, field string) (bool, error) {
	r, err := c.Renew(ctx, []string{name}, []string{field})
	if err != nil {
		return false, err
	}
	return r[0], nil
}

// isNil is a nil reply, which EVAL_VOID scripts give.
func isNil(err error) bool { return rueidis.IsRedisNil(err) }
