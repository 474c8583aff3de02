package integration_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/lock"
)

// A real redis-server on loopback for code without a testing.TB (tests
// use integration.Redis, which closes it and skips when redis-server is
// missing). Partition cuts the clients off through the server's proxy.
func ExampleStartRedis() {
	ctx := context.Background()
	srv, err := integration.StartRedis(ctx, integration.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()

	c, err := lock.New(ctx, lock.Config{Addrs: []string{srv.Addr()}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close(ctx)
	h, err := c.Mutex("example:integration").Lock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("held:", h.Context().Err() == nil)
	err = h.Unlock(ctx)
	fmt.Println("released:", err == nil || errors.Is(err, lock.ErrNotHeld))
	// Output:
	// held: true
	// released: true
}
