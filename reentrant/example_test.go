package reentrant_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/reentrant"
)

// One acquisition and its release by hand, in Redisson's layout: what
// package lock does for a Mutex, without the ledger, the watchdog or the
// waiting. A second request of another holder field finds the lock busy.
func Example() {
	ctx := context.Background()
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.DirectAddr()}}) // your Redis master
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rc.Close()

	name := "orders:" + reentrant.NewRequestID()
	field := reentrant.Field(reentrant.NewClientID(), 1) // "<client id>:<owner>"
	acq := reentrant.AcquireRequest{Name: name, Field: field, Lease: 30 * time.Second, RequestID: reentrant.NewRequestID()}
	res, err := acq.Run(ctx, rc)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("first holder:", res.Status, "count", res.Count)

	other := acq
	other.Field, other.RequestID = reentrant.Field(reentrant.NewClientID(), 1), reentrant.NewRequestID()
	res, _ = other.Run(ctx, rc)
	fmt.Println("another holder:", res.Status)

	rel := reentrant.Release{Name: name, Field: field, Lease: 30 * time.Second, RequestID: reentrant.NewRequestID(),
		Publish: reentrant.Publish, LatchTTL: time.Second}
	out, err := rel.Run(ctx, rc)
	fmt.Println("release:", out, err)
	// Output:
	// first holder: acquired count 1
	// another holder: busy
	// release: released <nil>
}
