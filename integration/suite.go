package integration

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// TestBackend runs the package's own tests of a backend against backend b,
// as subtests: start, Kill, Pause, Partition, Restart with and without
// data, Close, several masters, and the fake clock. This package runs it
// for BackendProcess; a Driver's package runs it for its backend, which is
// how the Docker backend, in a module of its own, gets the same checks.
// Each subtest skips when b cannot run here, unless RLOCK_REQUIRE names b.
func TestBackend(t *testing.T, b Backend) {
	run := func(name string, opts Options, f func(*testing.T, *Server)) {
		t.Run(name, func(t *testing.T) {
			opts.Backend = b
			f(t, Redis(t, opts))
		})
	}
	run("StartAnswersPing", Options{Password: "s3cret"}, testStartAnswersPing)
	run("Kill", Options{}, testKill)
	run("Pause", Options{}, testPause)
	run("Partition", Options{}, testPartition)
	run("PartitionHeldConnectionForwardedOnHeal", Options{}, testHeldConnection)
	t.Run("Restart", func(t *testing.T) { testRestart(t, b) })
	run("CloseIsIdempotent", Options{}, testCloseIsIdempotent)
	t.Run("Masters", func(t *testing.T) { testMasters(t, b) })
	run("FastClockExpiresKeysEarly", Options{ClockRate: 10}, testFastClock)
	run("SetClockRate", Options{ClockRate: 1}, testSetClockRate)
	run("SetClockRateWithoutClock", Options{}, testSetClockRateWithoutClock)
}

// newClient connects a rueidis client to addr and closes it in cleanup.
func newClient(t *testing.T, addr, password string) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:  []string{addr},
		Password:     password,
		DisableCache: true,
		DisableRetry: true,
		Dialer:       netDialer(),
	})
	if err != nil {
		t.Fatalf("connect %s: %v", addr, err)
	}
	t.Cleanup(c.Close)
	return c
}

// testCtx is bounded so that a hung server fails the test instead of the
// whole binary.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// shortCtx is for checks that expect no answer.
func shortCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	t.Cleanup(cancel)
	return ctx
}

func netDialer() net.Dialer { return net.Dialer{Timeout: 2 * time.Second} }
