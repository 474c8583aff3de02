package main

import (
	"context"
	"fmt"
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
