package reentrant

import (
	"context"
	_ "embed"
	"strconv"
	"strings"

	"github.com/redis/rueidis"
)

// Mode is the lock kind a request is for: which scripts, keys and
// channel it uses. The zero Mode is Redisson's RLock.
type Mode uint8

const (
	// ModeLock is Redisson's RLock (getLock, getFencedLock, ...): the
	// hash at the lock name, channel ChannelName.
	ModeLock Mode = iota
	// ModeRead is the read half of Redisson's RReadWriteLock
	// (getReadWriteLock(name).readLock()): the field "<client id>:<owner>"
	// in the hash, with 'mode' = 'read' (or 'write' when the same owner
	// holds the write half), and one timeout key per hold
	// (ReadTimeoutPrefix + ":" + n); channel RWChannelName.
	ModeRead
	// ModeWrite is the write half (writeLock()): the field
	// "<client id>:<owner>:write" (WriterField) with 'mode' = 'write'.
	ModeWrite
	// ModeFair is Redisson's RFairLock (getFairLock): RLock's hash, a
	// queue of waiters and their timeouts (FairQueueName,
	// FairTimeoutName); a release wakes only the queue's head, on
	// FairWaiterChannel. Its requests take AcquireRequest.Wait and Queue.
	ModeFair
)

func (m Mode) String() string {
	switch m {
	case ModeRead:
		return "read"
	case ModeWrite:
		return "write"
	case ModeFair:
		return "fair"
	}
	return "lock"
}

//go:embed acquire_read.lua
var acquireReadSrc string

//go:embed acquire_write.lua
var acquireWriteSrc string

//go:embed release_read.lua
var releaseReadSrc string

//go:embed release_write.lua
var releaseWriteSrc string

//go:embed renew_read.lua
var renewReadSrc string

//go:embed force_unlock_rw.lua
var forceUnlockRWSrc string

//go:embed is_locked_rw.lua
var isLockedRWSrc string

var isLockedRWScript = newScript(isLockedRWSrc)

// The read-write lock's scripts (see Mode), in Redisson's layout and
// rlock's counted protocol; each .lua file documents its keys, arguments
// and answers.
var (
	// AcquireReadScript is an AcquireRequest of ModeRead.
	AcquireReadScript = newScript(acquireReadSrc)
	// AcquireWriteScript is an AcquireRequest of ModeWrite.
	AcquireWriteScript = newScript(acquireWriteSrc)
	// ReleaseReadScript is a Release of ModeRead.
	ReleaseReadScript = newScript(releaseReadSrc)
	// ReleaseWriteScript is a Release of ModeWrite.
	ReleaseWriteScript = newScript(releaseWriteSrc)
	// RenewReadScript renews read holds: the hash and every timeout key
	// of the field (see BuildRenew).
	RenewReadScript = newScript(renewReadSrc)
	// ForceUnlockRWScript is ForceUnlockRW.
	ForceUnlockRWScript = newScript(forceUnlockRWSrc)
)

// RWChannelName is the channel of the read-write lock name:
// "redisson_rwlock:{name}". Read releases publish UnlockMessage (wake
// one), write releases ReadUnlockMessage (wake all).
func RWChannelName(name string) string { return prefixName("redisson_rwlock", name) }

// WriterField is the write half's field of the holder field f
// ("<client id>:<owner>"): f + ":write".
func WriterField(f string) string { return f + ":write" }

// rwKeyPrefix is the prefix of every reader's timeout keys of name:
// "{name}", or name when it already holds a '{' (Redisson's
// RedissonObject.suffixName).
func rwKeyPrefix(name string) string {
	if strings.Contains(name, "{") {
		return name
	}
	return "{" + name + "}"
}

// ReadTimeoutPrefix is the prefix of the timeout keys of the reader
// field's holds: "{name}:<field>:rwlock_timeout" ("name:<field>:..." when
// the name holds a '{'); hold n's key is the prefix + ":" + n.
func ReadTimeoutPrefix(name, field string) string {
	return rwKeyPrefix(name) + ":" + field + ":rwlock_timeout"
}

// channelFor is the channel of a lock name by mode.
func channelFor(m Mode, name string) string {
	if m == ModeRead || m == ModeWrite {
		return RWChannelName(name)
	}
	return ChannelName(name)
}

// Channel returns the channel on which releases of the lock name of mode
// m are announced.
func (m Mode) Channel(name string) string { return channelFor(m, name) }

// call returns the script, keys and args of r.
func (r AcquireRequest) call(fenced string) (*Script, []string, []string) {
	latch := LatchName(r.Name, r.RequestID)
	known := strconv.Itoa(r.Known)
	switch r.Mode {
	case ModeRead:
		return AcquireReadScript, []string{r.Name, latch, ReadTimeoutPrefix(r.Name, r.Field)},
			[]string{ms(r.Lease), r.Field, known, WriterField(r.Field)}
	case ModeWrite:
		return AcquireWriteScript, []string{r.Name, latch}, []string{ms(r.Lease), r.Field, known}
	case ModeFair:
		return r.callFair(latch, known)
	}
	return AcquireCountedScript, []string{r.Name, latch, TokenName(r.Name)},
		[]string{ms(r.Lease), r.Field, known, fenced}
}

// call returns the script, keys and args of r, whose latch key
// (LatchName of its name and request id) the caller has built.
func (r Release) call(latch string) (*Script, []string, []string) {
	switch r.Mode {
	case ModeRead:
		return ReleaseReadScript,
			[]string{r.Name, RWChannelName(r.Name), ReadTimeoutPrefix(r.Name, r.Field), rwKeyPrefix(r.Name), latch},
			[]string{UnlockMessage, r.Field, r.Publish, ms(r.LatchTTL), ms(r.Lease)}
	case ModeWrite:
		return ReleaseWriteScript, []string{r.Name, RWChannelName(r.Name), latch},
			[]string{ReadUnlockMessage, ms(r.Lease), r.Field, r.Publish, ms(r.LatchTTL)}
	case ModeFair:
		return r.callFair(latch)
	}
	return ReleaseScript, []string{r.Name, ChannelName(r.Name), latch},
		[]string{UnlockMessage, ms(r.Lease), r.Field, r.Publish, ms(r.LatchTTL)}
}

// ForceUnlockRW deletes the read-write lock name whoever holds it, when
// its hash is in mode ("read", "write", or "" for either), and then
// publishes msg on its channel (with publish; "" publishes nothing). It
// reports whether the lock was deleted (true and ErrUnannounced: deleted,
// the message refused). Readers' timeout keys are left to expire, as
// Redisson leaves them.
func ForceUnlockRW(ctx context.Context, c rueidis.Client, name, mode, msg, publish string) (bool, error) {
	res := ForceUnlockRWScript.Run(ctx, c, []string{name, RWChannelName(name)}, []string{msg, publish, mode})
	return forced(res)
}

// IsLockedRW reports whether the half m (ModeRead or ModeWrite) of the
// read-write lock name is locked, as Redisson's isLocked() of that half
// answers: the write half while a writer holds it; the read half while
// readers hold it, the writer's own reads included.
func IsLockedRW(ctx context.Context, c rueidis.Client, name string, m Mode) (bool, error) {
	res := isLockedRWScript.Run(ctx, c, []string{name}, []string{m.String()})
	return isOne(res, "is locked")
}
