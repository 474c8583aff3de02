package integration

import "context"

// dockerAvailable reports whether the Docker backend can run here.
func dockerAvailable() error {
	return unavailable(BackendDocker, "not implemented yet")
}

func newDocker(_ context.Context, _ Options) (backend, error) {
	return nil, dockerAvailable()
}
