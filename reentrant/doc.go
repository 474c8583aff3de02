// Package reentrant is the wire protocol of a Redisson-compatible reentrant
// lock on ONE Redis master: the key and channel names, the Lua scripts
// (a counted acquire, optionally fenced; the settlement of a request whose
// answer was lost; release with the unlock latch; batched renew; force
// unlock; raising a fencing token) and typed results. It is what you need
// to compose your own lock on rueidis; package lock composes it into a
// Client with owners, waiting and a watchdog, and most users never import
// this package.
//
// The data layout is Redisson's RLock, so a Java service using Redisson
// and a Go service using rlock exclude each other, and wake each other, on
// the same lock name:
//
//   - the lock is a hash at the lock name; its field is the holder
//     "<client uuid>:<owner id>" and its value the hold count;
//   - waiters listen on the channel "redisson_lock__channel:{name}" for the
//     message "0" (one unlock) or "1" (read-write unlock, wake all);
//   - a release writes an unlock latch "redisson_unlock_latch:{name}:<hex>"
//     so that a retried release returns the first answer instead of
//     decrementing the hold count twice; rlock's acquire and settle use a
//     key of the same form as a request's record.
//
// Redisson's read-write lock (Mode, ModeRead and ModeWrite) keeps its
// layout too: a 'mode' field in the same hash, reader fields with one
// timeout key per hold (ReadTimeoutPrefix), writer fields ending in
// ":write", and the channel RWChannelName.
//
// The scripts are rlock's own: they keep that layout, answer per request
// (an AcquireRequest sent again after a lost reply is answered, not
// applied twice) and never shorten a key's expiry. docs/redisson.md lists
// how they differ from Redisson's.
package reentrant
