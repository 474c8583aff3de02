package lock

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/internal/oneline"
	"github.com/rlock-go/rlock/observe"
	"github.com/rlock-go/rlock/reentrant"
)

// Sentinel errors. Test for them with errors.Is: returned errors wrap them
// with detail, and keep the caller's context error beside them. Every
// error prints on one line, prefixed "rlock: " once.
var (
	// ErrNotAcquired is returned by Lock and TryLock when the lock was not
	// acquired: TryLock's wait ran out, or the context ended first (the
	// context's error is joined to it).
	ErrNotAcquired = errors.New("rlock: lock not acquired")
	// ErrNotHeld is returned by Held.Unlock when the hold was already
	// unlocked, and by HoldCount when the context carries no owner.
	ErrNotHeld = errors.New("rlock: lock not held by this owner")
	// ErrLockLost is the cause of a Held's context when its lease was lost
	// (a *LostError says where and why), and is returned by that Held's
	// Unlock.
	ErrLockLost = errors.New("rlock: lock lost")
	// ErrClosed is returned by every call on a closed Client, and is the
	// cause of the contexts of locks still held when it closed.
	ErrClosed = errors.New("rlock: client closed")
	// ErrInvalid is returned by every function and method for a bad
	// argument or Config, and by every method of a nil or zero Client,
	// Mutex or Held: nothing is sent to Redis. New also returns it when
	// the server refuses the Config (a DB out of its range), and every
	// call when a standalone Client's master answers MOVED (it is a
	// cluster node: set Config.Cluster).
	ErrInvalid = errors.New("rlock: invalid argument")
	// ErrUnavailable is returned by every call that talks to Redis when
	// Redis could not be reached or did not answer in time, or refused
	// for a state that passes (LOADING, BUSY running a script, READONLY or
	// MASTERDOWN during a failover, TRYAGAIN, CLUSTERDOWN, OOM at
	// maxmemory). The operation's outcome may be unknown: an acquire whose
	// reply was lost may have taken the lock, which the Client then
	// settles. A blocking Lock rides it out until its context ends.
	ErrUnavailable = errors.New("rlock: redis unavailable")
	// ErrAuth is returned by New, and by any call, when Redis refused the
	// credentials or the ACL user's permissions (WRONGPASS, NOAUTH,
	// NOPERM: a key, a script or the unlock channel it may not use).
	// Nothing was changed in Redis.
	ErrAuth = errors.New("rlock: redis authentication failed")
	// ErrNotLock is returned by every call on a lock name when the key
	// under that name is not a lock: another kind of value (WRONGTYPE), a
	// hash whose hold count is not an integer, or an answer outside the
	// lock protocol (another program wrote the key). Nothing was changed
	// in Redis; the key is left as it is.
	ErrNotLock = errors.New("rlock: the key is not a lock")
	// ErrReentered is returned, joined with ErrNotAcquired, by Lock and
	// TryLock of a NonReentrantMutex whose owner already holds the lock:
	// Redisson's NON_REENTRANT_REACQUIRE (an IllegalMonitorStateException
	// in Java). Nothing is sent to Redis; the hold is unchanged.
	ErrReentered = errors.New("rlock: lock is not reentrant and its owner already holds it")
)

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// MasterError is a failure of one operation on one Redis master. It
// matches the sentinel that classifies it (ErrUnavailable, ErrAuth,
// ErrNotLock, ErrInvalid) and wraps the cause: the server's reply or
// the network error.
type MasterError struct {
	// Addr is the master that answered, host:port: in a cluster, the
	// slot's owner; with Sentinel, the master of the moment, or before
	// one is known (New), `master set "name" (sentinels host:port, ...)`.
	Addr string
	Op   string // acquire, release, renew, ...
	Err  error  // the cause
	kind error  // the sentinel, if any
}

func (e *MasterError) Error() string {
	if e.kind != nil {
		return oneLine(fmt.Sprintf("rlock: %s on %s: %v: %v", e.Op, e.Addr, e.kind, e.Err))
	}
	return oneLine(fmt.Sprintf("rlock: %s on %s: %v", e.Op, e.Addr, e.Err))
}

// Unwrap returns the cause, joined with the classifying sentinel if any:
// errors.Is matches both.
func (e *MasterError) Unwrap() error {
	if e.kind != nil {
		return join(e.kind, e.Err)
	}
	return e.Err
}

