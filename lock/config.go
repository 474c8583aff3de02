package lock

import (
	"crypto/tls"
	"math"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/rlock-go/rlock/observe"
)

// Defaults, Redisson's where Redisson has one.
const (
	DefaultAddr            = "127.0.0.1:6379"
	DefaultWatchdogTimeout = 30 * time.Second // Redisson's lockWatchdogTimeout
	// DefaultFairLockWaitTimeout is Redisson's fairLockWaitTimeout: see
	// Config.FairLockWaitTimeout.
	DefaultFairLockWaitTimeout = 5 * time.Minute
	// MinLease is the shortest lease accepted: below it, a lease is shorter
	// than a round trip on a loaded network and Redis's own expiry
	// granularity.
	MinLease = 50 * time.Millisecond
	// defaultDialTimeout and defaultCommandTimeout: see Config.
	defaultDialTimeout    = 5 * time.Second
	defaultCommandTimeout = 3 * time.Second
	// minRenewInterval is the shortest RenewInterval accepted.
	minRenewInterval = 10 * time.Millisecond
	// minCommandTimeout is the shortest CommandTimeout accepted: no
	// round trip to a Redis server, even on loopback, is sure to be
	// answered sooner, and every call would time out (P1-90).
	minCommandTimeout = time.Millisecond
	// maxNameLen is the longest lock name accepted, in bytes (8 KiB).
	maxNameLen = 8 << 10
	// unlockLatchTTL is the least time a request's record (a release's
	// unlock latch, a settlement's fence) lives: it must outlast every
	// retry of the request. Redisson deletes a latch once answered; so
	// does rlock.
	unlockLatchTTL = time.Minute
)

// PubSubMode chooses how unlock messages travel.
type PubSubMode int

const (
	// PubSubAuto is Redisson's AUTO: in a Redis Cluster, sharded pub/sub
	// when PUBSUB SHARDNUMSUB succeeds (Redis >= 7), plain otherwise. A
	// standalone master always gets PubSubPlain.
	PubSubAuto PubSubMode = iota
	// PubSubPlain publishes with PUBLISH and waits with SUBSCRIBE.
	PubSubPlain
	// PubSubSharded publishes with SPUBLISH and waits with SSUBSCRIBE
	// (Redis >= 7). Use it only if the Redisson services on the same
	// locks do so too, or waiters of each side miss the other's releases
	// (exclusion is kept either way).
	PubSubSharded
)

