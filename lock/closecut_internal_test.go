package lock

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/integration"
)

// Found by review of 3496610, which dropped dials.cut's check from
// shakingConn.SetDeadline as redundant: rueidis reads without writing
// first in one place, the reader it starts for pub/sub hooks
// (SetPubSubHooks on a dedicated connection: _background clears the
// deadline, then reads). An application's connection set up so after
// teardown's cut waited 2.0 s for rueidis's keep-alive PING to end it;
// with the check, SetDeadline keeps the cut's deadline and it ends at
// once.
func TestCutEndsAPubSubReaderStartedAfterIt(t *testing.T) {
	srv := integration.Redis(t, integration.Options{})
	ctx := context.Background()
	c, err := New(ctx, Config{Addrs: []string{srv.Addr()}, CommandTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = c.Close(cctx)
	})
	dc, release := c.Redis().Dedicate()
	defer release()
	if err := dc.Do(ctx, dc.B().Ping().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	c.crc.d.cutAll()
	start := time.Now()
	broken := dc.SetPubSubHooks(rueidis.PubSubHooks{OnMessage: func(rueidis.PubSubMessage) {}})
	select {
	case err := <-broken:
		t.Logf("the reader started after the cut ended %v after it: %v", time.Since(start), err)
	case <-time.After(10 * time.Second):
		t.Fatal("the reader started after the cut had not ended 10 s after it")
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("the reader started after the cut ended %v after it, want at once (under 500 ms)", d)
	}
}
