package lock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/rueidis"
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

	d.saw(errors.New("a request got no answer"))
	if !d.making() {
		t.Fatal("no window after a request got no answer")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	sctx := newSendCtx(cctx, c.cfg.CommandTimeout, time.Time{}, true)
	defer sctx.stop()
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
