package lock

import (
	"context"
	"sync/atomic"
)

// Owners. Go has no thread identity, so the holder of a lock is an owner
// token carried in the context: Lock with a context that carries the
// owner holding the lock re-enters it (Redisson's same-thread rule), and
// Held.Context() carries the owner of the hold. The token is a process-wide
// counter; with the Client's id it forms the holder field
// "<client id>:<owner>".

type ownerKey struct{}

var lastOwner atomic.Uint64

// WithOwner returns a context carrying a new owner, distinct from every
// other. Locks taken with it (or contexts derived from it) re-enter each
// other. Lock gives a context without an owner a new one itself, so
// WithOwner is needed only to share one owner across several calls that
// do not pass a Held's context along.
func WithOwner(ctx context.Context) context.Context {
	return context.WithValue(ctx, ownerKey{}, lastOwner.Add(1))
}

// OwnerFrom returns the owner carried by ctx, if any.
func OwnerFrom(ctx context.Context) (uint64, bool) {
	if ctx == nil {
		return 0, false
	}
	o, ok := ctx.Value(ownerKey{}).(uint64)
	return o, ok
}

// ownerOf returns ctx's owner, giving it a new one when it has none.
func ownerOf(ctx context.Context) (context.Context, uint64) {
	if o, ok := OwnerFrom(ctx); ok {
		return ctx, o
	}
	o := lastOwner.Add(1)
	return context.WithValue(ctx, ownerKey{}, o), o
}
