package integration

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rlock-go/rlock/integration/internal/backendkit"
)

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

// Cluster is a Redis Cluster of masters, with or without replicas, each
// node a redis-server process with its own directory and cluster config
// file. Its nodes have no proxy: cluster clients follow the addresses the
// nodes advertise (their own ports), so a proxy could not stay in the
// path.
type Cluster struct {
	nodes     []*Server // the masters, in slot order
	buses     []int     // the masters' cluster bus ports
	replicas  []*Server // replicas[i] replicates nodes[replicaOf[i]]
	rbuses    []int
	replicaOf []int
	dead      map[*Server]bool // killed by Failover
}

// StartCluster starts masters servers (at least 1) with cluster mode on,
// splits the 16384 slots evenly among them (CLUSTER ADDSLOTSRANGE), joins
// them with CLUSTER MEET on 127.0.0.1 and returns once every node reports
// cluster_state:ok and knows every other. The caller must Close it. Waits
// are bounded by ctx, or by DefaultTimeout when ctx has no deadline.
//
// It runs on the process backend only: opts.Backend BackendDocker is
// refused, "" means BackendProcess. opts.ClockRate and opts.Password are
// passed to every node.
//
// May return ErrBackendUnavailable, or the error of a node's start or of
// a cluster command.
func StartCluster(ctx context.Context, masters int, opts Options) (*Cluster, error) {
	return StartClusterWithReplicas(ctx, masters, 0, opts)
}

// StartClusterWithReplicas is StartCluster with replicas replicas of each
// master (CLUSTER REPLICATE), and returns once every replica is online on
// its master. Nodes of such a cluster time out after 2s instead of 5s, so
// that a failover is quick.
func StartClusterWithReplicas(ctx context.Context, masters, replicas int, opts Options) (*Cluster, error) {
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	if masters < 1 || replicas < 0 {
		return nil, fmt.Errorf("rlock: integration: cluster of %d masters with %d replicas each", masters, replicas)
	}
	switch opts.Backend {
	case "", BackendProcess:
		opts.Backend = BackendProcess
	default:
		return nil, fmt.Errorf("rlock: integration: a cluster runs on the process backend only, not %q", opts.Backend)
	}
	c := &Cluster{dead: map[*Server]bool{}}
	timeout := "5000"
	if replicas > 0 {
		timeout = "2000"
	}
	start := func() (*Server, int, error) {
		// The cluster bus port defaults to port+10000, which may be past
		// 65535 for an ephemeral port: take a free one of its own.
		bus, err := backendkit.FreePort()
		if err != nil {
			return nil, 0, err
		}
		o := opts
		o.Args = append([]string{
			"--cluster-enabled", "yes",
			// Relative to the server's own data directory.
			"--cluster-config-file", "nodes.conf",
			"--cluster-port", strconv.Itoa(bus),
			"--cluster-announce-ip", "127.0.0.1",
			"--cluster-node-timeout", timeout,
		}, opts.Args...)
		s, err := startServer(ctx, o, false)
		return s, bus, err
	}
	for range masters {
		s, bus, err := start()
		if err != nil {
			return nil, errors.Join(err, c.Close())
		}
		c.nodes = append(c.nodes, s)
		c.buses = append(c.buses, bus)
	}
	for i := range masters * replicas {
		s, bus, err := start()
		if err != nil {
			return nil, errors.Join(err, c.Close())
		}
		c.replicas = append(c.replicas, s)
		c.rbuses = append(c.rbuses, bus)
		c.replicaOf = append(c.replicaOf, i%masters)
	}
	if err := c.form(ctx); err != nil {
		return nil, errors.Join(err, c.Close())
	}
	return c, nil
}

