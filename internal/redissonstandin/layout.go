package redissonstandin

import (
	"strconv"
	"strings"
	"time"
)

// This file holds the literal facts of Redisson's layout, read from its
// source, for raw-layout tests. Each says the tag it comes from; "both"
// means redisson-3.52.0 and redisson-4.7.0 agree. Paths are under
// redisson/src/main/java/org/redisson/.

// The tags read.
const (
	// Tag3 is the 3.x tag read.
	Tag3 = "redisson-3.52.0"
	// Tag4 is the 4.x tag read (the newest 4.x in the mirror).
	Tag4 = "redisson-4.7.0"
	// NonReentrantSince is the first tag with RedissonNonReentrantLock.java.
	NonReentrantSince = "redisson-4.4.0"
	// NonReentrantFairSince is the first tag with RedissonNonReentrantFairLock.java
	// (not stood in for here).
	NonReentrantFairSince = "redisson-4.5.0"
	// ReadRenewPerNameSince is the first tag whose ReadLockTask renews each
	// holder's own timeout keys (readRenew4); 4.0.0 to 4.3.x renew every
	// reader's keys with the loop-variable bug of 3.52.0 fixed.
	ReadRenewPerNameSince = "redisson-4.4.0"
)

// Messages, pubsub/LockPubSub.java (both). Published as Redis integers'
// decimal text; Java parses them as Long.
const (
	// UnlockMessage is LockPubSub.UNLOCK_MESSAGE: wakes one waiter. Published
	// by the plain, fair and non-reentrant locks' unlock and force-unlock, and
	// by the READ lock's unlock and force-unlock.
	UnlockMessage = "0"
	// ReadUnlockMessage is LockPubSub.READ_UNLOCK_MESSAGE: wakes all waiters.
	// Published by the WRITE lock's unlock and force-unlock.
	ReadUnlockMessage = "1"
)

// Config defaults, config/Config.java and config/BaseConfig.java (both).
const (
	// LockWatchdogTimeout is Config.lockWatchdogTimeout: 30 * 1000 ms.
	LockWatchdogTimeout = 30 * time.Second
	// RenewInterval is RenewalTask's period: lockWatchdogTimeout / 3.
	RenewInterval = LockWatchdogTimeout / 3
	// LockWatchdogBatchSize is Config.lockWatchdogBatchSize: names per renewal script.
	LockWatchdogBatchSize = 100
	// FairLockWaitTimeout is Config.fairLockWaitTimeout (5 * 60000 ms), the fair
	// lock's threadWaitTime when the caller gives no wait time.
	FairLockWaitTimeout = 5 * time.Minute
	// DefaultLatchTimeout is the largest unlock-latch PX Redisson's defaults
	// give: (timeout 3000 + EqualJitterDelay(1000, 2000).calcDelay(4) in
	// [1000, 2000]) * retryAttempts 4 = 16000..20000 ms.
	DefaultLatchTimeout = 20 * time.Second
)

// Read-write lock hash layout, RedissonReadLock.java and RedissonWriteLock.java (both).
const (
	// ModeField is the hash field holding the mode.
	ModeField = "mode"
	// ModeRead is the mode while only readers hold (and after the last writer
	// leaves while readers remain).
	ModeRead = "read"
	// ModeWrite is the mode set by a writer on a free lock. It stays "write"
	// while the writer's thread also holds read locks.
	ModeWrite = "write"
	// WriteSuffix ends the writer's field: "<id>:<threadId>:write".
	WriteSuffix = ":write"
	// TimeoutSuffix ends a reader's timeout-key prefix: "{name}:<id>:<threadId>:rwlock_timeout".
	TimeoutSuffix = ":rwlock_timeout"
)

// Non-reentrant lock, RedissonNonReentrantLock.java (4.4.0 to 4.7.0).
const (
	// ReentryError is REENTRY_ERR, the error reply's text on a re-acquire by
	// the holder (redis.error_reply(ARGV[3])); Java throws IllegalMonitorStateException.
	ReentryError = "NON_REENTRANT_REACQUIRE"
)

// Spin lock back-off defaults, api/LockOptions.java (both): LockOptions.defaults()
// is an ExponentialBackOff.
const (
	// SpinInitialDelay is ExponentialBackOff.initialDelay.
	SpinInitialDelay = 1 * time.Millisecond
	// SpinMaxDelay is ExponentialBackOff.maxDelay.
	SpinMaxDelay = 128 * time.Millisecond
	// SpinMultiplier is ExponentialBackOff.multiplier.
	SpinMultiplier = 2
	// SpinConstantDelay is ConstantBackOff.delay, the other policy (not the default).
	SpinConstantDelay = 64 * time.Millisecond
)

