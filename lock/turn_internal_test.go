package lock

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestTurnExcludesAndIsNeverLost has goroutines take and give one
// hold's turn, a third of them with a context that ends while they
// wait (some as the turn is handed to them): no two hold it at once, and
// once all are done the turn is free, with no channel left.
func TestTurnExcludesAndIsNeverLost(t *testing.T) {
	l := &hold{}
	var inside, taken, gaveUp atomic.Int32
	var wg sync.WaitGroup
	for g := range 12 {
		wg.Go(func() {
			for i := range 300 {
				short := (g+i)%3 == 0
				d := 10 * time.Second // a turn lost for good ends the test here
				if short {
					d = time.Duration(i%7) * time.Microsecond
				}
				ctx, cancel := context.WithTimeout(context.Background(), d)
				err := l.take(ctx, nil, nil)
				cancel()
				if err != nil && !short {
					t.Errorf("take waited 10 s for a turn held for microseconds: it was lost")
					return
				}
				if err != nil {
					gaveUp.Add(1)
					continue
				}
				if inside.Add(1) != 1 {
					t.Error("two goroutines hold the turn")
				}
				taken.Add(1)
				inside.Add(-1)
				l.give()
			}
		})
	}
	wg.Wait()
	if !l.tryTake() {
		t.Fatal("the turn is not free once every goroutine gave it back or gave up")
	}
	l.give()
	if l.busy || l.turn != nil || l.waiters != 0 {
		t.Fatalf("after the last give: busy %v, channel %v, waiters %d; want free, none, 0", l.busy, l.turn != nil, l.waiters)
	}
	if taken.Load() == 0 || gaveUp.Load() == 0 {
		t.Fatalf("taken %d, gave up %d: both paths should have run", taken.Load(), gaveUp.Load())
	}
}

// TestTurnServesWaitersInOrder: waiters that came one after another are
// handed the turn in that order.
func TestTurnServesWaitersInOrder(t *testing.T) {
	l := &hold{}
	if !l.tryTake() {
		t.Fatal("a new hold's turn is taken")
	}
	if l.tryTake() {
		t.Fatal("tryTake took a taken turn")
	}
	var order []int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 5 {
		wg.Go(func() {
			if err := l.take(context.Background(), nil, nil); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			l.give()
		})
		// Wait until it waits, so that the order of arrival is known.
		for {
			l.tmu.Lock()
			n := l.waiters
			l.tmu.Unlock()
			if n == int32(i+1) {
				break
			}
			time.Sleep(time.Millisecond) // polled: take has no signal for "now waiting"
		}
	}
	l.give()
	wg.Wait()
	for i, v := range order {
		if v != i {
			t.Fatalf("served in order %v, want 0..4", order)
		}
	}
}

// TestTurnWaitEndsOnStopAndLoss: a wait ends with ErrClosed when stop
// closes and with errLostWhileWaiting when lost closes, and leaves the
// turn with its holder.
func TestTurnWaitEndsOnStopAndLoss(t *testing.T) {
	l := &hold{}
	if err := l.take(context.Background(), nil, nil); err != nil {
		t.Fatal(err)
	}
	stop, lost := make(chan struct{}), make(chan struct{})
	close(stop)
	if err := l.take(context.Background(), stop, nil); err != ErrClosed {
		t.Fatalf("take with stop closed = %v, want ErrClosed", err)
	}
	close(lost)
	if err := l.take(context.Background(), nil, lost); err != errLostWhileWaiting {
		t.Fatalf("take with lost closed = %v, want errLostWhileWaiting", err)
	}
	if !l.busy {
		t.Fatal("a waiter that gave up freed the holder's turn")
	}
	l.give()
	if l.busy || l.turn != nil {
		t.Fatal("the turn is not free after its holder gave it")
	}
}
