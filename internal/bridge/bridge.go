// Package bridge carries what package multilock needs from package lock
// without making it part of lock's public surface: lock fills these in
// when it is initialised.
package bridge

// HeldBy reports whether the Client of the *lock.Mutex m holds m's lock
// for owner now (a live hold, as far as that Client knows; no network).
var HeldBy func(m any, owner uint64) bool
