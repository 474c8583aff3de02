package multilock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/multilock"
)

// An Unlock cut by its ctx while its releases are unanswered returns
// ErrUnavailable and leaves them to the members' Clients. When such a
// Client is then closed with the master still stopped, nothing has
// confirmed the release: Unlock called again must not say nil, as
// lock.Held's says ErrClosed. Found by CI's fault suite (process/multi,
// close-stopped, seed 130724266; reproduced with seed 778003): the second
// Unlock returned nil at once, and a count read 100 ms later found two of
// the three names still held by that owner.
func TestUnlockAgainAfterACutOneAndCloseIsNotNil(t *testing.T) {
	srv := integration.Masters(t, 1, integration.Options{})[0]
	c := clients(t, []*integration.Server{srv}, lock.Config{})[0]
	n := name(t)
	names := []string{n + ":a", n + ":b", n + ":c"}
	ms := make([]*lock.Mutex, len(names))
	for i, x := range names {
		ms[i] = c.Mutex(x)
	}
	h, err := multilock.NewMultiLock(ms...).Lock(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Pause(bg(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Resume(context.Background()); err != nil {
			t.Error(err)
		}
	})

	cut, cancel := context.WithTimeout(bg(t), 50*time.Millisecond)
	err = h.Unlock(cut)
	cancel()
	if !errors.Is(err, lock.ErrUnavailable) {
		t.Fatalf("Unlock cut while the master is stopped = %v, want ErrUnavailable", err)
	}
	cctx, cancel := context.WithTimeout(bg(t), 50*time.Millisecond)
	_ = c.Close(cctx) // its releases cannot be answered either: it says so
	cancel()

	err = h.Unlock(bg(t))
	if err == nil {
		t.Fatal("Unlock after the Client's Close, the master still stopped = nil: no release was answered")
	}
	if !errors.Is(err, lock.ErrClosed) {
		t.Errorf("Unlock after the Client's Close = %v, want ErrClosed", err)
	}
}
