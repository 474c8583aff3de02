// Package pubsub multiplexes every lock channel that one Client's waiters
// need onto ONE subscription connection per Redis master, and hands each
// unlock message to exactly one of a channel's ordinary waiters, and to
// every observer.
//
// A Hub owns that connection. Subscribe adds a Waiter to a channel,
// subscribing the connection when it is the channel's first waiter and
// returning only once the server has confirmed the subscription, so a
// release that happens after Subscribe returns is never missed. Close
// removes the waiter and unsubscribes when it was the last one.
//
// Delivery: the message "0" (one release) wakes ONE waiter of the channel,
// the one waiting longest that has no wake-up pending; "1" (a read-write
// unlock) wakes all of them. A wake-up that a waiter leaves without
// consuming is handed to the next waiter by Close; one it consumed but did
// not use (it left without the attempt) it hands on with Pass. So none is
// lost to a waiter that gave up. Observe adds an observer instead: every
// message wakes it, and it takes no wake-up from the channel's other
// waiters (package lock's queues, one per lock, and package multilock's
// waiters observe: names such as "x" and "{x}" share one channel, and a
// release of one must reach the waiters of both). When the connection
// breaks, every waiter is woken (a message may have been lost in the
// gap), and the Hub reconnects and re-subscribes the channels still
// needed, with backoff
// from 20ms, until it is closed; once the server confirms a channel's
// re-subscription its waiters are woken again, since a release between
// their retry and that confirmation reached nobody.
//
// A dedicated connection stays with the server it was made to, even when
// the client's master changes under it (rueidis's Sentinel client after a
// failover): Reconnect closes it on purpose, and the Hub reconnects at
// once to wherever the client's Dedicate now leads, with the same
// wake-ups as after a break.
//
// Close does no I/O: the Hub's background goroutine unsubscribes a
// channel left without waiters. It also settles a channel whose Subscribe
// was cut short by its ctx after SUBSCRIBE was sent (nothing stays
// subscribed), and one the server dropped on its own.
//
// The connection is a rueidis dedicated connection with pub/sub hooks
// (Dedicate + SetPubSubHooks), opened by the background goroutine (Dedicate
// takes no ctx: a Subscribe waits for the connection within its own),
// chosen over Receive because channels come
// and go as waiters do and because a broken connection must be observed:
// Receive re-subscribes silently, so a message lost during the gap would
// leave its waiter asleep until the lock's lease ran out.
//
// In a Redis Cluster, plain pub/sub needs one Hub (a PUBLISH reaches the
// subscribers of every node), but SSUBSCRIBE must reach the master owning
// the channel's slot: Shards keeps one Hub per master and routes each
// channel by its Slot. A channel whose slot moved (the node drops it, or
// answers MOVED to a re-subscription) moves with its waiters to the new
// owner's Hub; the other channels are not disturbed. When a Hub's
// connection breaks, the slot owners are read again and the channels whose
// slots another master now owns (a replica promoted at another address)
// move there with their waiters, instead of waiting for a dead node.
package pubsub