// inFlight is why a request failed when the caller's ctx ended before its
// answer came: its outcome is unknown (ErrUnavailable: recorded and
// settled in the background), and the ctx's end, not the master, cut it.
// err is the ctx's error, cause its cause (context.Cause). note, when not
// empty, says what became of the request: by default (cutByCaller) that
// its outcome is settled in the background; a ForceUnlock's says the lock
// may or may not have been deleted; a query's, nothing.
type inFlight struct {
	err, cause error
	note       string
}

// settledNote is an inFlight's note for a request that is settled in the
// background.
const settledNote = "the request's outcome is settled in the background"

func (e inFlight) Error() string {
	s := "the call's ctx ended before its answer came"
	if e.note != "" {
		s += " (" + e.note + ")"
	}
	return s + ": " + e.cause.Error()
}

func (e inFlight) Unwrap() []error {
	if e.cause == e.err {
		return []error{ErrUnavailable, e.err}
	}
	return []error{ErrUnavailable, e.err, e.cause}
}

// masterErr classifies err from an operation on addr.
func masterErr(addr, op string, err error) error {
	if err == nil {
		return nil
	}
	if me, ok := err.(*MasterError); ok {
		return me
	}
	kind := classify(err)
	if kind == ErrUnavailable && isReadOnly(err) {
		err = fmt.Errorf("%w (the server is a replica: a failover is under way, or Addrs names a replica instead of the master)", err)
	}
	return &MasterError{Addr: addr, Op: op, Err: err, kind: kind}
}

// Redis error replies, by the sentinel a caller acts on. Matched on the
// reply's first word (its code) or, for script errors that carry no
// code of their own, on the text Redis gives.
var (
	authCodes      = []string{"WRONGPASS", "NOAUTH", "NOPERM"}
	transientCodes = []string{"LOADING", "BUSY", "READONLY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "OOM"}
	invalidCodes   = []string{"MOVED", "ASK"}
)

// classify returns the sentinel for err, an error from rueidis or from a
// script's reply: nil for an error no sentinel describes.
func classify(err error) error {
	switch {
	case errors.Is(err, ErrUnavailable), errors.Is(err, ErrAuth), errors.Is(err, ErrNotLock), errors.Is(err, ErrInvalid):
		return nil // already classified
	case errors.Is(err, reentrant.ErrUnexpectedReply):
		return ErrNotLock
	}
	if _, ok := rueidis.IsRedisErr(err); !ok {
		return ErrUnavailable // network, timeout, closed connection
	}
	return classifyReply(err.Error())
}

// classifyReply classifies a Redis error reply by its text.
func classifyReply(s string) error {
	code, _, _ := strings.Cut(s, " ")
	switch {
	case slices.Contains(authCodes, code), strings.Contains(s, "can't publish to the channel"),
		strings.Contains(s, "no permissions to"), strings.Contains(s, "The user executing the script can't"):
		return ErrAuth
	case slices.Contains(transientCodes, code), strings.Contains(s, "command not allowed when used memory"),
		strings.Contains(s, "You can't write against a read only replica"):
		return ErrUnavailable
	case code == "WRONGTYPE", strings.Contains(s, "not an integer"), strings.Contains(s, "WRONGTYPE"):
		return ErrNotLock
	case slices.Contains(invalidCodes, code), strings.Contains(s, "DB index is out of range"):
		return ErrInvalid
	}
	return nil
}

var (
	oneLine = oneline.Tidy
	join    = oneline.Join
	wrapf   = oneline.Wrapf
)

// LostError is the cause of a Held's context when the lock was lost.
// errors.Is(err, ErrLockLost) holds for it.
type LostError struct {
	Name   string           // the lock name
	Addr   string           // the master where it was lost
	Kind   observe.LossKind // what kind of loss
	Reason string           // what showed the loss, in words
	Err    error            // the error behind it, if any (failed renewals)
}

func (e *LostError) Error() string {
	s := fmt.Sprintf("rlock: lock %q lost on %s: %s", e.Name, e.Addr, e.Reason)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return oneLine(s)
}

// Unwrap returns ErrLockLost and the error behind the loss.
func (e *LostError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrLockLost, e.Err}
	}
	return []error{ErrLockLost}
}
