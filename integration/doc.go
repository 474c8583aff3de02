// Package integration starts real Redis servers for tests and injects faults
// into them: kill, restart on the same port (with or without data), pause
// (SIGSTOP), network partition and a fast or slow server clock.
//
// Each [Server] is a redis-server in its own temporary directory, fronted by
// a loopback TCP proxy that the Server owns. Two backends run it:
//
//   - [BackendProcess]: redis-server from PATH as a child process, bound to
//     127.0.0.1. Kill is SIGKILL, Pause is SIGSTOP, Resume SIGCONT.
//   - [BackendDocker]: a container of a local image built from the host's
//     redis-server and its libraries (docker/build-image.sh; the backend
//     builds it itself when missing, and never pulls), through
//     testcontainers-go, its port published on 127.0.0.1 only. Kill is
//     docker kill (SIGKILL), Pause and Resume freeze and thaw the container,
//     the data directory is a bind mount of the host's temporary directory.
//
// On both, Partition is done by the proxy, Restart reuses the same ports, and
// ClockRate runs the server under libfaketime. Clients under test connect to [Server.Addr] (the proxy) so that
// [Server.Partition] can cut them off; administrative code and benchmarks may
// use [Server.DirectAddr], which no fault except Kill and Pause affects.
//
// [StartCluster] (and [RedisCluster] for tests) runs a Redis Cluster of
// masters on the process backend: slots split evenly, nodes joined with
// CLUSTER MEET, ready once every node reports cluster_state:ok. Its nodes
// have no proxy, since cluster clients follow the ports the nodes
// advertise; Kill, Restart and Pause work on them, Partition does not.
//
// Tests use [Redis] and [Masters], which register Close with tb.Cleanup and
// skip when the backend cannot run on this machine. Set RLOCK_REQUIRE to a
// comma-separated list of backends ("process,docker") to turn those skips
// into failures, for CI machines that must run everything. Code without a
// testing.TB uses [StartRedis] and [StartMasters] and must call
// [Server.Close].
//
// A server process never outlives the test binary: it is started with
// Pdeathsig=SIGKILL, so the kernel kills it when the thread that started it
// exits, even when the binary itself is killed. (Go only ends an OS thread
// when a goroutine exits while locked to it with runtime.LockOSThread; a test
// that does so may lose a server early.) Containers cannot be tied to the
// binary that way, and Ryuk, which would remove them, is disabled because
// it would have to be pulled; so a killed binary leaves its containers and
// temporary directories behind until the next binary using this package on
// the same machine starts its first server and removes them.
//
// The package imports no other package of this module, so every package of
// the module may use it in its tests.
//
// What the package does not do: it does not emulate latency or packet loss,
// it does not run Sentinel or cluster replicas, and every wait is bounded (by the
// caller's context or, when that has no deadline, by a default of
// [DefaultTimeout]) rather than retried forever.
package integration
