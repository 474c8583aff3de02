package lock

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/observe"
)

// The steady state pays nothing (bounded.go): once New's connections
// have answered their handshakes, no connection is counted as in the
// making, and a Lock+Unlock sends its requests directly. A failed
// request opens the window; a request sent in it whose caller's ctx has
// ended returns that ctx's error as a lost answer (not an error reply,
// which would say the request did not run).
func TestConnectionMakingWindow(t *testing.T) {
	c := internalClient(t)
	ctx := context.Background()
	h, err := c.Mutex("bounded:steady").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	d := c.crc.d
	if n := d.inflight.Load(); n != 0 {
		t.Errorf("%d dials in flight after a Lock+Unlock", n)
	}
	if n := d.shaking.Load(); n != 0 {
		t.Errorf("%d connections still counted in their handshake after a Lock+Unlock", n)
	}
	if d.making() {
		t.Fatal("a connection is counted as in the making in the steady state: every caller's request would go through a worker")
	}

	// A caller's cancellation says nothing of the connection (review: it
	// opened the window, for 10 s, on every cancelled call). (A deadline
	// does: rueidis closes a connection whose lone request timed out.)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	sctx := newSendCtx(cctx, c.cfg.CommandTimeout, time.Time{}, true)
	defer sctx.stop()
	if err := c.crc.Do(sctx, c.rc.B().Ping().Build()).Error(); err == nil {
		t.Fatal("a request whose caller's ctx had ended was answered")
	}
	if d.making() {
		t.Fatal("a caller's cancelled request opened the window")
	}

	d.saw(errors.New("a request got no answer"))
	if !d.making() {
		t.Fatal("no window after a request got no answer")
	}
	r := c.crc.Do(sctx, c.rc.B().Ping().Build())
	err = r.Error()
	if err == nil {
		t.Fatal("a request whose caller's ctx had ended was answered as if it ran to the end")
	}
	if _, reply := rueidis.IsRedisErr(err); reply {
		t.Fatalf("a request given up on = %v, an error reply: it would read as not run", err)
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("a request given up on = %v, want the caller's context.Canceled", err)
	}
}

// On a Client of FromClient the watchdog renews on the callers'
// connections: a renewal that failed opens the window as a caller's
// request does (found by review: a caller's query waited 1.0 s past its
// 100 ms ctx for the connection the next renewal was making, the Client
// having seen no failure of its own).
func TestAFailedRenewalOpensTheWindowOnAClientOfFromClient(t *testing.T) {
	srv := integration.Redis(t, integration.Options{})
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, ForceSingleClient: true, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	failed := make(chan struct{})
	var once sync.Once
	obs := &observe.Observer{Renew: func(e observe.Renew) {
		if e.Err != nil || e.Failed > 0 {
			once.Do(func() { close(failed) })
		}
	}}
	c, err := FromClient(rc, Config{CommandTimeout: 200 * time.Millisecond, WatchdogTimeout: 6 * time.Second, RenewInterval: 100 * time.Millisecond, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
	h, err := c.Mutex("bounded:renewal").Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if c.crc.d.making() {
		t.Fatal("a window is open before any failure")
	}
	if err := srv.Pause(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Resume(context.Background()) })
	select {
	case <-failed:
	case <-time.After(10 * time.Second):
		t.Fatal("no renewal failed within 10 s of the master's pause")
	}
	// The round trip given up on returns at its own deadline (Straggle,
	// 2 × CommandTimeout after its send), which is when the Client sees
	// it failed: polled, since nothing signals it.
	for deadline := time.Now().Add(5 * time.Second); !c.crc.d.making(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a failed renewal on the callers' connections opened no window: a caller's next request may wait past its ctx for the connection the next renewal makes")
		}
	}
	if err := srv.Resume(context.Background()); err != nil {
		t.Fatal(err)
	}
	_ = h.Unlock(context.Background())
}
