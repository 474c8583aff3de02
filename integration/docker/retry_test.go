package docker

import (
	"context"
	"errors"
	"testing"

	"github.com/moby/moby/api/types/container"
)

func TestRetryTransient(t *testing.T) {
	freeze := errors.New(`Error response from daemon: cannot pause container: unable to freeze`)
	notPaused := func(context.Context) (*container.State, error) { return &container.State{Running: true}, nil }
	paused := func(*container.State) bool { return false }

	calls := 0
	err := retryTransient(t.Context(), func() error {
		if calls++; calls < 3 {
			return freeze
		}
		return nil
	}, paused, notPaused)
	if err != nil || calls != 3 {
		t.Fatalf("two transient failures then success: err %v after %d calls", err, calls)
	}

	calls = 0
	gone := errors.New("No such container")
	if err := retryTransient(t.Context(), func() error { calls++; return gone }, paused, notPaused); !errors.Is(err, gone) || calls != 1 {
		t.Fatalf("a lasting error: err %v after %d calls, want it at once", err, calls)
	}

	calls = 0
	done := func(*container.State) bool { return true }
	if err := retryTransient(t.Context(), func() error { calls++; return freeze }, done, notPaused); err != nil || calls != 1 {
		t.Fatalf("a failure that took effect anyway: err %v after %d calls", err, calls)
	}
}
