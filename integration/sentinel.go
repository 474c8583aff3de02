package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rlock-go/rlock/integration/internal/backendkit"
)

// sentinelBin is the executable of a sentinel. Debian's redis-sentinel
// package links it to redis-server's binary, which runs as a sentinel
// under that name.
const sentinelBin = "redis-sentinel"

// DefaultMasterSet is the master set a SentinelGroup monitors when
// SentinelOptions.MasterSet is empty.
const DefaultMasterSet = "mymaster"

// SentinelOptions describes a Sentinel deployment. The zero value is one
// master, two replicas and three sentinels (quorum 2) monitoring
// DefaultMasterSet, tuned to fail over within a few seconds.
type SentinelOptions struct {
	// MasterSet is the name the sentinels monitor the master by. Default
	// DefaultMasterSet.
	MasterSet string
	// Replicas is the number of replicas of the master. Default 2.
	Replicas int
	// Sentinels is the number of redis-sentinel processes. Default 3.
	Sentinels int
	// Quorum is how many sentinels must agree that the master is down
	// before one fails it over. Default a majority of Sentinels.
	Quorum int
	// DownAfter is the sentinels' down-after-milliseconds: how long the
	// master must not answer before a sentinel deems it down. Default 2s:
	// shorter, a loaded machine sees failovers nobody asked for.
	DownAfter time.Duration
	// FailoverTimeout is the sentinels' failover-timeout: it bounds each
	// step of a failover, and a sentinel waits twice as long before it
	// tries a failed failover again. Default 3s.
	FailoverTimeout time.Duration
	// Password is the servers' requirepass and masterauth (replicas
	// authenticate to the master with it), and the sentinels' auth-pass.
	Password string
	// SentinelPassword is the sentinels' own requirepass (and the
	// sentinel-pass they use with each other).
	SentinelPassword string
	// Args are extra redis-server arguments for every server.
	Args []string
	// Proxied puts a fault proxy in front of every server, as StartRedis
	// does, and makes the servers announce it (replica-announce-ip and
	// replica-announce-port): the sentinels monitor the proxies, replicas
	// replicate through them, and clients following the sentinels reach
	// the servers through them only. PartitionMaster then cuts the master
	// off from all of them, while its DirectAddr still reaches it. Without
	// it, a server's Addr is its DirectAddr and Partition is refused.
	Proxied bool
}

// withDefaults fills the zero fields and checks the rest.
func (o SentinelOptions) withDefaults() (SentinelOptions, error) {
	if o.MasterSet == "" {
		o.MasterSet = DefaultMasterSet
	}
	if o.Replicas == 0 {
		o.Replicas = 2
	}
	if o.Sentinels == 0 {
		o.Sentinels = 3
	}
	if o.Quorum == 0 {
		o.Quorum = o.Sentinels/2 + 1
	}
	if o.DownAfter == 0 {
		o.DownAfter = 2 * time.Second
	}
	if o.FailoverTimeout == 0 {
		o.FailoverTimeout = 3 * time.Second
	}
	switch {
	case strings.ContainsAny(o.MasterSet, " \t\r\n"):
		return o, fmt.Errorf("rlock: integration: master set %q has white space", o.MasterSet)
	case o.Replicas < 1, o.Sentinels < 1, o.Quorum < 1, o.Quorum > o.Sentinels:
		return o, fmt.Errorf("rlock: integration: %d replicas, %d sentinels, quorum %d", o.Replicas, o.Sentinels, o.Quorum)
	case o.DownAfter < time.Millisecond, o.FailoverTimeout < time.Millisecond:
		return o, fmt.Errorf("rlock: integration: DownAfter %v, FailoverTimeout %v", o.DownAfter, o.FailoverTimeout)
	}
	return o, nil
}

// SentinelGroup is a Redis Sentinel deployment on loopback: redis-server
// processes (one master, the others its replicas) and redis-sentinel
// processes monitoring them, all on the process backend. Which server is
// the master changes with failovers: ask Master.
//
// The sentinels and the servers know each server by its Addr: with
// SentinelOptions.Proxied that is its proxy, which its server announces
// to the master it replicates, so that the proxy stays in every path but
// the test's own (DirectAddr); without, it is the server's own address
// and a Server's Partition is refused (ErrNoProxy). Kill, Restart, Pause
// and Resume work on the servers and the sentinels. A server restarted,
// resumed or healed after a failover comes back as a master of its own
// (with its data, or none) until the sentinels make it a replica again,
// about 10s later; Rejoin does it at once, and WaitHealthy waits for it.
//
// Every wait polls the processes' state (there is no notification of it
// that a test could use), every 50ms, bounded by its ctx or, when that
// has no deadline, by DefaultTimeout.
type SentinelGroup struct {
	opts      SentinelOptions
	servers   []*Server // the first one started as the master
	sentinels []*Server
}

