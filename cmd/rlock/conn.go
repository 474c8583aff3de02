package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"

	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/redissonconfig"
)

// Environment variables read by run and inspect.
const (
	envAddr             = "RLOCK_ADDR"              // default --addr
	envPassword         = "RLOCK_PASSWORD"          // default --password (keeps it out of ps)
	envSentinelPassword = "RLOCK_SENTINEL_PASSWORD" // default --sentinel-password
)

// connFlags are the flags that say how to reach Redis, shared by run and
// inspect. resolve turns them, with --redisson-config's file, into the
// lock.Config of each master.
type connFlags struct {
	fs               *flag.FlagSet // to tell the flags given from defaults
	addr             string
	cluster          bool
	sentinelMaster   string
	sentinels        string
	sentinelUsername string
	sentinelPassword string
	db               int
	username         string
	password         string
	tls              bool
	tlsCA            string
	tlsCert          string
	tlsKey           string
	tlsServerName    string
	redissonConfig   string
}

// register adds the connection flags to fs; addrUsage describes --addr.
func (c *connFlags) register(fs *flag.FlagSet, addrUsage string) {
	c.fs = fs
	fs.StringVar(&c.addr, "addr", envOr(envAddr, lock.DefaultAddr), addrUsage)
	fs.BoolVar(&c.cluster, "cluster", false, "--addr are seed nodes of one Redis Cluster (Redisson's clusterServersConfig)")
	fs.StringVar(&c.sentinelMaster, "sentinel-master", "", "connect through Redis Sentinel to the master set `name` (Redisson's masterName); needs --sentinel")
	fs.StringVar(&c.sentinels, "sentinel", "", "the sentinels, comma-separated `host:port` or redis:// URLs (Redisson's sentinelAddresses)")
	fs.StringVar(&c.sentinelUsername, "sentinel-username", "", "the sentinels' ACL `user` (Redisson's sentinelUsername)")
	// Password defaults come from the environment after parsing (see
	// resolve), so that help never prints them.
	fs.StringVar(&c.sentinelPassword, "sentinel-password", "",
		"the sentinels' `password` (Redisson's sentinelPassword); default $"+envSentinelPassword+", which, unlike the flag, ps does not show")
	fs.IntVar(&c.db, "db", 0, "the database `number` (Redisson's database)")
	fs.StringVar(&c.username, "username", "", "ACL `user` (default: the default user)")
	fs.StringVar(&c.password, "password", "",
		"`password`; default $"+envPassword+", which, unlike the flag, ps does not show")
	fs.BoolVar(&c.tls, "tls", false, "connect with TLS, verifying the server's certificate against the system roots (rediss:// or any --tls-* flag implies it)")
	fs.StringVar(&c.tlsCA, "tls-ca", "", "verify the server's certificate against the CA certificates in this PEM `file` instead of the system roots")
	fs.StringVar(&c.tlsCert, "tls-cert", "", "send the client certificate in this PEM `file` (with --tls-key)")
	fs.StringVar(&c.tlsKey, "tls-key", "", "the private key of --tls-cert, a PEM `file`")
	fs.StringVar(&c.tlsServerName, "tls-server-name", "", "the `name` the server's certificate must carry (default: the host of each address)")
	fs.StringVar(&c.redissonConfig, "redisson-config", "", "read the connection, credentials, TLS and lock settings from a Redisson YAML config `file`; flags given override it")
}

// given reports whether the flag name was on the command line.
func (c *connFlags) given(name string) bool {
	found := false
	c.fs.Visit(func(f *flag.Flag) { found = found || f.Name == name })
	return found
}

// connection is what resolve found: the lock.Config of each master to
// dial (one for a standalone master, a cluster or a sentinel set; one per
// master of a RedLock), and the warnings of --redisson-config.
type connection struct {
	masters  []lock.Config
	warnings []redissonconfig.Warning
}

// addrSpec is one address of --addr or --sentinel.
type addrSpec struct {
	redissonconfig.Address
	raw string // as given, for messages (credentials redacted by Redact)
}

