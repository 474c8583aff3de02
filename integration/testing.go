package integration

import (
	"context"
	"os"
	"strings"
	"testing"
)

// RequireEnv is the environment variable listing, comma-separated, the
// backends that must run: when one of them is unavailable, Redis and
// Masters fail the test instead of skipping it. Example: "process,docker".
const RequireEnv = "RLOCK_REQUIRE"

// Redis starts a server for a test and closes it in tb.Cleanup. It skips the
// test when the backend cannot run here, unless RLOCK_REQUIRE names that
// backend, and fails it on any other error.
func Redis(tb testing.TB, opts Options) *Server {
	tb.Helper()
	s, err := StartRedis(context.Background(), opts)
	if err != nil {
		skipOrFail(tb, err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("rlock: integration: close redis-server: %v", err)
		}
	})
	return s
}

// Masters starts n servers for a test, like Redis, and closes them in
// tb.Cleanup.
func Masters(tb testing.TB, n int, opts Options) []*Server {
	tb.Helper()
	servers, err := StartMasters(context.Background(), n, opts)
	if err != nil {
		skipOrFail(tb, err)
	}
	for _, s := range servers {
		tb.Cleanup(func() {
			if err := s.Close(); err != nil {
				tb.Errorf("rlock: integration: close redis-server: %v", err)
			}
		})
	}
	return servers
}

// skipOrFail ends the test: a skip when err only says a backend that is not
// required is unavailable, a failure otherwise.
func skipOrFail(tb testing.TB, err error) {
	tb.Helper()
	missing := unavailableBackends(err)
	if len(missing) == 0 {
		tb.Fatalf("%v", err)
	}
	for _, b := range missing {
		if Required(b) {
			tb.Fatalf("rlock: integration: %s=%q requires backend %s: %v", RequireEnv, os.Getenv(RequireEnv), b, err)
		}
	}
	tb.Skipf("%v", err)
}

// Required reports whether RLOCK_REQUIRE names backend b.
func Required(b Backend) bool {
	for f := range strings.SplitSeq(os.Getenv(RequireEnv), ",") {
		if Backend(strings.ToLower(strings.TrimSpace(f))) == b {
			return true
		}
	}
	return false
}

// Backends lists the backends this test binary can use, for tables of
// subtests: BackendProcess, then those registered (BackendDocker when
// package github.com/rlock-go/rlock/integration/docker is imported).
func Backends() []Backend { return append([]Backend{BackendProcess}, registered()...) }
