package pubsub_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/pubsub"
)

var srv *integration.Server

func TestMain(m *testing.M) {
	integration.Main(m, 1, integration.Options{}, func(s []*integration.Server) { srv = s[0] })
}

func client(t testing.TB) rueidis.Client {
	t.Helper()
	rc := integration.NewClient(t, srv.DirectAddr())
	return rc
}

func publish(t testing.TB, rc rueidis.Client, ch, msg string) int64 {
	t.Helper()
	n, err := rc.Do(context.Background(), rc.B().Publish().Channel(ch).Message(msg).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func numsub(t testing.TB, rc rueidis.Client, ch string) int64 {
	t.Helper()
	m, err := rc.Do(context.Background(), rc.B().PubsubNumsub().Channel(ch).Build()).AsIntMap()
	if err != nil {
		t.Fatal(err)
	}
	return m[ch]
}

func pending(w *pubsub.Waiter) (pubsub.Reason, bool) {
	select {
	case r := <-w.C():
		return r, true
	default:
		return 0, false
	}
}

// A "0" wakes one waiter, the longest-waiting; "1" wakes all. Subscribe
// returns after the server's confirmation: a publish right after it is
// received (PUBLISH reports one receiving connection).
func TestWakeOneAndWakeAll(t *testing.T) {
	rc := client(t)
	h := pubsub.New(rc, pubsub.Options{})
	defer h.Close()
	ch := t.Name()
	var ws []*pubsub.Waiter
	for i := 0; i < 3; i++ {
		w, err := h.Subscribe(context.Background(), ch)
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	if n := numsub(t, rc, ch); n != 1 {
		t.Fatalf("NUMSUB %d, want 1 connection for 3 waiters", n)
	}
	if n := publish(t, rc, ch, "0"); n != 1 {
		t.Fatalf("PUBLISH reached %d connections, want 1", n)
	}
	if r := <-ws[0].C(); r != pubsub.Message {
		t.Fatalf("first waiter woken by %v", r)
	}
	// Wake-ups go to the longest-waiting waiter without one pending: ws[0]
	// consumed its own (and, say, failed to acquire), so it is woken again.
	publish(t, rc, ch, "0")
	if r := <-ws[0].C(); r != pubsub.Message {
		t.Fatalf("oldest waiter woken by %v", r)
	}
	for _, w := range ws[1:] {
		if _, ok := pending(w); ok {
			t.Fatal("a message woke more than one waiter")
		}
	}
	publish(t, rc, ch, "1")
	for i, w := range ws {
		if r := <-w.C(); r != pubsub.Message {
			t.Fatalf("waiter %d woken by %v on \"1\"", i, r)
		}
	}
	for _, w := range ws {
		w.Close()
	}
	// Close unsubscribes in the background.
	if err := pubsub.Flush(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	if n := numsub(t, rc, ch); n != 0 {
		t.Fatalf("NUMSUB %d after every waiter left, want 0", n)
	}
}

// An observer (Observe) is woken by every "0" and takes the wake-up
// from no ordinary waiter, even when it subscribed first; Pass and Close
// hand nothing on for it.
func TestObserverTakesNoWakeUp(t *testing.T) {
	rc := client(t)
	h := pubsub.New(rc, pubsub.Options{})
	defer h.Close()
	ch := t.Name()
	obs, err := h.Observe(context.Background(), ch)
	if err != nil {
		t.Fatal(err)
	}
	var ws []*pubsub.Waiter
	for range 2 {
		w, err := h.Subscribe(context.Background(), ch)
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	for round := range 2 {
		publish(t, rc, ch, "0")
		if !wokenBy(ws[0]) {
			t.Fatalf("round %d: the longest-waiting ordinary waiter was not woken (the observer took its wake-up)", round)
		}
		if !wokenBy(obs) {
			t.Fatalf("round %d: the observer was not woken", round)
		}
		if _, ok := pending(ws[1]); ok {
			t.Fatalf("round %d: a \"0\" woke two ordinary waiters", round)
		}
	}
	// An ordinary waiter's Pass goes to another ordinary waiter, not to the
	// observer.
	ws[1].Pass()
	if _, ok := pending(ws[0]); !ok {
		t.Fatal("an ordinary waiter's Pass did not reach the other ordinary waiter")
	}
	if _, ok := pending(obs); ok {
		t.Fatal("an ordinary waiter's Pass woke the observer")
	}
	// The observer's Pass and its Close with a wake-up pending wake nobody.
	obs.Pass()
	publish(t, rc, ch, "0") // ws[0] and obs
	if !wokenBy(ws[0]) {
		t.Fatal("the ordinary waiter was not woken")
	}
	obs.Close()
	if _, ok := pending(ws[1]); ok {
		t.Fatal("the observer's Pass or Close handed a wake-up on")
	}
	for _, w := range ws {
		w.Close()
	}
}

// wokenBy reports whether w receives a message wake-up within 5 s.
func wokenBy(w *pubsub.Waiter) bool {
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case r := <-w.C():
		return r == pubsub.Message
	case <-t.C:
		return false
	}
}

// A waiter that leaves without consuming its wake-up hands it on.
func TestUnconsumedWakeUpIsHandedOn(t *testing.T) {
	rc := client(t)
	h := pubsub.New(rc, pubsub.Options{})
	defer h.Close()
	ch := t.Name()
	a, err := h.Subscribe(context.Background(), ch)
	if err != nil {
		t.Fatal(err)
	}
	b, err := h.Subscribe(context.Background(), ch)
	if err != nil {
		t.Fatal(err)
	}
	sync, err := h.Subscribe(context.Background(), ch+":sync")
	if err != nil {
		t.Fatal(err)
	}
	defer sync.Close()
	publish(t, rc, ch, "0")
	// Messages of one connection are handled in order: once the second
	// channel's message arrived, the first reached a.
	publish(t, rc, ch+":sync", "0")
	<-sync.C()
	if len(a.C()) != 1 || len(b.C()) != 0 {
		t.Fatalf("pending wake-ups a=%d b=%d, want 1, 0", len(a.C()), len(b.C()))
	}
	a.Close()
	if r := <-b.C(); r != pubsub.Message {
		t.Fatalf("handed-on wake-up has reason %v", r)
	}
	b.Close()
}

// A broken connection wakes every waiter with Reconnect and re-subscribes.
func TestReconnectWakesAllAndResubscribes(t *testing.T) {
	rc := client(t)
	reconnected := make(chan error, 4)
	h := pubsub.New(rc, pubsub.Options{OnReconnect: func(err error) { reconnected <- err }})
	defer h.Close()
	ch := t.Name()
	a, err := h.Subscribe(context.Background(), ch)
	if err != nil {
		t.Fatal(err)
	}
	b, err := h.Subscribe(context.Background(), ch)
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Do(context.Background(), rc.B().ClientKill().TypePubsub().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	<-reconnected
	for _, w := range []*pubsub.Waiter{a, b} {
		if r := <-w.C(); r != pubsub.Reconnect {
			t.Fatalf("woken by %v, want reconnect", r)
		}
	}
	// A new Subscribe waits for the hub; once it returns, messages flow,
	// and the waiters that were there before it are woken again (a
	// message may have been published before the re-subscription).
	c, err := h.Subscribe(context.Background(), ch)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []*pubsub.Waiter{a, b} {
		if r, ok := pending(w); !ok || r != pubsub.Reconnect {
			t.Fatalf("after the re-subscription: woken %v by %v, want by reconnect", ok, r)
		}
	}
	if r, ok := pending(c); ok {
		t.Fatalf("the subscribing waiter woken by %v", r)
	}
	publish(t, rc, ch, "1")
	for _, w := range []*pubsub.Waiter{a, b, c} {
		if r := <-w.C(); r != pubsub.Message {
			t.Fatalf("after reconnect woken by %v, want message", r)
		}
		w.Close()
	}
}

func TestSubscribeAfterClose(t *testing.T) {
	h := pubsub.New(client(t), pubsub.Options{})
	h.Close()
	h.Close()
	if _, err := h.Subscribe(context.Background(), "x"); err != pubsub.ErrClosed {
		t.Fatalf("Subscribe after Close = %v, want ErrClosed", err)
	}
}
