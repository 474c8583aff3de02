package main

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/integration"
)

// server is one redis-server process on loopback that the run started,
// through rlock's integration package.
type server struct {
	s *integration.Server
}

// startRedis starts one redis-server on 127.0.0.1 without persistence and
// returns once it answers PING.
func startRedis(ctx context.Context) (*server, error) {
	s, err := integration.StartRedis(ctx, integration.Options{})
	if err != nil {
		return nil, fmt.Errorf("starting redis-server (Debian: apt-get install redis-server): %w", err)
	}
	return &server{s: s}, nil
}

// startMasters starts n independent servers.
func startMasters(ctx context.Context, n int) ([]*server, error) {
	ss, err := integration.StartMasters(ctx, n, integration.Options{})
	if err != nil {
		return nil, fmt.Errorf("starting %d redis-servers: %w", n, err)
	}
	out := make([]*server, len(ss))
	for i, s := range ss {
		out[i] = &server{s: s}
	}
	return out, nil
}

// startReplicated starts a master and one replica of it on loopback,
// both without persistence like startRedis, and returns once the master
// lists the replica as online. The master syncs its replica without the
// default 5 s of diskless-sync delay, which only slows the start.
func startReplicated(ctx context.Context) (master, replica *server, err error) {
	m, err := integration.StartRedis(ctx, integration.Options{Args: []string{"--repl-diskless-sync-delay", "0"}})
	if err != nil {
		return nil, nil, fmt.Errorf("starting the master: %w", err)
	}
	master = &server{s: m}
	host, port, err := net.SplitHostPort(master.Addr())
	if err != nil {
		master.Close()
		return nil, nil, err
	}
	rs, err := integration.StartRedis(ctx, integration.Options{Args: []string{"--replicaof", host, port}})
	if err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("starting the replica: %w", err)
	}
	replica = &server{s: rs}
	if err := awaitReplica(ctx, master.Addr()); err != nil {
		replica.Close()
		master.Close()
		return nil, nil, err
	}
	return master, replica, nil
}

// awaitReplica waits until the master at addr lists a replica as online.
func awaitReplica(ctx context.Context, addr string) error {
	c, err := admin(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		m, err := info(ctx, c, "replication")
		if err != nil {
			return err
		}
		if strings.Contains(m["slave0"], "state=online") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the replica of %s was not online after 30s (INFO replication: %v)", addr, m)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond): // the server has no event for it
		}
	}
}

// Addr is the address benchmarks dial: the server itself, not the test
// proxy in front of it.
func (s *server) Addr() string { return s.s.DirectAddr() }

// Close stops the server.
func (s *server) Close() {
	if err := s.s.Close(); err != nil {
		logf("closing redis-server: %v", err)
	}
}

// admin is a plain rueidis client for INFO, CONFIG and FLUSHALL.
func admin(addr string) (rueidis.Client, error) {
	return rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, ForceSingleClient: true, DisableCache: true})
}

// info returns the fields of INFO section as a map.
func info(ctx context.Context, c rueidis.Client, section string) (map[string]string, error) {
	s, err := c.Do(ctx, c.B().Info().Section(section).Build()).ToString()
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if k, v, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(line, "#") {
			m[k] = v
		}
	}
	return m, nil
}

// redisCPU returns the server's own CPU time (INFO cpu: user + sys).
func redisCPU(ctx context.Context, c rueidis.Client) (time.Duration, error) {
	m, err := info(ctx, c, "cpu")
	if err != nil {
		return 0, err
	}
	u, _ := strconv.ParseFloat(m["used_cpu_user"], 64)
	s, _ := strconv.ParseFloat(m["used_cpu_sys"], 64)
	return time.Duration((u + s) * float64(time.Second)), nil
}

// commandStats returns calls per command from INFO commandstats, leaving
// out the benchmark's own INFO and CONFIG.
func commandStats(ctx context.Context, c rueidis.Client) (map[string]int64, error) {
	m, err := info(ctx, c, "commandstats")
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for k, v := range m {
		name, ok := strings.CutPrefix(k, "cmdstat_")
		if !ok || name == "info" || strings.HasPrefix(name, "config") {
			continue
		}
		calls, _, _ := strings.Cut(v, ",")
		n, _ := strconv.ParseInt(strings.TrimPrefix(calls, "calls="), 10, 64)
		out[name] = n
	}
	return out, nil
}

// resetStats clears INFO commandstats.
func resetStats(ctx context.Context, c rueidis.Client) error {
	return c.Do(ctx, c.B().ConfigResetstat().Build()).Error()
}

// redisVersion returns the server's version, from INFO server.
func redisVersion(ctx context.Context, c rueidis.Client) string {
	m, err := info(ctx, c, "server")
	if err != nil {
		return "unknown"
	}
	return m["redis_version"]
}
