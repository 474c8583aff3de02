package lock

import (
	"context"
	"runtime"
	"sync"
	"testing"

	"github.com/rlock-go/rlock/integration"
)

// The Client's workers run what is lent to them in parallel, are reused
// once idle, stop being lent on Close, and are joined by it (the
// package's leak check runs after the tests).
func TestWorkersLendReuseAndCloseJoins(t *testing.T) {
	srv := integration.Redis(t, integration.Options{})
	c, err := New(context.Background(), Config{Addrs: []string{srv.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	// Three functions that each wait for the others: they can finish
	// only if they run at once, on three workers.
	const n = 3
	var started, finished sync.WaitGroup
	started.Add(n)
	finished.Add(n)
	for range n {
		if !c.wk.lend(func() {
			started.Done()
			started.Wait()
			finished.Done()
		}) {
			t.Fatal("lend refused on an open Client")
		}
	}
	finished.Wait()
	// Once they parked again, a fourth function reuses one of them.
	parked := func() int {
		c.wk.mu.Lock()
		defer c.wk.mu.Unlock()
		return len(c.wk.idle)
	}
	for parked() < n { // each parks right after its function returned
		runtime.Gosched()
	}
	done := make(chan struct{})
	if !c.wk.lend(func() { close(done) }) {
		t.Fatal("lend refused on an open Client")
	}
	<-done
	for parked() < n {
		runtime.Gosched()
	}
	if got := parked(); got != n {
		t.Errorf("%d idle workers after reuse, want %d", got, n)
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if c.wk.lend(func() { t.Error("ran after Close") }) {
		t.Error("lend accepted after Close")
	}
	if got := parked(); got != 0 {
		t.Errorf("%d idle workers left after Close, want 0", got)
	}
}