// Config configures a Client. Its zero value means Redisson's defaults on
// a local master at 127.0.0.1:6379. Config is validated by New.
type Config struct {
	// Addrs is the address of the ONE standalone master, host:port, or a
	// URL as Redisson writes it: redis://[[user]:password@]host:port[/db],
	// rediss:// for TLS (valkey:// and valkeys:// too). Default
	// DefaultAddr. A URL's user and password win over Username and
	// Password (over SentinelUsername and SentinelPassword with
	// MasterSet), as Redisson's address wins over its config's password;
	// several URLs must carry the same ones, or none. Its /db sets DB,
	// and must agree with a DB given. rediss:// sets TLS to a
	// tls.Config for the URL's host when TLS is nil; URLs of both schemes
	// are ErrInvalid. For several independent masters, make one
	// Client each and use package multilock. With Cluster, Addrs are
	// seed nodes of one Redis Cluster: one or several. With MasterSet,
	// they are the sentinels' addresses (required): one or several.
	Addrs []string
	// Cluster connects to a Redis Cluster: each lock lives on the master
	// owning its slot, waiters subscribe there (see PubSub), and the
	// watchdog still renews everything in one round trip per tick (one
	// batch per node, sent together). DB must be 0.
	Cluster bool
	// MasterSet connects through Redis Sentinel (Redisson's
	// sentinelServersConfig, masterName): Addrs are then the sentinels'
	// addresses, one or several, and the Client follows the master of this
	// set across failovers (see the package documentation for what a
	// failover does to held locks). Username and Password are the master's;
	// SentinelUsername and SentinelPassword the sentinels' own, if any
	// (ErrInvalid without MasterSet). TLS applies to the sentinels too.
	// Not with Cluster.
	MasterSet        string
	SentinelUsername string
	SentinelPassword string
	// Username and Password authenticate (ACL user, or requirepass with an
	// empty Username).
	Username string
	Password string
	// TLS, when set, connects with TLS.
	TLS *tls.Config
	// DB selects the logical database. Default 0.
	DB int
	// ClientID is the first part of every holder field,
	// "<ClientID>:<owner>". Default: a random UUID, like Redisson's per
	// client. Two Clients must never share one.
	ClientID string
	// WatchdogTimeout is the lease of locks taken without an explicit
	// Lease; the watchdog renews it. Default 30s.
	WatchdogTimeout time.Duration
	// RenewInterval is the watchdog's tick. Default WatchdogTimeout/3; it
	// must be at least 10ms and less than WatchdogTimeout.
	RenewInterval time.Duration
	// PubSub chooses PUBLISH/SUBSCRIBE or their sharded forms. Default
	// PubSubAuto.
	PubSub PubSubMode
	// DialTimeout bounds connecting. Default 5s. With MasterSet, the
	// sentinels, asked one after another, share it: each connect, and
	// each handshake, gets DialTimeout / (2 × len(Addrs)).
	DialTimeout time.Duration
	// CommandTimeout bounds each single command (one acquire attempt, one
	// release attempt, a query). Default 3s, or less when the lease
	// needs it: CommandTimeout + RenewInterval must be less than
	// WatchdogTimeout. At least 1ms.
	CommandTimeout time.Duration
	// ReplicaSyncTimeout is how long an acquire, a release or a renewal
	// waits for the master's connected replicas to acknowledge it (WAIT),
	// as Redisson's checkLockSyncedSlaves does with slavesSyncTimeout:
	// when none did, an acquire gives the hold back and tries again, a
	// release is sent again (its unlock latch answers it, never releasing
	// twice), and a renewal does not extend the lease (the watchdog tells
	// the holder of the loss when the lease a replica last saw runs out).
	// The check fails closed: only a master whose last ROLE answer listed
	// no replica, and that this Client never saw with one, is not asked.
	// One that had some and now reports none (cut off from them by a
	// partition), or whose ROLE goes unanswered, still needs one
	// acknowledgement, so requests fail with ErrUnavailable until a
	// replica is back or ROLE is answered. The Client's ACL user needs
	// ROLE: New (and an acquire on a master that refuses it) fails with
	// ErrAuth naming it otherwise, and with ErrInvalid on a server that
	// does not know ROLE (renamed away; miniredis): turn replica sync off
	// there. Default 1s, Redisson's (or
	// WatchdogTimeout/4 when shorter); it must be less than half of
	// WatchdogTimeout; negative: no check (checkLockSyncedSlaves false).
	ReplicaSyncTimeout time.Duration
	// FairLockWaitTimeout is how long a waiter of a fair lock (FairMutex)
	// keeps its place in the queue beyond the wait of the one ahead of
	// it, when it does not come back (Redisson's fairLockWaitTimeout, the
	// fair lock's threadWaitTime): a waiter that died is pruned after it.
	// A TryLock with a Wait option queues with that wait instead, as
	// Redisson's tryLock(waitTime, ...) does. Default 5 minutes,
	// Redisson's; Java and Go services on the same fair locks should use
	// the same.
	FairLockWaitTimeout time.Duration
	// NameMapper maps every lock name before it becomes a key, as a
	// Redisson nameMapper does: Client.Mutex(name) is the lock
	// NameMapper(name), whose key, unlock channel, latch and token names
	// all derive from the mapped name, and Mutex.Name and Held.Name return
	// the mapped name (what Redis holds). A mapped name that is empty,
	// longer than 8 KiB or not UTF-8 is ErrInvalid, like any name. Java
	// and Go services on the same locks must map names alike: a Redisson
	// nameMapper and no NameMapper (or the reverse) lock different keys
	// and do not exclude each other. It must be safe for concurrent use.
	// Default none.
	NameMapper func(name string) string
	// AlwaysRESP2 speaks RESP2 only: for servers without RESP3, such as
	// an embedded miniredis.
	AlwaysRESP2 bool
	// Observer receives the lock's events. Default none.
	Observer *observe.Observer
}

