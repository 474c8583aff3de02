package pubsub_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/pubsub"
)

// bound is how long a test waits for something that must happen; it only
// ends a test that would otherwise hang.
const bound = 10 * time.Second

func bg() context.Context { return context.Background() }

// next returns w's next wake-up, failing the test when none comes within
// bound.
func next(t *testing.T, w *pubsub.Waiter, what string) pubsub.Reason {
	t.Helper()
	tm := time.NewTimer(bound)
	defer tm.Stop()
	select {
	case r := <-w.C():
		return r
	case <-tm.C:
		t.Fatalf("no wake-up within %v: %s", bound, what)
		return 0
	}
}

// A release published after the waiter retried at the break, but before the
// re-subscription, reaches nobody; the waiter must still be woken once the
// re-subscription is confirmed, so that its next attempt finds the lock free
// (safety.md finding 15, misuse-and-faults.md P1-88). Nothing else
// subscribes meanwhile: the Hub re-subscribes on its own.
//
// "kill" breaks the connection with CLIENT KILL TYPE pubsub; the release
// falls in the Hub's reconnect delay. "partition" holds the re-subscription
// back with a network partition until the release is published, so the
// window cannot be missed.
func TestReleaseDuringResubscriptionWakesAfterIt(t *testing.T) {
	t.Run("kill", func(t *testing.T) {
		rc := client(t)
		testReleaseDuringResubscription(t, rc, rc, func() {
			if err := rc.Do(bg(), rc.B().ClientKill().TypePubsub().Build()).Error(); err != nil {
				t.Fatal(err)
			}
		}, func() {})
	})
	t.Run("partition", func(t *testing.T) {
		s := integration.Redis(t, integration.Options{})
		testReleaseDuringResubscription(t, integration.NewClient(t, s.Addr()), integration.NewClient(t, s.DirectAddr()), func() {
			if err := s.Partition(bg()); err != nil {
				t.Fatal(err)
			}
		}, func() {
			if err := s.Heal(bg()); err != nil {
				t.Fatal(err)
			}
		})
	})
}

// testReleaseDuringResubscription subscribes through hc, breaks the
// connection with cut, publishes through rc after the waiter's wake-up at
// the break, then calls heal.
func testReleaseDuringResubscription(t *testing.T, hc, rc rueidis.Client, cut, heal func()) {
	reconnected := make(chan error, 4)
	h := pubsub.New(hc, pubsub.Options{OnReconnect: func(err error) { reconnected <- err }})
	defer h.Close()
	ch := t.Name()
	w, err := h.Subscribe(bg(), ch)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	cut()
	<-reconnected
	// The wake-up at the break: the waiter retries now, finds the lock
	// held and goes back to sleep.
	if r := next(t, w, "at the break"); r != pubsub.Reconnect {
		t.Fatalf("woken by %v at the break, want reconnect", r)
	}
	// The holder releases. Unless the Hub has re-subscribed already, the
	// message reaches nobody.
	resubscribed := publish(t, rc, ch, "0") == 1
	heal()
	// Once the re-subscription is confirmed, the waiter is woken again and
	// its attempt finds the lock free.
	r := next(t, w, "after the re-subscription")
	if !resubscribed && r != pubsub.Reconnect {
		t.Fatalf("woken by %v after the re-subscription, want reconnect", r)
	}
	if n := publish(t, rc, ch, "0"); n != 1 {
		t.Fatalf("PUBLISH reached %d connections after the wake-up, want 1: woken before the re-subscription was confirmed", n)
	}
	next(t, w, "by the message")
}

// A waiter that consumed a wake-up and leaves without the attempt it asked
// for passes it on to the next waiter (safety.md finding 16).
func TestConsumedWakeUpPassedOn(t *testing.T) {
	rc := client(t)
	h := pubsub.New(rc, pubsub.Options{})
	defer h.Close()
	ch := t.Name()
	a, err := h.Subscribe(bg(), ch)
	if err != nil {
		t.Fatal(err)
	}
	b, err := h.Subscribe(bg(), ch)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	publish(t, rc, ch, "0")
	if r := next(t, a, "by the message"); r != pubsub.Message {
		t.Fatalf("woken by %v", r)
	}
	// a's ctx ends now: it leaves without trying. (Pass works before or
	// after Close.)
	a.Close()
	a.Pass()
	if r := next(t, b, "by the passed wake-up"); r != pubsub.Message {
		t.Fatalf("passed wake-up has reason %v", r)
	}
	// A waiter alone on its channel passes to nobody, not to itself.
	publish(t, rc, ch, "0")
	next(t, b, "by the second message")
	b.Pass()
	if r, ok := pending(b); ok {
		t.Fatalf("b woken by %v: a waiter passed a wake-up to itself", r)
	}
}

// A Subscribe whose ctx ends before the server confirmed leaves nothing
// subscribed on the server, although the SUBSCRIBE reaches the server later
// (misuse-and-faults.md P2-22, safety.md finding 20).
func TestSubscribeCutShortLeavesNothingSubscribed(t *testing.T) {
	s := integration.Redis(t, integration.Options{})
	rc := integration.NewClient(t, s.DirectAddr())
	h := pubsub.New(rc, pubsub.Options{})
	defer h.Close()
	// A first waiter opens the Hub's connection.
	warm, err := h.Subscribe(bg(), t.Name()+":warm")
	if err != nil {
		t.Fatal(err)
	}
	defer warm.Close()
	ch := t.Name()
	if err := s.Pause(bg()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(bg(), 100*time.Millisecond)
	_, err = h.Subscribe(ctx, ch)
	cancel()
	if err := s.Resume(bg()); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Subscribe on a paused server = %v, want its deadline", err)
	}
	// Another Subscribe on the same connection returns after the server
	// answered everything sent before it, the cut-short SUBSCRIBE too.
	sync, err := h.Subscribe(bg(), ch+":sync")
	if err != nil {
		t.Fatal(err)
	}
	defer sync.Close()
	if err := pubsub.Flush(bg(), h); err != nil {
		t.Fatal(err)
	}
	if n := numsub(t, rc, ch); n != 0 {
		t.Fatalf("NUMSUB %d after a Subscribe cut short by its ctx, want 0", n)
	}
	if n := h.Channels(); n != 2 {
		t.Fatalf("%d channels with waiters, want 2", n)
	}
}

// Closing a Waiter does not wait for the UNSUBSCRIBE (safety.md finding
// 20): with the server paused, Close returns at once; the channel is
// unsubscribed in the background once the server answers.
func TestCloseDoesNotWaitForUnsubscribe(t *testing.T) {
	s := integration.Redis(t, integration.Options{})
	rc := integration.NewClient(t, s.DirectAddr())
	h := pubsub.New(rc, pubsub.Options{UnsubscribeTimeout: time.Minute})
	defer h.Close()
	ch := t.Name()
	w, err := h.Subscribe(bg(), ch)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Pause(bg()); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() {
		w.Close()
		close(closed)
	}()
	tm := time.NewTimer(bound)
	defer tm.Stop()
	select {
	case <-closed:
	case <-tm.C:
		t.Error("Waiter.Close waited for the paused server")
	}
	if err := s.Resume(bg()); err != nil {
		t.Fatal(err)
	}
	<-closed
	if err := pubsub.Flush(bg(), h); err != nil {
		t.Fatal(err)
	}
	if n := numsub(t, rc, ch); n != 0 {
		t.Fatalf("NUMSUB %d after the last waiter left, want 0", n)
	}
}
