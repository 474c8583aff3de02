package backendkit

import (
	"errors"
	"fmt"
)

// ErrUnavailable is integration.ErrBackendUnavailable: a backend cannot run
// on this machine.
var ErrUnavailable = errors.New("rlock: integration backend unavailable")

// UnavailableError says why one backend cannot run. It matches
// ErrUnavailable with errors.Is and names the backend, so that tests can
// compare it with RLOCK_REQUIRE.
type UnavailableError struct {
	Backend string
	Reason  error
}

// Unavailable returns an *UnavailableError for backend with the reason
// formatted as by fmt.Errorf.
func Unavailable(backend string, format string, args ...any) error {
	return &UnavailableError{Backend: backend, Reason: fmt.Errorf(format, args...)}
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("%v: %s: %v", ErrUnavailable, e.Backend, e.Reason)
}

func (e *UnavailableError) Unwrap() []error { return []error{ErrUnavailable, e.Reason} }