// withDefaults fills zero fields and validates the rest.
func (c Config) withDefaults(needAddr bool) (Config, error) {
	if needAddr {
		if err := c.checkSentinel(); err != nil {
			return c, err
		}
		if err := c.addrs(); err != nil {
			return c, err
		}
	}
	if err := c.timing(); err != nil {
		return c, err
	}
	if c.DB < 0 || c.DB > math.MaxInt32 || (c.Cluster && c.DB != 0) {
		return c, invalidf("DB %d", c.DB)
	}
	if c.PubSub < PubSubAuto || c.PubSub > PubSubSharded {
		return c, invalidf("PubSub mode %d", c.PubSub)
	}
	return c, nil
}

// addrs fills and checks Addrs.
func (c *Config) addrs() error {
	switch len(c.Addrs) {
	case 0:
		c.Addrs = []string{DefaultAddr}
	case 1:
	default:
		if !c.Cluster && c.MasterSet == "" {
			return invalidf("%d addresses: a Client talks to one master (or, with Cluster, one cluster; with MasterSet, the sentinels of one master set); use package multilock for several", len(c.Addrs))
		}
	}
	return c.addrURLs()
}

// addrURLs turns the URLs among Addrs into host:port, applying their
// credentials, database and TLS (see Addrs), and checks every address.
func (c *Config) addrURLs() error {
	var seen *addrURL
	addrs := make([]string, len(c.Addrs))
	for i, a := range c.Addrs {
		if !strings.Contains(a, "://") {
			if _, _, err := net.SplitHostPort(a); err != nil {
				return invalidf("address %q: want host:port or a redis:// URL: %v", a, err)
			}
			addrs[i] = a
			continue
		}
		u, err := parseAddrURL(a)
		if err != nil {
			return err
		}
		if seen == nil {
			seen = &u
		} else if err := seen.agrees(u); err != nil {
			return err
		}
		addrs[i] = u.hostPort
	}
	if seen == nil {
		return nil
	}
	if err := c.applyURL(*seen); err != nil {
		return err
	}
	c.Addrs = addrs
	return nil
}

// agrees checks that u asks for the same connection settings as the
// first URL, s: one Client makes every connection alike.
func (s addrURL) agrees(u addrURL) error {
	switch {
	case u.tls != s.tls:
		return invalidf("addresses %q and %q: some rediss:// and some redis://: one connection takes TLS or not", redactURL(s.raw), redactURL(u.raw))
	case u.user != s.user || u.password != s.password:
		return invalidf("addresses %q and %q carry different credentials: one Client uses one user and password", redactURL(s.raw), redactURL(u.raw))
	case u.db != s.db:
		return invalidf("addresses %q and %q name different databases", redactURL(s.raw), redactURL(u.raw))
	}
	return nil
}

// applyURL sets what the addresses' URL u says: its database (which must
// agree with DB), its credentials (the sentinels' with MasterSet; they win
// over the password fields), TLS for rediss://.
func (c *Config) applyURL(u addrURL) error {
	if u.db >= 0 {
		if c.DB != 0 && c.DB != u.db {
			return invalidf("address %q names database %d, but DB is %d", redactURL(u.raw), u.db, c.DB)
		}
		c.DB = u.db
	}
	if u.hasAuth {
		if c.MasterSet != "" {
			c.SentinelUsername, c.SentinelPassword = u.user, u.password
		} else {
			c.Username, c.Password = u.user, u.password
		}
	}
	if u.tls && c.TLS == nil {
		host, _, _ := net.SplitHostPort(u.hostPort)
		c.TLS = &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
	}
	return nil
}

// addrURL is one address given as a URL.
type addrURL struct {
	raw            string
	hostPort       string
	user, password string
	hasAuth        bool
	db             int // -1: none given
	tls            bool
}

