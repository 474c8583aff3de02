// Package reentrant is the wire protocol of a Redisson-compatible reentrant
// lock on ONE Redis master: the key and channel names, the Lua scripts
// (acquire, fenced acquire, release with the unlock latch, batched renew,
// force unlock) and typed results.
//
// Everything here is byte-for-byte what Redisson's RLock sends, so a Java
// service using Redisson and a Go service using rlock exclude each other,
// and wake each other, on the same lock name:
//
//   - the lock is a hash at the lock name; its field is the holder
//     "<client uuid>:<owner id>" and its value the hold count;
//   - waiters listen on the channel "redisson_lock__channel:{name}" for the
//     message "0" (one unlock) or "1" (read-write unlock, wake all);
//   - a release writes an unlock latch "redisson_unlock_latch:{name}:<hex>"
//     so that a retried release returns the first answer instead of
//     decrementing the hold count twice.
//
// Package lock composes these operations into a Client with owners,
// waiting and a watchdog; most users never import this package.
package reentrant
