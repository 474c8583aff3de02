package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// pollInterval is how often a SentinelGroup's waits look at the state.
const pollInterval = 50 * time.Millisecond

// errStop ends a poll at once with its error.
type errStop struct{ err error }

func (e errStop) Error() string { return e.err.Error() }
func (e errStop) Unwrap() error { return e.err }

// poll runs check every pollInterval, each run bounded by a second, until
// it returns nil or an errStop, or ctx ends. On a timeout the error says
// what was awaited, the last check's error, and the tail of every
// sentinel's log.
func (g *SentinelGroup) poll(ctx context.Context, what string, check func(context.Context) error) error {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		err := check(cctx)
		cancel()
		var stop errStop
		if err == nil {
			return nil
		}
		if errors.As(err, &stop) {
			return fmt.Errorf("rlock: integration: %s: %w", what, stop.err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("rlock: integration: waiting for %s: %w%s", what, errors.Join(err, context.Cause(ctx)), g.logs())
		case <-t.C:
		}
	}
}

// logs returns the last lines of every sentinel's log, for an error.
func (g *SentinelGroup) logs() string { return g.Logs(8) }

// Logs returns the last n lines of every sentinel's log (what each saw
// and did: +sdown, +switch-master, ...), for a failing test's message.
func (g *SentinelGroup) Logs(n int) string {
	var b strings.Builder
	for _, s := range g.sentinels {
		if p, ok := s.b.(*process); ok {
			fmt.Fprintf(&b, "\nsentinel %s log:\n%s", s.DirectAddr(), logTail(p.logSince(0), n))
		}
	}
	return b.String()
}

// up reports whether s runs and is not paused.
func (s *Server) up() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || !s.b.running() {
		return false
	}
	p, ok := s.b.(*process)
	return !ok || !p.paused
}

// server returns the group's server known at addr (its Addr), or nil.
func (g *SentinelGroup) server(addr string) *Server {
	for _, s := range g.servers {
		if s.Addr() == addr {
			return s
		}
	}
	return nil
}

// running returns the running, unpaused processes of ss.
func running(ss []*Server) []*Server {
	var out []*Server
	for _, s := range ss {
		if s.up() {
			out = append(out, s)
		}
	}
	return out
}

// checkMaster returns the master every running sentinel names, when it is
// one of the group's servers other than old, runs, and answers ROLE as a
// master.
func (g *SentinelGroup) checkMaster(ctx context.Context, old *Server) (*Server, error) {
	sentinels := running(g.sentinels)
	if len(sentinels) == 0 {
		return nil, errStop{errors.New("no sentinel is running")}
	}
	addr := ""
	for _, s := range sentinels {
		v, err := query(ctx, s.DirectAddr(), s.Password(), "SENTINEL", "GET-MASTER-ADDR-BY-NAME", g.opts.MasterSet)
		if err != nil {
			return nil, err
		}
		a, _ := v.([]any)
		if len(a) != 2 {
			return nil, fmt.Errorf("sentinel %s does not know master set %q", s.DirectAddr(), g.opts.MasterSet)
		}
		host, _ := a[0].(string)
		port, _ := a[1].(string)
		got := net.JoinHostPort(host, port)
		if addr != "" && got != addr {
			return nil, fmt.Errorf("sentinels disagree: %s names %s, another %s", s.DirectAddr(), got, addr)
		}
		addr = got
	}
	if old != nil && addr == old.Addr() {
		return nil, fmt.Errorf("sentinels still name %s", addr)
	}
	m := g.server(addr)
	if m == nil {
		return nil, fmt.Errorf("sentinels name %s, not a server of the group", addr)
	}
	if !m.up() {
		return nil, fmt.Errorf("sentinels name %s, which is down", addr)
	}
	if role, err := g.role(ctx, m); err != nil || role != "master" {
		return nil, fmt.Errorf("sentinels name %s, whose role is %q (%v)", addr, role, err)
	}
	return m, nil
}

// role returns s's ROLE: master, slave.
func (g *SentinelGroup) role(ctx context.Context, s *Server) (string, error) {
	v, err := query(ctx, s.DirectAddr(), s.Password(), "ROLE")
	if err != nil {
		return "", err
	}
	a, _ := v.([]any)
	if len(a) == 0 {
		return "", fmt.Errorf("ROLE of %s: %v", s.DirectAddr(), v)
	}
	r, _ := a[0].(string)
	return r, nil
}

// checkReplication checks that every running server but m replicates m,
// with its link up and no sync in progress.
func (g *SentinelGroup) checkReplication(ctx context.Context, m *Server) error {
	for _, s := range running(g.servers) {
		if s == m {
			continue
		}
		v, err := query(ctx, s.DirectAddr(), s.Password(), "INFO", "replication")
		if err != nil {
			return err
		}
		info, _ := v.(string)
		f := infoFields(info)
		switch {
		case f["role"] != "slave", net.JoinHostPort(f["master_host"], f["master_port"]) != m.Addr():
			return fmt.Errorf("%s: role %s of %s:%s, want a replica of %s", s.Addr(), f["role"], f["master_host"], f["master_port"], m.Addr())
		case f["master_link_status"] != "up", f["master_sync_in_progress"] != "0":
			return fmt.Errorf("%s: replica link %s, sync in progress %s", s.Addr(), f["master_link_status"], f["master_sync_in_progress"])
		}
	}
	return nil
}

// checkSentinels checks that every running sentinel sees m up, every
// other running server as its replica and up, and the other running
// sentinels. A replica's link as the sentinels see it is left out: they
// read it every 10s, and checkReplication asks the servers themselves.
func (g *SentinelGroup) checkSentinels(ctx context.Context, m *Server) error {
	sentinels := running(g.sentinels)
	for _, s := range sentinels {
		v, err := query(ctx, s.DirectAddr(), s.Password(), "SENTINEL", "MASTER", g.opts.MasterSet)
		if err != nil {
			return err
		}
		f := fields(v)
		if f["flags"] != "master" {
			return fmt.Errorf("sentinel %s: master flags %q", s.DirectAddr(), f["flags"])
		}
		if n, _ := strconv.Atoi(f["num-other-sentinels"]); n < len(sentinels)-1 {
			return fmt.Errorf("sentinel %s knows %d other sentinels, want %d", s.DirectAddr(), n, len(sentinels)-1)
		}
		v, err = query(ctx, s.DirectAddr(), s.Password(), "SENTINEL", "REPLICAS", g.opts.MasterSet)
		if err != nil {
			return err
		}
		known := map[string]map[string]string{}
		a, _ := v.([]any)
		for _, r := range a {
			f := fields(r)
			known[net.JoinHostPort(f["ip"], f["port"])] = f
		}
		for _, r := range running(g.servers) {
			if r == m {
				continue
			}
			f, ok := known[r.Addr()]
			switch {
			case !ok:
				return fmt.Errorf("sentinel %s does not know replica %s", s.DirectAddr(), r.Addr())
			case f["flags"] != "slave":
				return fmt.Errorf("sentinel %s sees replica %s: flags %q", s.DirectAddr(), r.Addr(), f["flags"])
			}
		}
	}
	return nil
}
