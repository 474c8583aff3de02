package pubsub_test

import (
	"context"
	"fmt"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/pubsub"
)

// A waiter subscribes to a lock's unlock channel on the Hub's one
// connection, and a release's "0" wakes it.
func Example() {
	ctx := context.Background()
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.DirectAddr()}}) // your Redis master
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rc.Close()
	h := pubsub.New(rc, pubsub.Options{})
	defer h.Close()

	w, err := h.Subscribe(ctx, "redisson_lock__channel:{orders:42}")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Close()
	// The release of the lock publishes "0" (wake one waiter).
	_ = rc.Do(ctx, rc.B().Publish().Channel("redisson_lock__channel:{orders:42}").Message("0").Build()).Error()
	fmt.Println("woken by:", <-w.C())
	// Output: woken by: message
}