// parseAddrURL reads redis://[[user]:password@]host:port[/db] (rediss://
// for TLS; valkey:// and valkeys:// alike). A userinfo without ':' is the
// password, as Redisson reads it.
func parseAddrURL(a string) (addrURL, error) {
	u, err := url.Parse(a)
	if err != nil {
		return addrURL{}, invalidf("address %q: not a URL: want host:port or redis://[[user]:password@]host:port[/db]", redactURL(a))
	}
	out := addrURL{raw: a, db: -1}
	switch u.Scheme {
	case "redis", "valkey":
	case "rediss", "valkeys":
		out.tls = true
	default:
		return addrURL{}, invalidf("address %q: unknown scheme %q: want host:port, redis:// or rediss://", redactURL(a), u.Scheme)
	}
	if u.Port() == "" || u.Hostname() == "" {
		return addrURL{}, invalidf("address %q: want host and port, as redis://host:6379", redactURL(a))
	}
	out.hostPort = u.Host
	if u.User != nil {
		out.hasAuth = true
		if pw, ok := u.User.Password(); ok {
			out.user, out.password = u.User.Username(), pw
		} else {
			out.password = u.User.Username()
		}
	}
	if p := strings.Trim(u.Path, "/"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return addrURL{}, invalidf("address %q: %q is not a database number", redactURL(a), p)
		}
		out.db = n
	}
	return out, nil
}

// redactURL hides the password of an address URL, for messages.
func redactURL(a string) string {
	u, err := url.Parse(a)
	if err != nil || u.User == nil {
		if i, j := strings.Index(a, "://"), strings.LastIndex(a, "@"); i >= 0 && j > i {
			return a[:i+3] + "xxxxx" + a[j:]
		}
		return a
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	} else {
		u.User = url.User("xxxxx")
	}
	return u.String()
}

// timing fills and checks the lease, the renewal and the timeouts.
// commandTiming checks DialTimeout and CommandTimeout, and sets
// CommandTimeout's default; WatchdogTimeout and RenewInterval are set.
func (c *Config) commandTiming() error {
	if c.DialTimeout < 0 || c.CommandTimeout < 0 {
		return invalidf("negative timeout")
	}
	if c.CommandTimeout == 0 {
		// A renewal sent at a tick must be answered before the lease
		// it extends runs out.
		c.CommandTimeout = min(defaultCommandTimeout, (c.WatchdogTimeout-c.RenewInterval)/2)
	}
	if c.CommandTimeout < minCommandTimeout {
		return invalidf("CommandTimeout %v is shorter than %v: no round trip to Redis is answered that soon", c.CommandTimeout, minCommandTimeout)
	}
	if c.CommandTimeout+c.RenewInterval >= c.WatchdogTimeout {
		return invalidf("CommandTimeout %v + RenewInterval %v must be less than WatchdogTimeout %v: a renewal could be answered after the lease it extends ran out",
			c.CommandTimeout, c.RenewInterval, c.WatchdogTimeout)
	}
	return nil
}

func (c *Config) timing() error {
	if c.WatchdogTimeout == 0 {
		c.WatchdogTimeout = DefaultWatchdogTimeout
	}
	if c.WatchdogTimeout < MinLease {
		return invalidf("WatchdogTimeout %v is shorter than %v", c.WatchdogTimeout, MinLease)
	}
	if c.RenewInterval == 0 {
		c.RenewInterval = c.WatchdogTimeout / 3
	}
	if c.RenewInterval < minRenewInterval || c.RenewInterval >= c.WatchdogTimeout {
		return invalidf("RenewInterval %v must be at least %v and less than WatchdogTimeout %v", c.RenewInterval, minRenewInterval, c.WatchdogTimeout)
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = defaultDialTimeout
	}
	if err := c.commandTiming(); err != nil {
		return err
	}
	if c.FairLockWaitTimeout == 0 {
		c.FairLockWaitTimeout = DefaultFairLockWaitTimeout
	}
	if c.FairLockWaitTimeout < 0 {
		return invalidf("negative FairLockWaitTimeout %v", c.FairLockWaitTimeout)
	}
	if c.ReplicaSyncTimeout == 0 {
		c.ReplicaSyncTimeout = min(defaultReplicaSyncTimeout, c.WatchdogTimeout/4)
	}
	if c.ReplicaSyncTimeout >= c.WatchdogTimeout/2 {
		return invalidf("ReplicaSyncTimeout %v must be less than half of WatchdogTimeout %v: an acquisition acknowledged later could not be used", c.ReplicaSyncTimeout, c.WatchdogTimeout)
	}
	return nil
}
