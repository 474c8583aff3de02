package integration

import (
	"context"
	"errors"
	"net"
	"strings"
)

// The faults of a SentinelGroup's master, and the way back from them.

// Failover makes a running sentinel fail the master over at once
// (SENTINEL FAILOVER, without waiting for the master to be deemed down),
// and returns the new master once every running sentinel names it and it
// answers ROLE as a master (WaitNewMaster). It waits for a healthy group
// first (WaitHealthy).
//
// The old master keeps running as a master of its own, with its clients
// connected, until the sentinels reconfigure it as a replica of the new
// one (and close its clients' connections): Sentinel does that about 10s
// later, once the old master has reported its role for 8s and is asked
// again. WaitHealthy waits for that.
//
// May return the state that was awaited, joined with ctx's error, or a
// sentinel's refusal.
func (g *SentinelGroup) Failover(ctx context.Context) (*Server, error) {
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	old, err := g.WaitHealthy(ctx)
	if err != nil {
		return nil, err
	}
	var s *Server
	for _, x := range g.sentinels {
		if x.up() {
			s = x
			break
		}
	}
	if s == nil {
		return nil, errors.New("rlock: integration: no sentinel is running")
	}
	// A sentinel may not yet count a replica as a candidate right after
	// a previous failover (NOGOODSLAVE): ask again. INPROG means a
	// failover is under way, which is what was asked for.
	err = g.poll(ctx, "SENTINEL FAILOVER accepted", func(qctx context.Context) error {
		_, err := query(qctx, s.DirectAddr(), s.Password(), "SENTINEL", "FAILOVER", g.opts.MasterSet)
		var re replyError
		if errors.As(err, &re) && strings.HasPrefix(string(re), "INPROG") {
			return nil
		}
		if errors.As(err, &re) && !strings.HasPrefix(string(re), "NOGOODSLAVE") {
			return errStop{err}
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return g.WaitNewMaster(ctx, old)
}

// KillMaster kills the master (SIGKILL) and returns it; WaitNewMaster
// then waits for its successor. Restart it to have it rejoin as a
// replica (WaitHealthy).
//
// May return the errors of Master and of Server.Kill.
func (g *SentinelGroup) KillMaster(ctx context.Context) (*Server, error) {
	m, err := g.Master(ctx)
	if err != nil {
		return nil, err
	}
	return m, m.Kill(ctx)
}

// PauseMaster stops the master (SIGSTOP) and returns it: it keeps its
// connections but answers nothing, and the sentinels fail it over after
// DownAfter; WaitNewMaster waits for that. Resume it to have the
// sentinels make it a replica (WaitHealthy).
//
// May return the errors of Master and of Server.Pause.
func (g *SentinelGroup) PauseMaster(ctx context.Context) (*Server, error) {
	m, err := g.Master(ctx)
	if err != nil {
		return nil, err
	}
	return m, m.Pause(ctx)
}

// PartitionMaster cuts the master off behind its proxy (Server.Partition)
// and returns it: the sentinels, the replicas and every client that
// reached it through the sentinels lose their connections and cannot
// open new ones, so the sentinels fail it over after DownAfter
// (WaitNewMaster waits for that) and the replicas stop receiving its
// writes. The master itself runs on, still a master, and its DirectAddr
// still reaches it: a client connected there is the minority side of the
// partition. Heal it (Server.Heal), then Rejoin it.
//
// May return ErrNoProxy without SentinelOptions.Proxied, and the errors
// of Master and of Server.Partition.
func (g *SentinelGroup) PartitionMaster(ctx context.Context) (*Server, error) {
	if !g.opts.Proxied {
		return nil, ErrNoProxy
	}
	m, err := g.Master(ctx)
	if err != nil {
		return nil, err
	}
	return m, m.Partition(ctx)
}

// Rejoin makes s, a running server that is not the master (one restarted,
// resumed or healed after a failover, or any replica), a replica of the
// master at once, as the sentinels would about 10s later: REPLICAOF the
// master's Addr, sent to s's DirectAddr, then CLIENT KILL of its normal
// and pub/sub clients, as Sentinel sends them, so that clients still
// connected to an old master find out. It returns the master once the
// group is healthy (WaitHealthy): s has synchronised and every sentinel
// sees it as a replica.
//
// May return the state that was awaited, joined with ctx's error, or the
// error of a command sent to s.
func (g *SentinelGroup) Rejoin(ctx context.Context, s *Server) (*Server, error) {
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	if g.server(s.Addr()) != s {
		return nil, errors.New("rlock: integration: Rejoin of a server not of the group")
	}
	m, err := g.WaitNewMaster(ctx, s)
	if err != nil {
		return nil, err
	}
	host, port, _ := net.SplitHostPort(m.Addr())
	for _, cmd := range [][]string{
		{"REPLICAOF", host, port},
		{"CLIENT", "KILL", "TYPE", "normal"},
		{"CLIENT", "KILL", "TYPE", "pubsub"},
	} {
		if _, err := query(ctx, s.DirectAddr(), s.Password(), cmd...); err != nil {
			return nil, err
		}
	}
	return g.WaitHealthy(ctx)
}
