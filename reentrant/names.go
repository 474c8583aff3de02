package reentrant

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"strconv"
	"strings"
	"sync/atomic"
)

// Messages published on a lock's channel. Redisson parses them as numbers:
// nothing else may be published there.
const (
	// UnlockMessage is published when a lock is released: it wakes one waiter.
	UnlockMessage = "0"
	// ReadUnlockMessage is published by Redisson's read-write lock when every
	// waiter may proceed: it wakes all of them.
	ReadUnlockMessage = "1"
)

// Publish commands for ReleaseArgs and ForceUnlock: which one a deployment
// uses decides whether waiters listen with SUBSCRIBE or SSUBSCRIBE.
const (
	Publish        = "PUBLISH"
	ShardedPublish = "SPUBLISH"
)

// prefixName derives a companion key from a lock name the way Redisson
// does: "prefix:{name}", or "prefix:name" when the name already holds a
// '{' (its own hash tag keeps the companion in the lock's cluster slot).
func prefixName(prefix, name string) string {
	if strings.Contains(name, "{") {
		return prefix + ":" + name
	}
	return prefix + ":{" + name + "}"
}

// ChannelName is the pub/sub channel on which a lock's releases are announced.
func ChannelName(name string) string { return prefixName("redisson_lock__channel", name) }

// TokenName is the counter key of Redisson's fenced lock for name.
func TokenName(name string) string { return prefixName("redisson_lock_token", name) }

// LatchName is the unlock latch key of one release request.
func LatchName(name, requestID string) string {
	if strings.Contains(name, "{") { // one allocation either way
		return "redisson_unlock_latch:" + name + ":" + requestID
	}
	return "redisson_unlock_latch:{" + name + "}:" + requestID
}

// NewRequestID returns a request ID of 32 lowercase hex characters: one
// per request (an acquire, an Unlock call), reused by its retries. The
// first 16 are drawn at random once per process and the last 16 count the
// process's requests, so that an ID takes no read of the system's random
// source on the path every Lock and Unlock takes. No two calls of one
// process return the same ID; two processes do only if they drew the same
// 64 bits (or one is a snapshot of the other, restored or cloned while
// running). A prefix of an ID is not unique: take a name's unique part
// from the whole ID.
func NewRequestID() string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], requestPrefix)
	binary.BigEndian.PutUint64(b[8:], requestSeq.Add(1))
	return hex.EncodeToString(b[:])
}

// requestPrefix and requestSeq make NewRequestID's IDs.
var (
	requestPrefix = func() uint64 {
		var b [8]byte
		_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error
		return binary.BigEndian.Uint64(b[:])
	}()
	requestSeq atomic.Uint64
)

// NewClientID returns a random version-4 UUID in Redisson's 36-character
// lowercase form; one per client process connection pool.
func NewClientID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// Field is the hash field naming one holder: "<client id>:<owner id>".
func Field(clientID string, owner uint64) string {
	return clientID + ":" + strconv.FormatUint(owner, 10)
}
