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
	kindFair              // getFairLock: a queue in Redis; releases wake its head
)

// scripts returns the reentrant kind of k's scripts.
func (k kind) scripts() reentrant.Kind {
	if k == kindFair {
		return reentrant.Fair
	}
	return reentrant.Plain
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
		RequestID: reentrant.NewRequestID(), Publish: c.publishFor(l.kind), LatchTTL: c.recordTTL(), Kind: l.kind.scripts()}
}
