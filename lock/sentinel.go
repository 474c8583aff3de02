package lock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/pubsub"
	"github.com/rlock-go/rlock/reentrant"
)

// Redis Sentinel (Config.MasterSet): the rueidis client asks the
// sentinels for the master, and switches to the new one when a sentinel
// announces a failover (+switch-master), or when its periodic check
// finds another master. Commands, the watchdog's renewals among them,
// then go to the new master. Two things do not follow by themselves, and
// the Client's master follower moves them: the scripts, which the new
// master may not have (a NOSCRIPT answer would cost a round trip more),
// and the subscription connection, a dedicated connection that stays
// with the old master (still a master of its own until Sentinel demotes
// it, about 10s later), where the new master's releases never arrive.

// masterPoll is how often a Sentinel Client looks at which master rueidis
// talks to. rueidis has no event for it; the look is a read of its
// client's state, without I/O.
const masterPoll = 100 * time.Millisecond

// sentinelOption is rueidis's SentinelOption for cfg. rueidis asks the
// sentinels one after another, and bounds the connect and the handshake
// with each by its own dial timeout: each sentinel gets half of an equal
// share of DialTimeout, so that sentinels that accept connections and
// answer nothing (paused, overloaded) end New within it. TLS applies to
// the sentinels too, as Redisson's one SSL configuration does.
func sentinelOption(cfg Config, dial time.Duration) rueidis.SentinelOption {
	return rueidis.SentinelOption{
		MasterSet: cfg.MasterSet,
		Username:  cfg.SentinelUsername,
		Password:  cfg.SentinelPassword,
		TLSConfig: cfg.TLS,
		Dialer:    net.Dialer{Timeout: max(dial/time.Duration(2*len(cfg.Addrs)), time.Millisecond)},
		// A missed +switch-master would leave rueidis on the old master
		// for good: rueidis recommends a periodic check too. One per
		// watchdog tick (between 1s and 5s) finds it before the leases
		// it renews run out.
		TopologyRefreshInterval: min(5*time.Second, max(time.Second, cfg.RenewInterval)),
	}
}

// checkSentinel validates the Sentinel fields of a Config given to New.
func (c *Config) checkSentinel() error {
	if c.MasterSet == "" {
		if c.SentinelUsername != "" || c.SentinelPassword != "" {
			return invalidf("SentinelUsername or SentinelPassword without MasterSet")
		}
		return nil
	}
	switch {
	case c.Cluster:
		return invalidf("MasterSet %q with Cluster: a Client connects through Sentinel or to a cluster, not both", c.MasterSet)
	case !utf8.ValidString(c.MasterSet) || strings.IndexFunc(c.MasterSet, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		return invalidf("MasterSet %q: a master set name has no spaces or control characters", c.MasterSet)
	case len(c.Addrs) == 0:
		return invalidf("MasterSet %q without Addrs: give the sentinels' addresses", c.MasterSet)
	}
	return nil
}

// sentinels names a Sentinel deployment in errors about it, before its
// master is known: `master set "name" (sentinels a, b)`.
func sentinels(cfg Config) string {
	return fmt.Sprintf("master set %q (sentinels %s)", cfg.MasterSet, strings.Join(cfg.Addrs, ", "))
}

// sentinelErr classifies New's error from rueidis's Sentinel client,
// which tried every sentinel: err is the last one's answer, or the
// master's when a sentinel named one.
func sentinelErr(cfg Config, err error) error {
	where := sentinels(cfg)
	s := err.Error()
	switch {
	case strings.Contains(s, "No such master with that name"):
		return &MasterError{Addr: where, Op: "connect", kind: ErrInvalid,
			Err: fmt.Errorf("the sentinels monitor no master set %q: %w", cfg.MasterSet, err)}
	case strings.Contains(strings.ToLower(s), "unknown command 'sentinel"):
		return &MasterError{Addr: where, Op: "connect", kind: ErrInvalid,
			Err: fmt.Errorf("not a sentinel (with MasterSet, Addrs are the sentinels' addresses): %w", err)}
	}
	me := masterErr(where, "connect", err).(*MasterError)
	if errors.Is(me, ErrAuth) {
		me.Err = fmt.Errorf("%w (Username and Password are the master's, SentinelUsername and SentinelPassword the sentinels')", me.Err)
	}
	return me
}

// checkSentinelClient refuses, for FromClient, a rueidis Sentinel client
// that does not send every command to the master: every command of rlock
// writes, or must read what was written.
func checkSentinelClient(ctx context.Context, rc rueidis.Client) error {
	if n := len(rc.Nodes()); n != 1 {
		return invalidf("rueidis sentinel client with %d nodes (SendToReplicas): rlock needs every command on the master", n)
	}
	v, err := rc.Do(ctx, rc.B().Role().Build()).ToArray()
	if err != nil {
		if classify(err) == ErrAuth {
			return nil // ROLE not allowed to this user: nothing to tell
		}
		return masterErr(firstNode(rc), "connect", err)
	}
	if len(v) > 0 {
		if role, _ := v[0].ToString(); role != "master" {
			return invalidf("rueidis sentinel client sends its commands to %s, a replica (ROLE %s; ReplicaOnly): rlock needs the master", firstNode(rc), role)
		}
	}
	return nil
}

// followMaster runs in the background of a Sentinel Client until ctx
// ends: when rueidis has switched to another master, it loads the
// scripts there and moves the subscription connection (every waiter is
// woken and tries again on the new master, and is woken again once its
// channel is subscribed there).
func (c *Client) followMaster(ctx context.Context) {
	t := time.NewTicker(masterPoll)
	defer t.Stop()
	last := c.route.master()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := c.route.master()
		if now == last {
			continue
		}
		last = now
		// The scripts first, so that the waiters' attempts and the next
		// renewals are one round trip; if this fails, a NOSCRIPT answer
		// sends them as EVAL.
		lctx, cancel := c.e.cmdCtx(ctx)
		_ = reentrant.Load(lctx, c.rc)
		cancel()
		if h, ok := c.hub.(*pubsub.Hub); ok {
			_ = h.Reconnect(ctx) // ends with ErrClosed or ctx's error only when closing
		}
	}
}
