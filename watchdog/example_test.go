package watchdog_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/reentrant"
	"github.com/rlock-go/rlock/watchdog"
)

// A Registry renews every lock it tracks in one round trip per tick; a
// lock whose key is gone is reported lost at the next tick.
func Example() {
	ctx := context.Background()
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.DirectAddr()}}) // your Redis master
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rc.Close()
	r, err := watchdog.New(rc, watchdog.Config{Lease: 30 * time.Second, Interval: 10 * time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}

	// A lock taken by hand (package lock does this for a Mutex).
	name := "orders:" + reentrant.NewRequestID()
	field := reentrant.Field(reentrant.NewClientID(), 1)
	acq := reentrant.AcquireRequest{Name: name, Field: field, Lease: 30 * time.Second, RequestID: reentrant.NewRequestID()}
	if _, err := acq.Run(ctx, rc); err != nil {
		fmt.Println(err)
		return
	}
	r.Track(name, field, 30*time.Second, true, time.Now(), func(_ *watchdog.Entry, le *watchdog.LossError) {
		fmt.Println("lost:", le.Kind)
	})
	tk := r.Tick(ctx)
	fmt.Println("renewed:", tk.Renewed) // in one round trip, or two when the server lacked the script

	_ = rc.Do(ctx, rc.B().Del().Key(name).Build()).Error() // someone deletes the key
	tk = r.Tick(ctx)
	fmt.Println("lost on this tick:", tk.Lost)
	// Output:
	// renewed: 1
	// lost: not_held
	// lost on this tick: 1
}