// PrefixName is RedissonObject.prefixName: "prefix:{name}", or
// "prefix:name" when the name already has a '{' (both).
func PrefixName(prefix, name string) string {
	if strings.Contains(name, "{") {
		return prefix + ":" + name
	}
	return prefix + ":{" + name + "}"
}

// SuffixName is RedissonObject.suffixName: "{name}:suffix", or
// "name:suffix" when the name already has a '{' (both).
func SuffixName(name, suffix string) string {
	if strings.Contains(name, "{") {
		return name + ":" + suffix
	}
	return "{" + name + "}:" + suffix
}

// Field is RedissonBaseLock.getLockName: "<id>:<threadId>" (both).
func Field(id string, thread uint64) string { return id + ":" + strconv.FormatUint(thread, 10) }

// WriteField is RedissonWriteLock.getLockName: "<id>:<threadId>:write" (both).
func WriteField(id string, thread uint64) string { return Field(id, thread) + WriteSuffix }

// LockChannel is RedissonLock.getChannelName: "redisson_lock__channel:{name}"
// (two underscores; both). The plain and non-reentrant locks publish on
// it; the fair lock's waiter channels start with it; the spin lock
// publishes nothing.
func LockChannel(name string) string { return PrefixName("redisson_lock__channel", name) }

// LatchName is RedissonBaseLock.getUnlockLatchName: "redisson_unlock_latch:{name}:<requestId>" (both).
func LatchName(name, requestID string) string {
	return PrefixName("redisson_unlock_latch", name) + ":" + requestID
}

// FairQueueName is the fair lock's waiter list: "redisson_lock_queue:{name}" (both).
func FairQueueName(name string) string { return PrefixName("redisson_lock_queue", name) }

// FairTimeoutName is the fair lock's waiter zset: "redisson_lock_timeout:{name}" (both).
func FairTimeoutName(name string) string { return PrefixName("redisson_lock_timeout", name) }

// FairWaiterChannel is the channel a fair-lock waiter subscribes to, and the
// one unlock publishes on for the queue's head: LockChannel(name) + ":" +
// field (both).
func FairWaiterChannel(name, field string) string { return LockChannel(name) + ":" + field }

// RWChannel is RedissonReadLock/RedissonWriteLock.getChannelName:
// "redisson_rwlock:{name}" (both): one channel for readers and writers.
func RWChannel(name string) string { return PrefixName("redisson_rwlock", name) }

// ReadTimeoutPrefix is RedissonReadLock.getReadWriteTimeoutNamePrefix:
// "{name}:<id>:<threadId>:rwlock_timeout" (both).
func ReadTimeoutPrefix(name, field string) string { return SuffixName(name, field) + TimeoutSuffix }

// ReadTimeoutKey is the timeout key of a reader's n-th hold (n from 1):
// ReadTimeoutPrefix + ":" + n, a string "1" with the hold's lease as PTTL (both).
func ReadTimeoutKey(name, field string, n int) string {
	return ReadTimeoutPrefix(name, field) + ":" + strconv.Itoa(n)
}

// ReadKeyPrefix is RedissonReadLock.getKeyPrefix: the timeout prefix cut
// before ":" + field, i.e. "{name}" ("name" when it has a '{'); KEYS[4] of
// the read unlock and the second key of each renewal pair (both).
func ReadKeyPrefix(name string) string {
	if strings.Contains(name, "{") {
		return name
	}
	return "{" + name + "}"
}

// TTL rules, as the scripts apply them (all both). Times in milliseconds.

// ReadAcquirePTTL is the hash's PTTL after a read acquire with lease L that
// finds mode read (or the caller's own write): max(current PTTL, L). A
// first read acquire (no mode) sets exactly L.
func ReadAcquirePTTL(current, lease int64) int64 { return max(current, lease) }

// WriteReentryPTTL is the hash's PTTL after the writer re-enters with lease
// L: current PTTL + L (it adds, unlike every other kind).
func WriteReentryPTTL(current, lease int64) int64 { return current + lease }

