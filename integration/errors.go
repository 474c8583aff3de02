package integration

import (
	"errors"
	"strings"

	"github.com/rlock-go/rlock/integration/internal/backendkit"
)

var (
	// ErrBackendUnavailable is returned by StartRedis and StartMasters when
	// the chosen backend cannot run on this machine: redis-server is not on
	// PATH, Docker is not reachable, or libfaketime is missing for a
	// ClockRate. Redis and Masters skip the test on it unless RLOCK_REQUIRE
	// names the backend.
	ErrBackendUnavailable = backendkit.ErrUnavailable

	// ErrNotRunning is returned by Kill, Pause and Resume when the server
	// is not running, that is after Kill and before Restart.
	ErrNotRunning = errors.New("rlock: redis server is not running")

	// ErrClosed is returned by every method of a Server after Close.
	ErrClosed = errors.New("rlock: redis server is closed")

	// ErrNoClock is returned by SetClockRate when the server was started
	// without Options.ClockRate, or when its backend cannot fake the clock,
	// and by StartRedis when a ClockRate is asked of such a backend.
	ErrNoClock = errors.New("rlock: redis server has no fake clock")

	// ErrNoProxy is returned by Partition, Heal and Inject on a Cluster's nodes:
	// cluster clients connect to the ports the nodes advertise, so no
	// proxy stands in front of them.
	ErrNoProxy = errors.New("rlock: redis server has no proxy")

	// ErrFaultRemoved is returned by Fault.Wait when the fault was removed
	// before it had acted its Times times.
	ErrFaultRemoved = errors.New("rlock: integration fault removed before it acted")
)

// unavailable says why backend b cannot run: an error that matches
// ErrBackendUnavailable and names b, so that Redis can compare it with
// RLOCK_REQUIRE.
func unavailable(b Backend, format string, args ...any) error {
	return backendkit.Unavailable(string(b), format, args...)
}

// unavailableBackends lists every backend that err reports as unavailable.
func unavailableBackends(err error) []Backend {
	var out []Backend
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case *backendkit.UnavailableError:
			out = append(out, Backend(e.Backend))
		case interface{ Unwrap() []error }:
			for _, inner := range e.Unwrap() {
				walk(inner)
			}
		case interface{ Unwrap() error }:
			walk(e.Unwrap())
		}
	}
	walk(err)
	return out
}

// logTail returns the last lines of a server log for an error message.
func logTail(log []byte, lines int) string {
	s := strings.TrimRight(string(log), "\n")
	parts := strings.Split(s, "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
}
