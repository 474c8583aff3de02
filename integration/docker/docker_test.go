package docker_test

import (
	"errors"
	"testing"

	"github.com/rlock-go/rlock/integration"
	_ "github.com/rlock-go/rlock/integration/docker"
)

// TestBackend runs integration's backend tests (start, Kill, Pause,
// Partition, Restart, Close, several masters, the fake clock) on Docker.
// They skip without a Docker daemon unless RLOCK_REQUIRE names docker.
func TestBackend(t *testing.T) { integration.TestBackend(t, integration.BackendDocker) }

func TestRegistered(t *testing.T) {
	got := integration.Backends()
	if len(got) != 2 || got[0] != integration.BackendProcess || got[1] != integration.BackendDocker {
		t.Fatalf("Backends() = %v, want [process docker]", got)
	}
}

func TestUnavailableNamesDocker(t *testing.T) {
	err := integration.Unavailable(integration.BackendDocker, "no daemon")
	if !errors.Is(err, integration.ErrBackendUnavailable) {
		t.Fatalf("%v does not match ErrBackendUnavailable", err)
	}
}
