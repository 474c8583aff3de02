package lock

import (
	"errors"
	"fmt"
	"strings"

	"github.com/redis/rueidis"
)

// Sentinel errors. Test for them with errors.Is: returned errors wrap them
// with detail, and keep the caller's context error beside them.
var (
	// ErrNotAcquired is returned by Lock and TryLock when the lock was not
	// acquired: TryLock's wait ran out, or the context ended first (the
	// context's error is joined to it).
	ErrNotAcquired = errors.New("rlock: lock not acquired")
	// ErrNotHeld is returned by Unlock when the caller holds no hold to
	// release: another owner's lock, or a Held already unlocked.
	ErrNotHeld = errors.New("rlock: lock not held by this owner")
	// ErrLockLost is the cause of a Held's context when its lease was lost
	// (a *LostError says where and why), and is returned by that Held's
	// Unlock.
	ErrLockLost = errors.New("rlock: lock lost")
	// ErrQuorum is returned by package multilock when too few masters
	// granted the lock in time.
	ErrQuorum = errors.New("rlock: quorum not reached")
	// ErrClosed is returned by every call on a closed Client, and is the
	// cause of the contexts of locks still held when it closed.
	ErrClosed = errors.New("rlock: client closed")
	// ErrInvalid is returned for a bad argument or Config: nothing is
	// sent to Redis.
	ErrInvalid = errors.New("rlock: invalid argument")
	// ErrUnavailable is returned when Redis could not be reached or did not
	// answer in time. The operation's outcome may be unknown: an acquire
	// whose reply was lost may have taken the lock, which then expires
	// after its lease.
	ErrUnavailable = errors.New("rlock: redis unavailable")
	// ErrAuth is returned by New when Redis refused the credentials.
	ErrAuth = errors.New("rlock: redis authentication failed")
)

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// MasterError is a failure of one operation on one Redis master. It wraps
// ErrUnavailable for network failures and timeouts, and the server's own
// error reply otherwise.
type MasterError struct {
	Addr string // the master, host:port
	Op   string // acquire, release, renew, ...
	Err  error
}

func (e *MasterError) Error() string {
	return fmt.Sprintf("rlock: %s on %s: %v", e.Op, e.Addr, e.Err)
}

// Unwrap returns the underlying errors.
func (e *MasterError) Unwrap() error { return e.Err }

// masterErr classifies err from an operation on addr.
func masterErr(addr, op string, err error) error {
	if err == nil {
		return nil
	}
	if isAuthErr(err) {
		err = errors.Join(ErrAuth, err)
	} else if _, ok := rueidis.IsRedisErr(err); !ok {
		err = errors.Join(ErrUnavailable, err)
	}
	return &MasterError{Addr: addr, Op: op, Err: err}
}

func isAuthErr(err error) bool {
	s := err.Error()
	return strings.Contains(s, "WRONGPASS") || strings.Contains(s, "NOAUTH") || strings.Contains(s, "NOPERM")
}

// LossKind classifies a loss, for LostError.Kind.
type LossKind string

// Kinds of loss.
const (
	// LossNotHeld: Redis said the lock was no longer ours (the key
	// expired, was deleted or flushed, or another holder had it).
	LossNotHeld LossKind = "not_held"
	// LossLeaseExpired: an explicit Lease ran out.
	LossLeaseExpired LossKind = "lease_expired"
	// LossRenewFailed: renewals failed until the lease must have run out.
	LossRenewFailed LossKind = "renew_failed"
	// LossForceUnlocked: ForceUnlock by this Client.
	LossForceUnlocked LossKind = "force_unlocked"
	// LossQuorum: a multi-master lock kept fewer masters than its quorum.
	LossQuorum LossKind = "quorum_lost"
)

// LostError is the cause of a Held's context when the lock was lost.
// errors.Is(err, ErrLockLost) holds for it.
type LostError struct {
	Name   string   // the lock name
	Addr   string   // the master where it was lost
	Kind   LossKind // what kind of loss
	Reason string   // what showed the loss, in words
	Err    error    // the error behind it, if any (failed renewals)
}

func (e *LostError) Error() string {
	s := fmt.Sprintf("rlock: lock %q lost on %s: %s", e.Name, e.Addr, e.Reason)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns ErrLockLost and the error behind the loss.
func (e *LostError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrLockLost, e.Err}
	}
	return []error{ErrLockLost}
}
