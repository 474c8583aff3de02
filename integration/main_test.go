package integration

import (
	"errors"
	"testing"

	"github.com/rlock-go/rlock/internal/leakcheck"
)

func TestMain(m *testing.M) {
	leakcheck.VerifyTestMain(m, leakcheck.IgnoreAnyFunction(IgnoreRueidis...))
}

// TestProcessBackend runs the backend tests on the process backend; the
// Docker backend's module runs them on Docker.
func TestProcessBackend(t *testing.T) { TestBackend(t, BackendProcess) }

func TestDockerNeedsItsPackage(t *testing.T) {
	if got := Backends(); len(got) != 1 || got[0] != BackendProcess {
		t.Fatalf("Backends() = %v without any driver registered, want [process]", got)
	}
	if _, err := StartRedis(t.Context(), Options{Backend: BackendDocker}); err == nil || errors.Is(err, ErrBackendUnavailable) {
		t.Fatalf("StartRedis on an unregistered Docker backend: %v, want an error that is not a skip", err)
	}
}