// form assigns the slots, meets the nodes and waits for the cluster.
func (c *Cluster) form(ctx context.Context) error {
	n := len(c.nodes)
	for i, s := range c.nodes {
		lo, hi := i*clusterSlots/n, (i+1)*clusterSlots/n-1
		if _, err := command(ctx, s.DirectAddr(), s.Password(), "CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(lo), strconv.Itoa(hi)); err != nil {
			return err
		}
	}
	first := c.nodes[0]
	meet := func(s *Server, bus int) error {
		host, port, _ := net.SplitHostPort(s.DirectAddr())
		_, err := command(ctx, first.DirectAddr(), first.Password(), "CLUSTER", "MEET", host, port, strconv.Itoa(bus))
		return err
	}
	for i, s := range c.nodes[1:] {
		if err := meet(s, c.buses[i+1]); err != nil {
			return err
		}
	}
	for i, s := range c.replicas {
		if err := meet(s, c.rbuses[i]); err != nil {
			return err
		}
	}
	if err := c.WaitOK(ctx); err != nil {
		return err
	}
	for i, s := range c.replicas {
		m := c.nodes[c.replicaOf[i]]
		id, err := command(ctx, m.DirectAddr(), m.Password(), "CLUSTER", "MYID")
		if err != nil {
			return err
		}
		if _, err := command(ctx, s.DirectAddr(), s.Password(), "CLUSTER", "REPLICATE", id); err != nil {
			return err
		}
	}
	if err := c.WaitOK(ctx); err != nil {
		return err
	}
	return c.waitReplicas(ctx)
}

// waitReplicas waits until every live master has its live replicas online
// (INFO replication), polling every 20ms like WaitOK.
func (c *Cluster) waitReplicas(ctx context.Context) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		err := c.checkReplicas(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("rlock: integration: replicas not online: %w", errors.Join(err, context.Cause(ctx)))
		case <-t.C:
		}
	}
}

func (c *Cluster) checkReplicas(ctx context.Context) error {
	for i, m := range c.nodes {
		if c.dead[m] {
			continue
		}
		want := 0
		for j, r := range c.replicas {
			if c.replicaOf[j] == i && !c.dead[r] {
				want++
			}
		}
		info, err := command(ctx, m.DirectAddr(), m.Password(), "INFO", "replication")
		if err != nil {
			return err
		}
		if n := strings.Count(info, "state=online"); n != want {
			return fmt.Errorf("rlock: integration: master %s has %d replicas online, want %d", m.DirectAddr(), n, want)
		}
	}
	return nil
}

// Failover kills master i (SIGKILL) and promotes its first live replica
// at once (CLUSTER FAILOVER TAKEOVER, without waiting for the node
// timeout), and returns the new master once every live node reports the
// cluster ok. The new master takes the old one's place in Nodes; the old
// one stays dead until Close.
//
// May return an error when master i has no live replica, or a node's
// error.
func (c *Cluster) Failover(ctx context.Context, i int) (*Server, error) {
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	if i < 0 || i >= len(c.nodes) {
		return nil, fmt.Errorf("rlock: integration: no master %d", i)
	}
	old := c.nodes[i]
	j := -1
	for k, r := range c.replicas {
		if c.replicaOf[k] == i && !c.dead[r] {
			j = k
			break
		}
	}
	if j < 0 {
		return nil, fmt.Errorf("rlock: integration: master %d has no live replica", i)
	}
	if err := old.Kill(ctx); err != nil {
		return nil, err
	}
	c.dead[old] = true
	r := c.replicas[j]
	if _, err := command(ctx, r.DirectAddr(), r.Password(), "CLUSTER", "FAILOVER", "TAKEOVER"); err != nil {
		return nil, err
	}
	// The promoted replica is now master i; the old master's bus port goes
	// with it, the replica's own bus port is in rbuses.
	c.nodes[i], c.replicas[j] = r, old
	c.buses[i], c.rbuses[j] = c.rbuses[j], c.buses[i]
	if err := c.WaitOK(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// Rejoin restarts the masters Failover killed, keeping their cluster
// config file, so that each rejoins as a replica of the master that
// replaced it, and returns once every replica is online and the cluster
// ok: the cluster can then fail over again.
func (c *Cluster) Rejoin(ctx context.Context) error {
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	for s := range c.dead {
		if err := s.Restart(ctx, RestartOptions{KeepData: true}); err != nil {
			return err
		}
		delete(c.dead, s)
	}
	if err := c.WaitOK(ctx); err != nil {
		return err
	}
	return c.waitReplicas(ctx)
}

// Replicas returns the replicas, for faults (after Failover, the old
// master is among them, dead).
func (c *Cluster) Replicas() []*Server { return append([]*Server(nil), c.replicas...) }

// WaitOK waits until every node reports cluster_state:ok, knows every
// node and sees every slot assigned. There is no notification of the
// cluster's state, so it polls every 20ms, bounded by ctx (or
// DefaultTimeout).
//
// May return the last node's error or state, joined with ctx's error.
func (c *Cluster) WaitOK(ctx context.Context) error {
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		err := c.checkOK(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("rlock: integration: cluster not ready: %w", errors.Join(err, context.Cause(ctx)))
		case <-t.C:
		}
	}
}

func (c *Cluster) checkOK(ctx context.Context) error {
	want := map[string]string{
		"cluster_state":          "ok",
		"cluster_known_nodes":    strconv.Itoa(len(c.nodes) + len(c.replicas)),
		"cluster_slots_assigned": strconv.Itoa(clusterSlots),
		"cluster_slots_ok":       strconv.Itoa(clusterSlots),
	}
	for _, s := range append(c.Nodes(), c.replicas...) {
		if c.dead[s] {
			continue
		}
		info, err := command(ctx, s.DirectAddr(), s.Password(), "CLUSTER", "INFO")
		if err != nil {
			return err
		}
		got := map[string]string{}
		for line := range strings.SplitSeq(info, "\n") {
			if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
				got[k] = v
			}
		}
		for k, v := range want {
			if got[k] != v {
				return fmt.Errorf("rlock: integration: node %s: %s:%s, want %s", s.DirectAddr(), k, got[k], v)
			}
		}
	}
	return nil
}

