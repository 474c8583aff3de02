package reentrant

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/rueidis"
)

// AcquireStatus is the answer of an AcquireRequest.
type AcquireStatus int

const (
	// Busy: another holder field holds the lock; nothing changed.
	Busy AcquireStatus = iota
	// Acquired: the field holds Count holds, this request's included
	// (it ran now, or earlier and its reply was lost).
	Acquired
	// Fewer: the field has fewer holds (Count) than the client knew of:
	// some were lost (the key expired, was deleted, or another took it).
	// Nothing changed.
	Fewer
	// Cancelled: an Undo of this request ran first; nothing changed and
	// nothing ever will.
	Cancelled
)

func (s AcquireStatus) String() string {
	switch s {
	case Acquired:
		return "acquired"
	case Fewer:
		return "fewer holds than known"
	case Cancelled:
		return "cancelled"
	}
	return "busy"
}

// AcquireRequest is one acquisition, identified across its retries by
// RequestID: sent again after a lost reply, it is answered, not applied
// twice. Known is the number of holds the client knows the field has
// (0 for a first acquisition): the script tells its own earlier run
// (Known+1 holds) from a fresh one, and notices holds lost meanwhile.
// The client must not send two requests of one field at once.
type AcquireRequest struct {
	Name  string
	Field string
	// Lease is the key's expiry after the acquire: positive (Run refuses
	// anything else, which would delete the key or leave it for ever).
	Lease     time.Duration
	Known     int
	RequestID string // NewRequestID(), kept across retries
	Fenced    bool   // take a fencing token (Redisson's RFencedLock counter); ModeLock only
	Mode      Mode   // the lock kind (ModeLock: Redisson's RLock)
	Sync      Sync   // wait for replicas (see Sync); Acked in the result
	// Wait and Queue are ModeFair's: the waiter's timeout in the queue
	// (Redisson's threadWaitTime), and whether to join the queue when the
	// lock cannot be had.
	Wait  time.Duration
	Queue bool
	// KeepPlace is ModeFair's too: a waiter already queued that asks again
	// at most KeepPlace after each of its attempts (or when woken) keeps its
	// place however long the hold ahead lasts: each attempt raises its
	// timeout to now + min(the wait it is told, KeepPlace) + its position ×
	// Wait (safety-3 R3-5). 0 keeps Redisson's rule, a timeout set once when
	// the waiter joins, after which a live waiter is pruned like a dead one.
	KeepPlace time.Duration
}

// AcquireResult is the answer to an AcquireRequest.
type AcquireResult struct {
	Status AcquireStatus
	// Count is the field's holds after the request (Acquired, Fewer).
	Count int
	// TTL is the holder's remaining lease when Busy; negative when the
	// key has no expiry.
	TTL time.Duration
	// Token is the fencing token of a Fenced acquisition.
	Token uint64
	// Acked is how many replicas acknowledged the request (Sync); -1
	// when none was asked or the answer is not known.
	Acked int
	// Position is a fair lock's waiter's place in the queue when Busy (1
	// the head; 0 not queued). TTL is then, when the lock is free, the
	// time until the head's timeout.
	Position int
}

// Run sends the request once (with r.Sync, followed by WAIT).
func (r AcquireRequest) Run(ctx context.Context, c rueidis.Client) (AcquireResult, error) {
	if r.Lease <= 0 {
		return AcquireResult{}, fmt.Errorf("rlock: acquire of %q with a lease of %v: a lease must be positive", r.Name, r.Lease)
	}
	fenced := "0"
	if r.Fenced {
		fenced = "1"
	}
	sc, keys, args := r.call(fenced)
	res, acked := r.Sync.runSynced(ctx, c, sc, keys, args, nil)
	out, err := parseAcquire(res)
	out.Acked = acked
	return out, err
}

func parseAcquire(res rueidis.RedisResult) (AcquireResult, error) {
	if err := res.Error(); err != nil {
		return AcquireResult{}, err
	}
	if tok, err := res.AsInt64(); err == nil {
		// The counted acquire's short answer: a free lock's first hold.
		return AcquireResult{Status: Acquired, Count: 1, Token: uint64(tok)}, nil
	}
	vals, err := res.AsIntSlice()
	if err != nil || len(vals) != 3 {
		return AcquireResult{}, fmt.Errorf("%w: acquire: %v (%d values)", ErrUnexpectedReply, err, len(vals))
	}
	switch vals[0] {
	case 0:
		return AcquireResult{Status: Busy, TTL: time.Duration(vals[1]) * time.Millisecond, Position: int(vals[2])}, nil
	case 1:
		return AcquireResult{Status: Acquired, Count: int(vals[1]), Token: uint64(vals[2])}, nil
	case 2:
		return AcquireResult{Status: Fewer, Count: int(vals[1])}, nil
	case 3:
		return AcquireResult{Status: Cancelled}, nil
	}
	return AcquireResult{}, fmt.Errorf("%w: acquire status %d", ErrUnexpectedReply, vals[0])
}

// Settle settles a request of Field whose answer was lost, identified by
// its RequestID (an AcquireRequest or a Release): afterwards it can no
// longer change anything (its record exists: an acquire finds it and does
// nothing, a release answers Fenced), and the answer tells what it did.
// The record lives RecordTTL, which must outlast any delay of the request
// in the network.
type Settle struct {
	Name      string
	Field     string
	RequestID string
	RecordTTL time.Duration
}

// Settled is the answer of a Settle.
type Settled struct {
	// Release is the release's own answer when the request was a release
	// that ran (StillHeld or Released); Fenced when it had not run as a
	// release (an acquire, or a release that now never will).
	Release ReleaseResult
	// Count is the field's holds now, final for the request settled.
	Count int
}

// Run sends the settlement once; it may be sent again (it is idempotent).
func (s Settle) Run(ctx context.Context, c rueidis.Client) (Settled, error) {
	res := SettleScript.Run(ctx, c,
		[]string{s.Name, LatchName(s.Name, s.RequestID)},
		[]string{s.Field, ms(s.RecordTTL)})
	if err := res.Error(); err != nil {
		return Settled{}, err
	}
	vals, err := res.AsIntSlice()
	if err != nil || len(vals) != 2 {
		return Settled{}, fmt.Errorf("%w: settle: %v (%d values)", ErrUnexpectedReply, err, len(vals))
	}
	out := Settled{Release: Fenced, Count: int(vals[1])}
	switch vals[0] {
	case 0:
		out.Release = StillHeld
	case 1:
		out.Release = Released
	}
	return out, nil
}
