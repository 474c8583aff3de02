package lock

import (
	"time"

	"github.com/rlock-go/rlock/reentrant"
)

// kind is a Mutex's protocol, one of Redisson's lock kinds: which scripts
// acquire and release it, where its releases are announced and how its
// waiters wait. A ledger's releases follow the kind of its field's last
// acquisition (read under the turn).
type kind uint8

const (
	kindPlain kind = iota // getLock, getFencedLock, getNonReentrantLock
	kindSpin              // getSpinLock: the plain scripts; releases publish nothing
	kindRead              // getReadWriteLock(name).readLock(): rwlock.go
	kindWrite             // getReadWriteLock(name).writeLock(): rwlock.go
	kindFair              // getFairLock: a queue in Redis; releases wake its head (fair.go)
)

// mode is the wire protocol of kind k: its scripts and keys.
func (k kind) mode() reentrant.Mode {
	switch k {
	case kindRead:
		return reentrant.ModeRead
	case kindWrite:
		return reentrant.ModeWrite
	case kindFair:
		return reentrant.ModeFair
	}
	return reentrant.ModeLock
}

// channel is the channel on which releases of the lock name of kind k
// are announced and its waiters listen.
func (k kind) channel(name string) string { return k.mode().Channel(name) }

// field is owner's holder field in a lock of kind k: a writer's ends in
// ":write".
func (c *Client) field(k kind, owner uint64) string {
	f := reentrant.Field(c.id, owner)
	if k == kindWrite {
		return reentrant.WriterField(f)
	}
	return f
}

// publishFor returns the publish command of a release of a hold taken by
// a Mutex of kind k: none for a spin lock.
func (c *Client) publishFor(k kind) string {
	if k == kindSpin {
		return ""
	}
	return c.publish
}

// newRelease is a release of one of l's holds, by the kind of l's last
// acquisition; the caller holds l's turn.
func (c *Client) newRelease(l *ledger, lease time.Duration) reentrant.Release {
	return reentrant.Release{Name: l.name, Field: l.field, Lease: lease,
		RequestID: reentrant.NewRequestID(), Publish: c.publishFor(l.kind), LatchTTL: c.recordTTL(), Mode: l.kind.mode()}
}
