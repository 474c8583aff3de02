package docker_test

import (
	"context"
	"fmt"

	"github.com/rlock-go/rlock/integration"
	_ "github.com/rlock-go/rlock/integration/docker" // registers integration.BackendDocker
)

// Importing the package lets integration run redis-server in a container:
// Kill, Pause and the proxy's faults then act on the container.
func Example() {
	ctx := context.Background()
	srv, err := integration.StartRedis(ctx, integration.Options{Backend: integration.BackendDocker})
	if err != nil {
		fmt.Println(err) // integration.ErrBackendUnavailable without a Docker engine
		return
	}
	defer srv.Close()
	fmt.Println("redis-server in a container at", srv.Addr())
}
