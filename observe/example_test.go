package observe_test

import (
	"context"
	"log"

	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/observe"
)

// An Observer of one's own: log every lost lock and every wait, for a
// program that does not use OpenTelemetry. Fields left nil cost nothing.
func ExampleObserver() {
	obs := &observe.Observer{
		Loss: func(ctx context.Context, e observe.Loss) {
			log.Printf("lost lock %q on %s: %v", e.Name, e.Addr, e.Err)
		},
		Waiting: func(ctx context.Context, e observe.Waiting) {
			log.Printf("waiting for %q on %s", e.Name, e.Addr)
		},
	}
	ctx := context.Background()
	c, err := lock.New(ctx, lock.Config{Addrs: []string{"127.0.0.1:6379"}, Observer: obs})
	if err != nil {
		log.Print(err)
		return
	}
	defer c.Close(ctx)
}
