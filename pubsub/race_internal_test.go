package pubsub

import (
	"context"
	"testing"
	"time"

	"github.com/rlock-go/rlock/integration"
)

// A connection that breaks while a Subscribe of another channel is about
// to connect: the Subscribe makes the new connection, and every channel
// with waiters must be subscribed on it, not only the Subscribe's own.
// The watch goroutine leaves the re-subscription to whoever connected
// first, so a channel left out here would never be subscribed again (the
// cause of TestShardsMovedSlot's failure in CI, where the server's
// sunsubscribe of a moved slot started such a subscription just before
// the test broke the connection).
func TestSubscribeAfterBreakCarriesEveryChannel(t *testing.T) {
	srv := integration.Redis(t, integration.Options{})
	rc := integration.NewClient(t, srv.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	h := New(rc, Options{})
	defer h.Close()

	a := t.Name() + ":a"
	wa, err := h.Subscribe(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer wa.Close()

	// Before b's Subscribe connects: break the connection and wait until
	// its watch goroutine has detached it.
	h.beforeConnect = func() {
		h.beforeConnect = nil
		if err := rc.Do(ctx, rc.B().ClientKill().TypePubsub().Build()).Error(); err != nil {
			t.Error(err)
		}
		for {
			h.mu.Lock()
			gone := h.conn == nil
			h.mu.Unlock()
			if gone {
				return
			}
			select {
			case <-ctx.Done():
				t.Error("the broken connection was never detached")
				return
			case <-time.After(time.Millisecond):
			}
		}
	}
	b := t.Name() + ":b"
	wb, err := h.Subscribe(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	defer wb.Close()

	// a's waiter must hear a release published once a is subscribed
	// again; the server has no event for that, so ask until it is.
	for {
		m, err := rc.Do(ctx, rc.B().PubsubNumsub().Channel(a).Build()).AsIntMap()
		if err != nil {
			t.Fatalf("a never subscribed again on the new connection: %v", err)
		}
		if m[a] == 1 {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Millisecond): // the server has no event for it
		}
	}
	// A wake-up still pending (the break's, or the confirmation's) is
	// taken first; the release's joins one that has not arrived yet.
	select {
	case <-wa.C():
	default:
	}
	if err := rc.Do(ctx, rc.B().Publish().Channel(a).Message("0").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wa.C():
	case <-ctx.Done():
		t.Fatal("a's waiter was never woken after its re-subscription")
	}
}
