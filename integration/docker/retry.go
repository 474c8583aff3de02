package docker

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
)

// transientMarkers are parts of engine errors that say an operation failed
// for now, not for good: on a loaded machine the cgroup freezer may not
// freeze every task of a container in time ("unable to freeze"), and runc
// gives up; the engine thaws the container again and the next try usually
// succeeds.
var transientMarkers = []string{
	"unable to freeze",
	"unable to thaw",
	"device or resource busy",
	"resource temporarily unavailable",
}

// transientAttempts bounds how often retryTransient calls op.
const transientAttempts = 6

func transient(err error) bool {
	msg := err.Error()
	for _, m := range transientMarkers {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return false
}

// retryTransient calls op until it succeeds, fails with an error that is
// not transient, or has failed transientAttempts times, pausing longer
// after each failure, within ctx. After a transient failure it inspects
// the container first: when done(state) holds, an earlier try took effect
// after all and it returns nil.
func retryTransient(ctx context.Context, op func() error, done func(*container.State) bool,
	state func(context.Context) (*container.State, error)) error {
	pause := 50 * time.Millisecond
	var errs []error
	for attempt := 1; ; attempt++ {
		err := op()
		if err == nil {
			return nil
		}
		errs = append(errs, err)
		if !transient(err) || attempt == transientAttempts {
			return errors.Join(errs...)
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(append(errs, context.Cause(ctx))...)
		case <-t.C:
		}
		pause *= 2
		if st, serr := state(ctx); serr == nil && done(st) {
			return nil
		}
	}
}
