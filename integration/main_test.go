package integration

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, IgnoreRueidis...)
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

// forEachBackend runs f as a subtest per backend; each one skips when its
// backend is unavailable, unless RLOCK_REQUIRE names it.
func forEachBackend(t *testing.T, opts Options, f func(t *testing.T, s *Server)) {
	for _, b := range Backends() {
		t.Run(string(b), func(t *testing.T) {
			o := opts
			o.Backend = b
			f(t, Redis(t, o))
		})
	}
}