// StartSentinel starts the servers of opts, waits until every replica has
// synchronised with the master, starts the sentinels and returns once
// they agree on the master and know every replica and every other
// sentinel (WaitHealthy). The caller must Close it.
//
// May return ErrBackendUnavailable (redis-server or redis-sentinel is not
// on PATH; Debian: apt-get install redis-server redis-sentinel), or the
// error of a start or of a wait with the state that was awaited.
func StartSentinel(ctx context.Context, opts SentinelOptions) (*SentinelGroup, error) {
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := processAvailable(); err != nil {
		return nil, err
	}
	if _, err := exec.LookPath(sentinelBin); err != nil {
		return nil, unavailable(BackendProcess, "%s not on PATH (Debian: apt-get install redis-sentinel): %w", sentinelBin, err)
	}
	g := &SentinelGroup{opts: opts}
	if err := g.startServers(ctx); err != nil {
		return nil, errors.Join(err, g.Close())
	}
	host, port, _ := net.SplitHostPort(g.servers[0].Addr())
	conf := g.sentinelConf(host, port)
	for range opts.Sentinels {
		s, err := startSentinelProcess(ctx, Options{Backend: BackendProcess, Password: opts.SentinelPassword}, conf)
		if err != nil {
			return nil, errors.Join(err, g.Close())
		}
		g.sentinels = append(g.sentinels, s)
	}
	if _, err := g.WaitHealthy(ctx); err != nil {
		return nil, errors.Join(err, g.Close())
	}
	return g, nil
}

// startServers starts the master and its replicas, each behind a proxy
// that it announces when Proxied, and waits until every replica has
// synchronised with the master.
func (g *SentinelGroup) startServers(ctx context.Context) error {
	args := []string{"--repl-diskless-sync-delay", "0"}
	if g.opts.Password != "" {
		args = append(args, "--masterauth", g.opts.Password)
	}
	args = append(args, g.opts.Args...)
	base := Options{Backend: BackendProcess, Password: g.opts.Password, Args: args}
	var first []string
	for range g.opts.Replicas + 1 {
		s, err := g.startServer(ctx, base, first)
		if err != nil {
			return err
		}
		g.servers = append(g.servers, s)
		if first == nil {
			host, port, _ := net.SplitHostPort(s.Addr())
			first = []string{"--replicaof", host, port}
		}
	}
	return g.poll(ctx, "replicas synchronised", func(ctx context.Context) error {
		return g.checkReplication(ctx, g.servers[0])
	})
}

// startServer starts one server of the group with base's options, pre
// coming before base's arguments.
func (g *SentinelGroup) startServer(ctx context.Context, base Options, pre []string) (*Server, error) {
	o := base
	if !g.opts.Proxied {
		o.Args = slices.Concat(pre, base.Args)
		return startBehind(ctx, o, nil)
	}
	p, err := listenProxy()
	if err != nil {
		return nil, err
	}
	host, port, _ := net.SplitHostPort(p.addr())
	o.Args = slices.Concat(pre, []string{"--replica-announce-ip", host, "--replica-announce-port", port}, base.Args)
	return startBehind(ctx, o, p)
}

// sentinelConf is every sentinel's configuration file: the master to
// monitor, and how fast to give up on it.
func (g *SentinelGroup) sentinelConf(host, port string) string {
	o := g.opts
	var b strings.Builder
	fmt.Fprintf(&b, "sentinel monitor %s %s %s %d\n", o.MasterSet, host, port, o.Quorum)
	fmt.Fprintf(&b, "sentinel down-after-milliseconds %s %d\n", o.MasterSet, o.DownAfter.Milliseconds())
	fmt.Fprintf(&b, "sentinel failover-timeout %s %d\n", o.MasterSet, o.FailoverTimeout.Milliseconds())
	fmt.Fprintf(&b, "sentinel parallel-syncs %s %d\n", o.MasterSet, o.Replicas)
	if o.Password != "" {
		fmt.Fprintf(&b, "sentinel auth-pass %s %s\n", o.MasterSet, o.Password)
	}
	if o.SentinelPassword != "" {
		fmt.Fprintf(&b, "sentinel sentinel-pass %s\n", o.SentinelPassword)
	}
	return b.String()
}

