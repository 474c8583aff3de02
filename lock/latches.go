package lock

import (
	"context"
	"time"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/internal/slots"
	"github.com/rlock-go/rlock/pubsub"
	"github.com/rlock-go/rlock/reentrant"
)

// A latchCleaner deletes the unlock latches of answered releases, in
// batches, off the Unlock path (they also expire by themselves): one
// goroutine per Client (run), joined by Close with the Client's other
// background goroutines. Its fields are set by newClient.
//
// A latch is queued only when no copy of its release can still reach
// Redis (env.sendRelease): every send of it was answered. It is deleted
// within latchFlushDelay plus the round trips of its batch of being
// queued; sooner when latchWake latches are waiting, since the release
// that queues the latchWake-th wakes the cleaner (full), so that the
// queue does not fill at a high rate (at 3 × the bench's peak it held
// 200 ms of releases and nothing else: 29 % of the latches were dropped
// from it, and lived out their TTL). A delete that got no answer (the
// master restarting, say) is sent again a latchRetryDelay later, with
// what was queued meanwhile, until the latch is old enough to have
// expired by itself.
type latchCleaner struct {
	rc      rueidis.Client
	owned   bool          // rc is the Client's own (New made it): batches go on a connection of their own
	cluster bool          // rc is a Cluster's: one DEL per slot (bySlot); else one for the whole batch
	timeout time.Duration // one command's (Config.CommandTimeout)
	ttl     time.Duration // a latch's life (env.recordTTL): one older has expired by itself
	latches chan string   // latches to delete, queued by releases (env.queueLatch)
	full    chan struct{} // latchWake latches are queued: delete them now (env.queueLatch)
	// closing is Close's ctx, set by Close before it stops the loop (the
	// loop reads it once its own ctx is done): the last batch goes out
	// within it, or not at all (the latches expire by themselves), and
	// what got no answer is sent again within one CommandTimeout (last).
	closing context.Context
}

// latch is an answered release's unlock latch, taken from the queue for
// deletion.
type latch struct {
	key string
	at  time.Time // when the cleaner took it (within latchFlushDelay of its release): one older than ttl has expired
}

const (
	// latchFlushDelay is how long answered unlock latches gather before
	// the cleaner deletes them together.
	latchFlushDelay = 200 * time.Millisecond
	// latchRetryDelay is the wait before deletes that got no answer are
	// sent again (with whatever was queued meanwhile).
	latchRetryDelay = time.Second
	// latchBatch is the most latches one round trip deletes.
	latchBatch = 1024
	// latchQueue is how many latches may wait for the cleaner; one queued
	// when it is full is left to expire (256 KB of strings per Client).
	latchQueue = 1 << 14
	// lastTries is how many times, at most, Close's last deletes are sent
	// when they got no answer (latchCleaner.last).
	lastTries = 8
	// latchWake is how many queued latches wake the cleaner before
	// latchFlushDelay: a quarter of the queue, which 3 × the bench's peak
	// rate (116,148 a second) fills in 35 ms.
	latchWake = latchQueue / 4
)

// doMultiApart sends cmds on a connection of their own when the rueidis
// client is the Client's (New made it, with rueidis's default of 1,000
// dedicated connections, of which the Client uses at most a few), and on
// the shared one otherwise: a client given to FromClient may have its
// dedicated connections all in use (an application's BLPOP, a
// BlockingPoolSize of 1), and rueidis waits for one without a bound.
func (lc *latchCleaner) doMultiApart(ctx context.Context, cmds []rueidis.Completed) []rueidis.RedisResult {
	if lc.owned {
		return reentrant.DoMultiApart(ctx, lc.rc, cmds...)
	}
	return lc.rc.DoMulti(ctx, cmds...)
}

// run deletes answered unlock latches in batches until ctx ends, then
// deletes what is left within Close's ctx. It wakes once per batch, not
// once per latch: after the first latch it sleeps latchFlushDelay without
// receiving, and then takes what was queued meanwhile (a receive per latch
// would wake this goroutine on every Unlock: on the bench's uncontended
// Lock+Unlock that cost 1.2 times the Client's time). pending, the latches
// to be sent again, is the loop's own.
func (lc *latchCleaner) run(ctx context.Context) {
	var pending []latch
	for {
		wait := latchRetryDelay
		if len(pending) == 0 {
			select {
			case <-ctx.Done():
				lc.last(nil)
				return
			case k := <-lc.latches:
				pending = append(pending, latch{k, time.Now()})
			}
			wait = latchFlushDelay
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-lc.full:
			t.Stop()
		case <-ctx.Done():
			t.Stop()
			lc.last(pending)
			return
		}
		pending = lc.delete(ctx, lc.drain(pending))
	}
}