// ReadReleasePTTL is the hash's PTTL after a read unlock that leaves other
// holds: the largest PTTL among the remaining timeout keys of every reader
// field (keys "{name}:<field>:rwlock_timeout:<1..count>"), when > 0. When
// none is > 0 and the mode is write, the PTTL is left as it was (and the
// unlock answers 0); in mode read the hash is deleted and "0" published.
func ReadReleasePTTL(remainingTimeoutPTTLs []int64) int64 {
	m := int64(-3)
	for _, p := range remainingTimeoutPTTLs {
		m = max(m, p)
	}
	return m
}

// WriteReleaseKeepsPTTL: the last write unlock with readers left sets mode
// read, deletes nothing else, publishes NOTHING, answers 1, and leaves the
// hash's PTTL as it was (no PEXPIRE).
const WriteReleaseKeepsPTTL = true

// FairWaiterTimeout is the score a new fair-lock waiter gets in the timeout
// zset: base + wait + now, where base is (the previous last waiter's score
// - now) when the queue has another last waiter with a score, else the
// lock hash's PTTL. The acquire returns base as the TTL. A waiter already
// in the zset gets max(0, PTTL of the hash) and keeps its score.
func FairWaiterTimeout(base, wait, now int64) int64 { return base + wait + now }

// FairAcquireDecrement: on acquire, every remaining waiter's score drops by
// the acquirer's wait (ARGV wait); on cancel (acquireFailedAsync) the
// waiters behind the leaver drop by the wait given there. A waiter whose
// score is <= now when it reaches the head is pruned by the next script.
const FairAcquireDecrement = true

// ScriptSHA1 is the SHA1 of each script's text, computed from the Java
// string literals at the tags (EVALSHA with Redisson's script cache). Equal
// at both tags except the read-lock renewal.
var ScriptSHA1 = map[string]string{
	"RedissonLock.tryLockInnerAsync":             "149c5a8bf18676fd99e9e6e24923bd64d9b62f94",
	"RedissonLock.unlockInnerAsync":              "6866459238a13a701d42f4971f12d9f3a50e2442",
	"RedissonLock.forceUnlockAsync":              "605e338249a7a1d40df83b04f7658354f883b41b",
	"LockTask.renew":                             "6a3d31570dc6f4b0bd32bcdc8e75667747c6f635",
	"RedissonFairLock.tryLockInnerAsync/bool":    "d20501c26a30adf6fb0fe9883bbbcc497e6157e2",
	"RedissonFairLock.tryLockInnerAsync/long":    "8f6ed299ffd259f0539c20f89253998c0777ea75",
	"RedissonFairLock.acquireFailedAsync":        "d1ddef65ad80886b5d36e023c99930044ddd653a",
	"RedissonFairLock.unlockInnerAsync":          "367f80bd2e300e411fb0936d9b601e5bcb3fd4b6",
	"RedissonFairLock.forceUnlockAsync":          "71ed11d4e4818119ac560b3d670a7f08256afc46",
	"RedissonReadLock.tryLockInnerAsync":         "95553a6ff11176c18e71344e89d116b06fd6f753",
	"RedissonReadLock.unlockInnerAsync":          "6e1b10e11ac0a3ed8e902562ecd32ce01b553039",
	"RedissonReadLock.forceUnlockAsync":          "27dbe744e95c1d854a7f556cc6817030de2d0d01",
	"RedissonReadLock.isLocked":                  "8ad44f1ba014938c20da38206b6d496c85ec1aed",
	"ReadLockTask.renew@3.52.0":                  "1affef780a01e1406cb1968c62918f618d10d6a3",
	"ReadLockTask.renew@4.7.0":                   "38d2b478dfbe264ab67c221b7e4be62245f00ba0",
	"RedissonWriteLock.tryLockInnerAsync":        "6306ba3bf1f563b284bed52d305fce615c6664d9",
	"RedissonWriteLock.unlockInnerAsync":         "21f5fb0f8ddfa9be5c3e0c9757c128796add75c6",
	"RedissonWriteLock.forceUnlockAsync":         "2e2cb2a3b13e2e80e4236ef6a25beaf365dba608",
	"RedissonSpinLock.tryLockInnerAsync":         "dad0f8d619e548e04f21fb48d50be5034df3adae",
	"RedissonSpinLock.unlockInnerAsync":          "73ac2729af29ea9a975f95e8097f7ee9a74cce3d",
	"RedissonSpinLock.forceUnlockAsync":          "51b433c3cc9a6ca991b3aefec63d23490c246318",
	"RedissonNonReentrantLock.tryLockInnerAsync": "3daa7be6cf69d9309ad990442e83bf25094f9b22",
}