// resolve reads --redisson-config, applies the flags given over it, and
// under both the environment's defaults. Call it after parsing.
//
// The topology (--addr, --sentinel, --sentinel-master) given on the
// command line replaces the file's; --cluster alone turns the file's
// addresses into seed nodes. Credentials, --db and TLS given override the
// file's one by one; credentials in a redis:// URL win over both, as in
// Redisson. $RLOCK_ADDR, $RLOCK_PASSWORD and $RLOCK_SENTINEL_PASSWORD are
// defaults: a file's settings win over them.
//
// May return a usage error (64).
func (c *connFlags) resolve() (*connection, error) {
	conn := &connection{}
	var base lock.Config
	file := c.redissonConfig != ""
	if file {
		var err error
		if base, conn.warnings, err = c.loadFile(); err != nil {
			return nil, err
		}
	}
	topology := !file || c.given("addr") || c.given("sentinel") || c.given("sentinel-master")
	// The file's TLS goes with its addresses: addresses given on the
	// command line use TLS when they say so (rediss://, --tls, --tls-*),
	// then with the file's verification mode.
	fileTLS := base.TLS
	if topology {
		base.TLS = nil
	}
	if c.cluster && (c.sentinelMaster != "" || (!topology && base.MasterSet != "")) {
		return nil, usagef("--cluster and Sentinel exclude each other")
	}

	var addrs []addrSpec
	switch {
	case !topology:
		base.Cluster = base.Cluster || c.cluster
		for _, a := range base.Addrs {
			addrs = append(addrs, addrSpec{Address: redissonconfig.Address{HostPort: a, DB: -1}, raw: a})
		}
	case c.sentinelMaster != "" || c.sentinels != "":
		switch {
		case c.sentinelMaster == "":
			return nil, usagef("--sentinel needs --sentinel-master, the name of the master set")
		case strings.TrimSpace(c.sentinels) == "":
			return nil, usagef("--sentinel-master needs --sentinel, the sentinels' addresses")
		case c.given("addr"):
			return nil, usagef("--addr and --sentinel exclude each other: with Sentinel, the sentinels name the master")
		}
		var err error
		if addrs, err = parseAddrs("--sentinel", c.sentinels); err != nil {
			return nil, err
		}
		base.Addrs, base.Cluster, base.MasterSet = nil, false, c.sentinelMaster
	default:
		var err error
		if addrs, err = parseAddrs("--addr", c.addr); err != nil {
			return nil, err
		}
		base.Addrs, base.Cluster, base.MasterSet = nil, c.cluster, ""
		base.SentinelUsername, base.SentinelPassword = "", "" // no sentinels
	}
	c.credentials(&base)
	if c.given("db") {
		if c.db < 0 {
			return nil, usagef("--db %d: want 0 or more", c.db)
		}
		base.DB = c.db
	}
	if base.DialTimeout == 0 || base.DialTimeout > dialTimeout {
		base.DialTimeout = dialTimeout
	}

	// One Client for a standalone master, a cluster or a sentinel set;
	// one per master for several independent masters (a RedLock).
	groups := [][]addrSpec{addrs}
	if !base.Cluster && base.MasterSet == "" && len(addrs) > 1 {
		groups = nil
		for _, a := range addrs {
			groups = append(groups, []addrSpec{a})
		}
	}
	for _, g := range groups {
		lc, err := c.master(base, g, fileTLS)
		if err != nil {
			return nil, err
		}
		conn.masters = append(conn.masters, lc)
	}
	return conn, nil
}

// loadFile reads --redisson-config. A config the rlock command cannot
// use is a usage error.
func (c *connFlags) loadFile() (lock.Config, []redissonconfig.Warning, error) {
	data, err := os.ReadFile(c.redissonConfig)
	if err != nil {
		return lock.Config{}, nil, usagef("--redisson-config: %v", err)
	}
	cfg, ws, err := redissonconfig.Load(data)
	if err != nil {
		msg := fmt.Sprintf("--redisson-config %s: %v", c.redissonConfig, err)
		var multi interface{ Unwrap() []error }
		if errors.As(err, &multi) && len(multi.Unwrap()) > 1 {
			// One line per problem, in the file's order.
			errs := multi.Unwrap()
			msg = fmt.Sprintf("--redisson-config %s: %d problems:", c.redissonConfig, len(errs))
			for _, e := range errs {
				msg += "\n  " + strings.TrimPrefix(e.Error(), "rlock: redisson config: ")
			}
		}
		var e *redissonconfig.Error
		if errors.As(err, &e) && strings.Contains(e.Key, "nameMapper") {
			msg += "\n  (the rlock command has no name mapping: it can lock only names that are not mapped)"
		}
		return lock.Config{}, ws, exitWith(exitUsage, &linesError{msg})
	}
	return cfg, ws, nil
}

// credentials applies the credential flags given, then the environment's
// defaults, to cfg.
func (c *connFlags) credentials(cfg *lock.Config) {
	if c.given("username") {
		cfg.Username = c.username
	}
	switch {
	case c.given("password"):
		cfg.Password = c.password
	case cfg.Password == "":
		cfg.Password = os.Getenv(envPassword)
	}
	if c.given("sentinel-username") {
		cfg.SentinelUsername = c.sentinelUsername
	}
	switch {
	case c.given("sentinel-password"):
		cfg.SentinelPassword = c.sentinelPassword
	case cfg.SentinelPassword == "" && cfg.MasterSet != "":
		// The environment's default only where there are sentinels:
		// lock.New refuses sentinel credentials without MasterSet.
		cfg.SentinelPassword = os.Getenv(envSentinelPassword)
	}
}

