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

// A MultiLock's Unlock whose releases go unanswered until their lease is
// judged run out (the master stopped through the release) returns that
// loss, as lock.Held.Unlock does: the keys may outlive the Unlock by the
// judgement's margin, and a caller told nil would take them for gone.
// Found by the fault suite's long run (multi, seed 20261212: Unlock
// returned nil, and Redis still counted the hold 3 ms later).
func TestUnlockReturnsALossJudgedWhileItsReleasesWereUnanswered(t *testing.T) {
	srv := integration.Redis(t, integration.Options{})
	c := clients(t, []*integration.Server{srv}, lock.Config{WatchdogTimeout: 2 * time.Second, CommandTimeout: 500 * time.Millisecond})[0]
	names := namesOn(t, 2)
	l := multilock.NewMultiLock(c.Mutex(names[0]), c.Mutex(names[1]))
	h, err := l.Lock(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	resume := pause(t, srv)
	defer resume()
	ctx, cancel := context.WithTimeout(bg(t), 10*time.Second)
	defer cancel()
	err = h.Unlock(ctx)
	resume()
	if !errors.Is(err, lock.ErrLockLost) {
		t.Fatalf("Unlock whose releases went unanswered until the lease ran out = %v, want ErrLockLost", err)
	}
	var le *lock.LostError
	if !errors.As(err, &le) {
		t.Fatalf("Unlock's loss %v is no *lock.LostError", err)
	}
	t.Logf("Unlock: %v", err)
}
