// Package docker is the Docker backend of package
// github.com/rlock-go/rlock/integration: importing it registers
// integration.BackendDocker, so that integration.StartRedis,
// integration.Redis and integration.Backends can run redis-server in a
// container.
//
//	import _ "github.com/rlock-go/rlock/integration/docker"
//
// Each server is a container of a local image built from the host's
// redis-server and its libraries (build-image.sh in this folder; the
// backend builds the image itself when missing, and never pulls), run
// through testcontainers-go with its port published on 127.0.0.1 only.
// Kill is docker kill (SIGKILL), Pause and Resume freeze and thaw the
// container (retrying the engine's transient "unable to freeze"), the data
// directory is a bind mount of the host's temporary directory, and a
// ClockRate runs the server under the image's copy of libfaketime.
// Partition is done by integration's proxy, as on every backend.
//
// The package is a module of its own, so that testcontainers-go, the
// Docker client and their dependencies stay out of the module graph of
// github.com/rlock-go/rlock: a program that uses only the lock packages
// never downloads them.
package docker