// parseAddrs splits the comma-separated addresses of flag: host:port,
// or Redisson's redis:// and rediss:// URLs. Its errors never show a
// password.
func parseAddrs(flag, list string) ([]addrSpec, error) {
	if strings.TrimSpace(list) == "" {
		return nil, usagef("%s is empty", flag)
	}
	var out []addrSpec
	for _, a := range strings.Split(list, ",") {
		a = strings.TrimSpace(a)
		if strings.Contains(a, "://") {
			u, err := redissonconfig.ParseAddress(a)
			if err != nil {
				return nil, usagef("%s: %v", flag, err)
			}
			out = append(out, addrSpec{Address: u, raw: a})
			continue
		}
		if strings.Contains(a, "@") {
			return nil, usagef("%s %q: credentials go in a URL (redis://user:password@host:port), or better in --username and $%s",
				flag, redissonconfig.Redact(a), envPassword)
		}
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			return nil, usagef("%s %q: want host:port or a URL redis://host:port", flag, a)
		}
		out = append(out, addrSpec{Address: redissonconfig.Address{HostPort: a, DB: -1}, raw: a})
	}
	return out, nil
}

// master is the lock.Config of one Client on the addresses g (one
// master, the seeds of a cluster, or the sentinels): base with g's
// addresses, their URL credentials and database, and TLS.
func (c *connFlags) master(base lock.Config, g []addrSpec, fileTLS *tls.Config) (lock.Config, error) {
	lc := base
	lc.Addrs = nil
	first := g[0]
	for _, a := range g {
		if a.Username != first.Username || a.Password != first.Password || a.TLS != first.TLS || a.DB != first.DB {
			return lc, usagef("%s and %s differ in credentials, TLS or database: one Client uses one setting for all of them",
				redissonconfig.Redact(first.raw), redissonconfig.Redact(a.raw))
		}
		lc.Addrs = append(lc.Addrs, a.HostPort)
	}
	// A URL's credentials win, as in Redisson: a sentinel's are the
	// sentinels' own.
	user, pass := &lc.Username, &lc.Password
	if lc.MasterSet != "" {
		user, pass = &lc.SentinelUsername, &lc.SentinelPassword
	}
	if first.Password != "" {
		*user, *pass = first.Username, first.Password
	}
	if first.DB >= 0 {
		if c.given("db") && c.db != first.DB {
			return lc, usagef("--db %d, but %s names database %d", c.db, redissonconfig.Redact(first.raw), first.DB)
		}
		if lc.MasterSet == "" {
			lc.DB = first.DB
		}
	}
	if lc.Cluster && lc.DB != 0 {
		return lc, usagef("database %d with --cluster: a Redis Cluster has database 0 only", lc.DB)
	}
	var err error
	lc.TLS, err = c.tlsConfig(lc.TLS, first.TLS, fileTLS)
	return lc, err
}

// tlsConfig returns the TLS configuration: base (a file's, for its own
// addresses), or, when --tls, a --tls-* flag or a rediss:// address asks
// for TLS, fileTLS (a file's, for addresses given on the command line)
// or a new one; nil without TLS. A file's is modified in place: its
// CA_ONLY check reads the roots set here.
func (c *connFlags) tlsConfig(base *tls.Config, rediss bool, fileTLS *tls.Config) (*tls.Config, error) {
	on := base != nil || rediss || c.tls || c.tlsCA != "" || c.tlsCert != "" || c.tlsKey != "" || c.tlsServerName != ""
	if !on {
		return nil, nil
	}
	cfg := base
	if cfg == nil {
		cfg = fileTLS
	}
	if cfg == nil {
		cfg = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if c.tlsCA != "" {
		pem, err := os.ReadFile(c.tlsCA)
		if err != nil {
			return nil, usagef("--tls-ca: %v", err)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, usagef("--tls-ca %s: no PEM certificate in it", c.tlsCA)
		}
		cfg.RootCAs = roots
	}
	switch {
	case (c.tlsCert == "") != (c.tlsKey == ""):
		return nil, usagef("--tls-cert and --tls-key go together")
	case c.tlsCert != "":
		cert, err := tls.LoadX509KeyPair(c.tlsCert, c.tlsKey)
		if err != nil {
			return nil, usagef("--tls-cert %s, --tls-key %s: %v", c.tlsCert, c.tlsKey, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	if c.tlsServerName != "" {
		cfg.ServerName = c.tlsServerName
	}
	return cfg, nil
}

// printWarnings prints the warnings of --redisson-config on errOut.
// The settings that make rlock differ from Redisson come first.
func (c *connFlags) printWarnings(conn *connection) {
	ws := slices.Clone(conn.warnings)
	slices.SortStableFunc(ws, func(a, b redissonconfig.Warning) int {
		switch {
		case a.Differs == b.Differs:
			return 0
		case a.Differs:
			return -1
		}
		return 1
	})
	for _, w := range ws {
		fmt.Fprintln(errOut, prefixed(fmt.Sprintf("--redisson-config %s: %s", c.redissonConfig, w)))
	}
}

// hasCredentials reports whether the address list s carries a password
// (a URL's user information): the command must not inherit it.
func hasCredentials(s string) bool {
	for _, a := range strings.Split(s, ",") {
		if u, err := redissonconfig.ParseAddress(strings.TrimSpace(a)); err == nil && u.Password != "" {
			return true
		}
	}
	return false
}
