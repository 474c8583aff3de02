package integration

import (
	"errors"
	"fmt"
	"runtime"
	"testing"
)

// recordingTB records how a helper ended the test instead of ending it.
type recordingTB struct {
	testing.TB
	skipped, failed bool
	msg             string
}

func (r *recordingTB) Helper() {}

func (r *recordingTB) Fatalf(format string, args ...any) {
	r.failed, r.msg = true, fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (r *recordingTB) Skipf(format string, args ...any) {
	r.skipped, r.msg = true, fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls skipOrFail on its own goroutine, which Fatalf and Skipf end.
func (r *recordingTB) run(err error) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		skipOrFail(r, err)
	}()
	<-done
}

func TestRequireTurnsSkipIntoFailure(t *testing.T) {
	dockerMissing := unavailable(BackendDocker, "no daemon")
	bothMissing := errors.Join(unavailable(BackendProcess, "no redis-server"), dockerMissing)
	for i, c := range []struct {
		require string
		err     error
		fail    bool
	}{
		{"", dockerMissing, false},
		{"process", dockerMissing, false},
		{"process,docker", dockerMissing, true},
		{" Docker ", dockerMissing, true},
		{"process", bothMissing, true},
		{"", errors.New("redis-server crashed"), true},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Setenv(RequireEnv, c.require)
			r := &recordingTB{TB: t}
			r.run(c.err)
			if r.failed != c.fail || r.skipped == c.fail {
				t.Fatalf("failed=%v skipped=%v (%s), want failed=%v", r.failed, r.skipped, r.msg, c.fail)
			}
		})
	}
}
