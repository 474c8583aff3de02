package integration

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/integration/internal/backendkit"
)

func testFastClock(t *testing.T, s *Server) {
	ctx := testCtx(t)
	c := newClient(t, s.Addr(), "")
	const ttl = 4 * time.Second
	start := time.Now()
	if err := c.Do(ctx, c.B().Set().Key("k").Value("v").Px(ttl).Build()).Error(); err != nil {
		t.Fatalf("SET PX: %v", err)
	}
	// This fault can only be observed against real time: poll until the key
	// is gone, bounded by a deadline well short of the TTL. At rate 10 it
	// goes after about ttl/10.
	gone := waitGone(t, c, "k", ttl/2)
	if !gone {
		t.Fatalf("key with a %v TTL still there after %v of real time at clock rate 10", ttl, time.Since(start))
	}
	t.Logf("key with a %v TTL expired after %v of real time", ttl, time.Since(start))
}

func testSetClockRate(t *testing.T, s *Server) {
	ctx := testCtx(t)
	c := newClient(t, s.DirectAddr(), "")
	realStart := time.Now()
	before, err := backendkit.ServerTime(ctx, s.DirectAddr(), "")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetClockRate(ctx, 50); err != nil {
		t.Fatalf("SetClockRate: %v", err)
	}
	after, err := backendkit.ServerTime(ctx, s.DirectAddr(), "")
	if err != nil {
		t.Fatal(err)
	}
	// Continuous: the server's clock moved by at most the new rate times
	// the real time that passed (on a busy machine that can be seconds of
	// server time), plus a second; a jump is far more.
	if limit := 50*time.Since(realStart) + time.Second; after.Before(before) || after.Sub(before) > limit {
		t.Fatalf("server clock jumped from %v to %v on a rate change (more than %v)", before, after, limit)
	}
	const ttl = 10 * time.Second
	start := time.Now()
	if err := c.Do(ctx, c.B().Set().Key("k").Value("v").Px(ttl).Build()).Error(); err != nil {
		t.Fatalf("SET PX: %v", err)
	}
	// Real time again, as above: at rate 50 the key goes after about 200ms.
	if !waitGone(t, c, "k", ttl/4) {
		t.Fatalf("key with a %v TTL still there after %v of real time at clock rate 50", ttl, time.Since(start))
	}
	// The clock also runs on across a restart, at the new rate.
	if before, err = backendkit.ServerTime(ctx, s.DirectAddr(), ""); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(ctx, RestartOptions{}); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if after, err = backendkit.ServerTime(ctx, s.DirectAddr(), ""); err != nil {
		t.Fatal(err)
	}
	if after.Before(before) {
		t.Fatalf("server clock went back from %v to %v across a restart", before, after)
	}
}

func testSetClockRateWithoutClock(t *testing.T, s *Server) {
	if err := s.SetClockRate(testCtx(t), 2); !errors.Is(err, ErrNoClock) {
		t.Fatalf("SetClockRate without ClockRate: %v, want ErrNoClock", err)
	}
}

// waitGone polls EXISTS until key is gone or within has passed in real time.
func waitGone(t *testing.T, c rueidis.Client, key string, within time.Duration) bool {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(deadline) {
		n, err := c.Do(t.Context(), c.B().Exists().Key(key).Build()).AsInt64()
		if err != nil {
			t.Fatalf("EXISTS: %v", err)
		}
		if n == 0 {
			return true
		}
		<-tick.C
	}
	return false
}