// drain adds to pending every latch queued now.
func (lc *latchCleaner) drain(pending []latch) []latch {
	now := time.Now()
	for {
		select {
		case k := <-lc.latches:
			pending = append(pending, latch{k, now})
		default:
			return pending
		}
	}
}

// delete deletes batch on a connection of its own (doMultiApart) and
// returns the latches to be sent again (deleteWith).
func (lc *latchCleaner) delete(ctx context.Context, batch []latch) []latch {
	return lc.deleteWith(ctx, batch, lc.doMultiApart)
}

// deleteWith deletes batch with send, latchBatch at a time, each batch in
// one round trip bounded by one CommandTimeout, and returns the latches
// whose delete got no answer (or was not sent: ctx ended), or a transient
// error reply (BUSY, LOADING, READONLY, TRYAGAIN, MASTERDOWN: classify's
// ErrUnavailable), and that have not expired by themselves. In a Cluster
// the latches of one slot (one lock's latches share its hash tag) go in
// one DEL; on one master (standalone, Sentinel) the whole batch does,
// without hashing a key: 20,000 Lock+Unlock cycles of one lock took
// 20,000 DELs of the cleaner's, and now take 31 to 37 (INFO
// commandstats).
func (lc *latchCleaner) deleteWith(ctx context.Context, batch []latch, send func(context.Context, []rueidis.Completed) []rueidis.RedisResult) []latch {
	var again []latch
	for len(batch) > 0 {
		if ctx.Err() != nil {
			return append(again, batch...)
		}
		n := min(len(batch), latchBatch)
		groups := [][]latch{batch[:n]}
		if lc.cluster {
			groups = bySlot(batch[:n])
		}
		batch = batch[n:]
		// A new slice each time: rueidis's writer may still read the last
		// one after DoMulti returned.
		cmds := make([]rueidis.Completed, len(groups))
		for i, g := range groups {
			keys := make([]string, len(g))
			for j, k := range g {
				keys[j] = k.key
			}
			cmds[i] = lc.rc.B().Del().Key(keys...).Build()
		}
		dctx, cancel := context.WithTimeout(ctx, lc.timeout)
		res := send(dctx, cmds)
		cancel()
		for i, g := range groups {
			err := resultErr(res, i)
			if err == nil || classify(err) != ErrUnavailable {
				continue
			}
			for _, k := range g {
				if time.Since(k.at) < lc.ttl {
					again = append(again, k)
				}
			}
		}
	}
	return again
}

// bySlot groups latches by their keys' slot (pubsub.Slot: a Cluster's,
// from the hash tag), in the order each slot first appears (slots.Group).
func bySlot(latches []latch) [][]latch {
	return slots.Group(latches, func(k latch) uint16 { return pubsub.Slot(k.key) })
}

// resultErr returns the error of res[i], or an error when rueidis
// returned fewer results (the round trip was cut short).
func resultErr(res []rueidis.RedisResult, i int) error {
	if i >= len(res) {
		return context.DeadlineExceeded
	}
	return res[i].Error()
}

// last deletes pending and every latch still queued at Close, within
// Close's ctx and on the shared connection (rueidis's Dedicated takes no
// ctx, and may be dialling a master that does not answer: R3-7), each
// batch within one CommandTimeout; what it cannot delete expires by
// itself.
//
// Deletes that got no answer are then sent again at once, up to
// lastTries sends in all, until one CommandTimeout after the first:
// right after a restart of the master, the shared connections may be
// ones the restart broke that no request has used since (a connection in
// rueidis's direct mode is read only while a request waits on it). Each
// fails its first write at once and is made again for the next request
// on it; rueidis spreads requests over its pipelined connections (1, 2
// or 4 for a Client of New, by GOMAXPROCS), so lastTries covers New's. A
// single send left every answered latch so (TestNoLatchLeftAfterClose,
// "restart then close", 5 runs in 5), and a second one still met another
// broken connection 4 runs in 8. A master that does not answer spends
// the CommandTimeout in the first send, and nothing is sent again.
func (lc *latchCleaner) last(pending []latch) {
	if lc.closing == nil {
		return
	}
	send := func(ctx context.Context, cmds []rueidis.Completed) []rueidis.RedisResult {
		return lc.rc.DoMulti(ctx, cmds...)
	}
	start := time.Now()
	pending = lc.deleteWith(lc.closing, lc.drain(pending), send)
	if len(pending) == 0 {
		return
	}
	ctx, cancel := context.WithDeadline(lc.closing, start.Add(lc.timeout))
	defer cancel()
	for try := 1; try < lastTries && len(pending) > 0 && ctx.Err() == nil; try++ {
		pending = lc.deleteWith(ctx, pending, send)
	}
}
