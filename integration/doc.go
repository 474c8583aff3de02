// Package integration starts real Redis servers for tests and injects faults
// into them: kill, restart on the same port (with or without data), pause
// (SIGSTOP), network partition and a fast or slow server clock.
//
// Each [Server] is a redis-server in its own temporary directory, fronted by
// a loopback TCP proxy that the Server owns. Two backends run it:
//
//   - [BackendProcess], built in: redis-server from PATH as a child
//     process, bound to 127.0.0.1. Kill is SIGKILL, Pause is SIGSTOP,
//     Resume SIGCONT.
//   - [BackendDocker]: a container of a local image built from the host's
//     redis-server, through testcontainers-go. Its [Driver] lives in the
//     module github.com/rlock-go/rlock/integration/docker, so that
//     testcontainers-go stays out of this module's graph; importing that
//     package registers it (see [Register]), and [Backends] then lists it.
//
// On both, Partition is done by the proxy, Restart reuses the same ports, and
// ClockRate runs the server under libfaketime. Clients under test connect to [Server.Addr] (the proxy) so that
// [Server.Partition] can cut them off; administrative code and benchmarks may
// use [Server.DirectAddr], which no fault except Kill and Pause affects.
//
// The proxy also reads the RESP it forwards, pairs each reply with its
// command, and applies the rules given to [Server.Inject]: drop one command
// or one reply, delay it, or reset the connection, chosen by what the
// command is ([Command], [CommandMatcher.WithArg], [MatchFunc]), for the
// next Times matching commands on any connection. A [Fault] reports its
// hits and can be waited for. Push frames and RESP2 subscribed connections
// are never paired; see [Action].
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
// [StartSentinel] (and [RedisSentinel] for tests) runs a Redis Sentinel
// deployment on the process backend: one master, its replicas and
// redis-sentinel processes (Debian package redis-sentinel) tuned to fail
// over within seconds. [SentinelGroup.Master] names the current master;
// [SentinelGroup.Failover] forces a failover (SENTINEL FAILOVER);
// [SentinelGroup.KillMaster] and [SentinelGroup.PauseMaster] fault the
// master and [SentinelGroup.WaitNewMaster] waits for its successor;
// [SentinelGroup.Rejoin] makes the old master a replica again at once;
// [SentinelGroup.WaitHealthy] waits until the deployment could fail over
// again. Its servers have no proxy unless [SentinelOptions].Proxied: then
// each server announces its proxy, the sentinels and replicas reach it
// only through that, and [SentinelGroup.PartitionMaster] cuts the master
// off from all of them but the test's own DirectAddr.
//
// A sentinel whose timer did not run for 2s enters TILT and fails nothing
// over for 30s. [SentinelGroup.Tilts] reads its TILTs from its log, and
// [RedisSentinel] logs each when the test ends, on a line starting with
// [StallMark] unless the test's own Pause of that sentinel explains it:
// internal/retest takes such a line, like a CPU stall, as evidence to run
// a failed test again. The sentinels' directories are in /dev/shm where
// it is writable, so that their fsyncs wait for no disk.
//
// [TestBackend] runs the package's own tests of a backend; the Docker
// module calls it for Docker.
//
// The package imports no package of this module but internal ones, so
// every package of the module may use it in its tests. It needs nothing
// beyond the standard library and rueidis.
//
// What the package does not do: it does not emulate random latency or packet
// loss (only the targeted faults of [Server.Inject]),
// it does not run cluster replicas, and every wait is bounded (by the
// caller's context or, when that has no deadline, by a default of
// [DefaultTimeout]) rather than retried forever.
package integration