// Addrs returns the nodes' addresses (their own ports), as seeds for a
// cluster client.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, s := range c.nodes {
		addrs[i] = s.DirectAddr()
	}
	return addrs
}

// Nodes returns the nodes, for faults. Partition and Heal return
// ErrNoProxy on them. A Restart without KeepData wipes the node's cluster
// config file with its data: the node then forgets the cluster.
func (c *Cluster) Nodes() []*Server { return append([]*Server(nil), c.nodes...) }

// Close closes every node. It is idempotent.
func (c *Cluster) Close() error {
	var errs []error
	for _, s := range append(c.Nodes(), c.replicas...) {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}

// RedisCluster starts a cluster for a test, like Redis, and closes it in
// tb.Cleanup.
func RedisCluster(tb testing.TB, masters int, opts Options) *Cluster {
	tb.Helper()
	return RedisClusterWithReplicas(tb, masters, 0, opts)
}

// RedisClusterWithReplicas is RedisCluster with replicas replicas of each
// master (see StartClusterWithReplicas).
func RedisClusterWithReplicas(tb testing.TB, masters, replicas int, opts Options) *Cluster {
	tb.Helper()
	c, err := StartClusterWithReplicas(context.Background(), masters, replicas, opts)
	if err != nil {
		skipOrFail(tb, err)
	}
	tb.Cleanup(func() {
		if err := c.Close(); err != nil {
			tb.Errorf("rlock: integration: close cluster: %v", err)
		}
	})
	return c
}

// command sends one command to addr (after AUTH when password is set) and
// returns its reply: a simple string, an integer or a bulk string, as
// text. An error reply is returned as an error.
func command(ctx context.Context, addr, password string, args ...string) (string, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", fmt.Errorf("rlock: integration: %s: %w", addr, err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	r := bufio.NewReader(conn)
	if password != "" {
		if err := backendkit.RoundTrip(conn, r, "+OK", "AUTH", password); err != nil {
			return "", fmt.Errorf("rlock: integration: %s: %w", addr, err)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		return "", fmt.Errorf("rlock: integration: %s: %w", addr, err)
	}
	reply, err := readReply(r)
	if err != nil {
		return "", fmt.Errorf("rlock: integration: %s %s: %w", addr, strings.Join(args, " "), err)
	}
	return reply, nil
}

// readReply reads one RESP2 reply that is not an array.
func readReply(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", errors.New(line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", fmt.Errorf("bad bulk reply %q", line)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return "", fmt.Errorf("unexpected reply %q", line)
}
