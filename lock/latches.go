package lock

import (
	"context"
	"time"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/reentrant"
)

// A latchCleaner deletes the unlock latches of answered releases, in
// batches, off the Unlock path (they also expire by themselves): one
// goroutine per Client (run), joined by Close with the Client's other
// background goroutines. Its fields are set by newClient.
type latchCleaner struct {
	rc      rueidis.Client
	owned   bool          // rc is the Client's own (New made it): batches go on a connection of their own
	timeout time.Duration // one command's (Config.CommandTimeout)
	latches chan string   // latches to delete, queued by releases (env.queueLatch)
	// closing is Close's ctx, set by Close before it stops the loop (the
	// loop reads it once its own ctx is done): the last batch goes out
	// within it, or not at all (the latches expire by themselves).
	closing context.Context
}

// latchFlushDelay is how long answered unlock latches gather before the
// cleaner deletes them together.
const latchFlushDelay = time.Second

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

// run deletes answered unlock latches in batches, off the
// Unlock path (they also expire by themselves).
func (lc *latchCleaner) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			lc.delete(ctx, nil)
			return
		case k := <-lc.latches:
			// Gather a second's worth, then delete them in one round trip:
			// off the Unlock path, and not one command per Unlock.
			t := time.NewTimer(latchFlushDelay)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
			lc.delete(ctx, &k)
		}
	}
}

// delete deletes first (if any) and every latch queued behind it,
// in one round trip. Its context is not the loop's (loop): the last
// batch, at Close, must still go out, within Close's ctx and on the shared
// connection (rueidis's Dedicated takes no ctx, and may be dialling a
// master that does not answer: R3-7).
func (lc *latchCleaner) delete(loop context.Context, first *string) {
	// A new slice each time: rueidis's writer may still read the last one
	// after DoMulti returned.
	var batch []rueidis.Completed
	if first != nil {
		batch = append(batch, lc.rc.B().Del().Key(*first).Build())
	}
	for len(batch) < cap(lc.latches) {
		select {
		case k := <-lc.latches:
			batch = append(batch, lc.rc.B().Del().Key(k).Build())
			continue
		default:
		}
		break
	}
	if len(batch) == 0 {
		return
	}
	if loop.Err() == nil {
		ctx, cancel := context.WithTimeout(context.Background(), lc.timeout)
		lc.doMultiApart(ctx, batch)
		cancel()
		return
	}
	if lc.closing == nil || lc.closing.Err() != nil {
		return // Close's time is up: they expire by themselves
	}
	ctx, cancel := context.WithTimeout(lc.closing, lc.timeout)
	lc.rc.DoMulti(ctx, batch...)
	cancel()
}