// startSentinelProcess starts redis-sentinel with the configuration conf
// on a free port.
func startSentinelProcess(ctx context.Context, opts Options, conf string) (*Server, error) {
	backendkit.ReapDirs()
	p, err := startProcess(ctx, opts, sentinelBin, conf)
	if err != nil {
		return nil, err
	}
	return &Server{opts: opts, kind: BackendProcess, b: p}, nil
}

// RedisSentinel starts a Sentinel deployment for a test, like Redis, and
// closes it in tb.Cleanup. It skips the test when redis-server or
// redis-sentinel is missing, unless RLOCK_REQUIRE names the process
// backend. Before it closes the group it logs every TILT of its sentinels
// (Tilts), those no Pause of the test explains on a line starting with
// StallMark: evidence of a stall, on which internal/retest runs a failed
// test again.
func RedisSentinel(tb testing.TB, opts SentinelOptions) *SentinelGroup {
	tb.Helper()
	g, err := StartSentinel(context.Background(), opts)
	if err != nil {
		skipOrFail(tb, err)
	}
	tb.Cleanup(func() {
		g.logTilts(tb)
		if err := g.Close(); err != nil {
			tb.Errorf("rlock: integration: close sentinel group: %v", err)
		}
	})
	return g
}

// MasterSet returns the name the sentinels monitor the master by.
func (g *SentinelGroup) MasterSet() string { return g.opts.MasterSet }

// SentinelAddrs returns the sentinels' addresses, for a client's
// configuration.
func (g *SentinelGroup) SentinelAddrs() []string {
	addrs := make([]string, len(g.sentinels))
	for i, s := range g.sentinels {
		addrs[i] = s.DirectAddr()
	}
	return addrs
}

// Sentinels returns the redis-sentinel processes, for faults. Their
// Password is SentinelOptions.SentinelPassword.
func (g *SentinelGroup) Sentinels() []*Server { return append([]*Server(nil), g.sentinels...) }

// Servers returns the redis-server processes, the master among them, in
// the order they were started (the first one was the first master).
func (g *SentinelGroup) Servers() []*Server { return append([]*Server(nil), g.servers...) }

// Master returns the master, once every running sentinel names the same
// server and that server answers ROLE as a master.
//
// May return the state that was awaited, joined with ctx's error.
func (g *SentinelGroup) Master(ctx context.Context) (*Server, error) {
	return g.waitMaster(ctx, nil)
}

// WaitNewMaster waits until every running sentinel names a master other
// than old, and that server answers ROLE as a master: after the master
// was killed, paused or partitioned (KillMaster, PauseMaster,
// PartitionMaster), a failover promoted a replica and the sentinels know
// it. It returns the new master. Clients hear of the change from the
// sentinels' +switch-master event, at about the same time but not
// necessarily before WaitNewMaster returns.
//
// May return the state that was awaited, joined with ctx's error.
func (g *SentinelGroup) WaitNewMaster(ctx context.Context, old *Server) (*Server, error) {
	if old == nil {
		return nil, errors.New("rlock: integration: WaitNewMaster of a nil master")
	}
	return g.waitMaster(ctx, old)
}

func (g *SentinelGroup) waitMaster(ctx context.Context, old *Server) (*Server, error) {
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	what := "sentinels agree on a master"
	if old != nil {
		what = "sentinels agree on a master other than " + old.Addr()
	}
	var m *Server
	err := g.poll(ctx, what, func(ctx context.Context) (err error) {
		m, err = g.checkMaster(ctx, old)
		return err
	})
	return m, err
}

// WaitHealthy waits until the deployment could fail over again: every
// running sentinel names the same master, which answers ROLE as a master;
// every other running server replicates it with its link up and no sync
// in progress; and every running sentinel sees the master up, every
// running server but the master as its replica, up, and as many other
// sentinels as are running. Paused and killed processes are left out. It
// returns the master.
//
// After a failover that can take 10s or more: Sentinel reconfigures a
// returning old master as a replica only once it has reported its role
// for 8s, and asks replicas for it every 10s.
//
// May return the state that was awaited, joined with ctx's error.
func (g *SentinelGroup) WaitHealthy(ctx context.Context) (*Server, error) {
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	var m *Server
	err := g.poll(ctx, "sentinel group healthy", func(ctx context.Context) (err error) {
		if m, err = g.checkMaster(ctx, nil); err != nil {
			return err
		}
		if err := g.checkReplication(ctx, m); err != nil {
			return err
		}
		return g.checkSentinels(ctx, m)
	})
	return m, err
}

// Close closes the sentinels, then the servers. It is idempotent.
func (g *SentinelGroup) Close() error {
	var errs []error
	for _, s := range g.sentinels {
		errs = append(errs, s.Close())
	}
	for _, s := range g.servers {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}
