package redissonconfig

import (
	"math"
	"strings"
	"time"

	"github.com/rlock-go/rlock/lock"
)

// resolve turns the settings read into l.cfg.
func (l *loader) resolve() {
	addrs, ok := l.addresses()
	if !ok {
		return
	}
	l.credentials(addrs)
	l.database()
	l.tls(addrs)
	l.timing()
	l.pubSub()
	l.nameMapper()
}

// pubSub sets PubSub from a cluster's shardedSubscriptionMode: the
// unlock messages must travel as the Redisson services' do.
func (l *loader) pubSub() {
	s := l.mine["shardedSubscriptionMode"]
	if s == nil {
		return
	}
	switch v, _ := l.enum(s, "AUTO", "ON", "OFF"); v {
	case "AUTO":
		l.cfg.PubSub = lock.PubSubAuto
	case "ON":
		l.cfg.PubSub = lock.PubSubSharded
	case "OFF":
		l.cfg.PubSub = lock.PubSubPlain
	}
}

// addresses reads the servers config's addresses into Addrs (and Cluster,
// MasterSet).
func (l *loader) addresses() ([]Address, bool) {
	var list []string
	var at *setting
	missing := func(key, what string) {
		l.fail(l.mode.line, l.modeKey+"."+key, "missing: %s", what)
	}
	switch l.modeKey {
	case "singleServerConfig":
		if at = l.mine["address"]; at == nil {
			missing("address", "the master's address, redis://host:port")
			return nil, false
		}
		a, ok := l.str(at)
		if !ok {
			return nil, false
		}
		list = []string{a}
	case "sentinelServersConfig":
		ms := l.mine["masterName"]
		if ms == nil {
			missing("masterName", "the name of the master set the sentinels watch")
			return nil, false
		}
		name, ok := l.str(ms)
		if !ok {
			return nil, false
		}
		if name == "" {
			l.fail(ms.line, ms.key, "empty")
			return nil, false
		}
		l.cfg.MasterSet = name
		if at = l.mine["sentinelAddresses"]; at == nil {
			missing("sentinelAddresses", "the sentinels' addresses")
			return nil, false
		}
		if list, ok = l.strings(at); !ok {
			return nil, false
		}
	case "clusterServersConfig":
		l.cfg.Cluster = true
		if at = l.mine["nodeAddresses"]; at == nil {
			missing("nodeAddresses", "addresses of the cluster's nodes")
			return nil, false
		}
		var ok bool
		if list, ok = l.strings(at); !ok {
			return nil, false
		}
	}
	if len(list) == 0 {
		l.fail(at.line, at.key, "no address")
		return nil, false
	}
	var addrs []Address
	pathIgnored := false
	for _, s := range list {
		a, why := parseAddress(s)
		if why != "" {
			l.fail(at.line, at.key, "address %q: %s", Redact(s), why)
			continue
		}
		if a.DB >= 0 {
			pathIgnored = true
		}
		addrs = append(addrs, a)
		l.cfg.Addrs = append(l.cfg.Addrs, a.HostPort)
	}
	if pathIgnored {
		l.warn(at.line, at.key, "the /db path of an address is ignored, as Redisson ignores it: database chooses the database")
	}
	return addrs, len(addrs) == len(list)
}

// credentials sets Username, Password and the sentinels' own: a URL's
// credentials win over the settings, and the top level's over the
// servers config's, as in Redisson.
func (l *loader) credentials(addrs []Address) {
	var user, pass string
	if s := l.pick("username"); s != nil {
		user, _ = l.str(s)
	}
	if s := l.pick("password"); s != nil {
		pass, _ = l.str(s)
	}
	var urlUser, urlPass string
	for i, a := range addrs {
		if i > 0 && (a.Username != urlUser || a.Password != urlPass) {
			at := l.addressSetting()
			l.fail(at.line, at.key, "the addresses carry different credentials: rlock uses one user and password for all")
			return
		}
		urlUser, urlPass = a.Username, a.Password
	}
	if l.modeKey != "sentinelServersConfig" {
		l.cfg.Username, l.cfg.Password = orElse(urlUser, user), orElse(urlPass, pass)
		return
	}
	l.cfg.Username, l.cfg.Password = user, pass
	var sUser, sPass string
	if s := l.mine["sentinelUsername"]; s != nil {
		sUser, _ = l.str(s)
	}
	if s := l.mine["sentinelPassword"]; s != nil {
		sPass, _ = l.str(s)
	}
	l.cfg.SentinelUsername, l.cfg.SentinelPassword = orElse(urlUser, sUser), orElse(urlPass, sPass)
	if l.cfg.SentinelPassword == "" && pass != "" {
		l.warnDiffers(l.mode.line, l.modeKey+".sentinelPassword",
			"not set: Redisson sends the master's password to sentinels that ask for one; rlock sends sentinels only sentinelPassword (or a password in their addresses)")
	}
}

// addressSetting is the setting that holds the addresses.
func (l *loader) addressSetting() *setting {
	for _, k := range []string{"address", "sentinelAddresses", "nodeAddresses"} {
		if s := l.mine[k]; s != nil {
			return s
		}
	}
	return l.mode
}

func orElse(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// database sets DB.
func (l *loader) database() {
	s := l.mine["database"]
	if s == nil {
		return
	}
	n, ok := l.integer(s)
	switch {
	case !ok:
	case n < 0 || n > math.MaxInt32:
		l.fail(s.line, s.key, "%d: want 0 or more", n)
	case l.cfg.Cluster && n != 0:
		l.fail(s.line, s.key, "%d: rlock uses database 0 of a Redis Cluster, the only one Redis Cluster has", n)
	default:
		l.cfg.DB = int(n)
	}
}

// tls sets TLS for rediss:// addresses, with Redisson's
// sslVerificationMode, and warns of the ssl settings it cannot use.
func (l *loader) tls(addrs []Address) {
	n := 0
	for _, a := range addrs {
		if a.TLS {
			n++
		}
	}
	if n > 0 && n < len(addrs) {
		at := l.addressSetting()
		l.fail(at.line, at.key, "some addresses are rediss:// and some redis://: rlock connects to all with TLS or to none")
		return
	}
	on := n > 0
	mode := verifyStrict
	var modeAt *setting
	for _, name := range []string{"sslEnableEndpointIdentification", "sslVerificationMode", "sslTruststore", "sslTruststorePassword",
		"sslKeystore", "sslKeystorePassword", "sslKeystoreType", "sslProvider", "sslProtocols", "sslCiphers"} {
		s := l.pick(name)
		switch {
		case s == nil:
		case !on:
			l.warn(s.line, s.key, "not used: no address is rediss://")
		case name == "sslEnableEndpointIdentification":
			// Redisson's older setting: true is STRICT, false NONE;
			// sslVerificationMode, read next, wins.
			if v, ok := l.boolean(s); ok && !v {
				mode, modeAt = verifyNone, s
			}
		case name == "sslVerificationMode":
			if v, ok := l.enum(s, verifyStrict, verifyCAOnly, verifyNone); ok {
				mode, modeAt = v, s
			}
		default:
			l.unused(s)
		}
	}
	if !on {
		return
	}
	if mode == verifyNone {
		l.warnDiffers(modeAt.line, modeAt.key, "the server's certificate is not verified, as the config asks: anyone on the path can pose as Redis")
	}
	l.cfg.TLS = tlsConfig(mode)
}

// timing sets the watchdog's lease, the timeouts and the replica sync,
// refusing what rlock judges unsafe.
func (l *loader) timing() {
	wd, wdOK := lock.DefaultWatchdogTimeout, true
	if s := l.top["lockWatchdogTimeout"]; s != nil {
		d, ok := l.millis(s)
		switch {
		case !ok:
			wdOK = false
		case d < lock.MinLease:
			l.fail(s.line, s.key, "%v is shorter than %v, rlock's shortest lease: a shorter one can run out before its acquire is answered on a loaded network",
				d, lock.MinLease)
			wdOK = false
		default:
			wd = d
			l.cfg.WatchdogTimeout = d
		}
	}
	renew := wd / 3 // rlock's and Redisson's renewal interval
	if s := l.mine["timeout"]; s != nil {
		if d, ok := l.millis(s); ok && wdOK {
			if d+renew >= wd {
				l.fail(s.line, s.key, "%v: with the watchdog renewing every %v (lockWatchdogTimeout/3), a renewal could be answered after the lease of %v it extends ran out; "+
					"rlock needs timeout + lockWatchdogTimeout/3 < lockWatchdogTimeout: lower timeout below %v or raise lockWatchdogTimeout",
					d, renew.Round(time.Millisecond), wd, (wd - renew).Truncate(time.Millisecond))
			} else {
				l.cfg.CommandTimeout = d
			}
		}
	}
	if s := l.top["fairLockWaitTimeout"]; s != nil {
		if d, ok := l.millis(s); ok {
			l.cfg.FairLockWaitTimeout = d
		}
	}
	if s := l.mine["connectTimeout"]; s != nil {
		if d, ok := l.millis(s); ok {
			l.cfg.DialTimeout = d
		}
	}
	check := true
	if s := l.top["checkLockSyncedSlaves"]; s != nil {
		check, _ = l.boolean(s)
	}
	sync := l.top["slavesSyncTimeout"]
	switch {
	case !check:
		l.cfg.ReplicaSyncTimeout = -1
		if sync != nil {
			l.warn(sync.line, sync.key, "not used: checkLockSyncedSlaves is false")
		}
	case sync != nil:
		n, ok := l.integer(sync)
		switch {
		case !ok:
		case n <= 0:
			l.fail(sync.line, sync.key, "%d ms: WAIT with a timeout of 0 waits for a replica without bound; want a positive timeout, or checkLockSyncedSlaves: false", n)
		case !wdOK:
		case time.Duration(n)*time.Millisecond >= wd:
			l.fail(sync.line, sync.key, "%d ms is not shorter than lockWatchdogTimeout %v: a lock could expire while rlock waits for its replicas", n, wd)
		default:
			l.cfg.ReplicaSyncTimeout = time.Duration(n) * time.Millisecond
		}
	}
}

// nameMapper sets NameMapper from the caller's WithNameMapper when the
// config names the same class, and refuses every other combination.
func (l *loader) nameMapper() {
	s := l.pick("nameMapper")
	class := ""
	if s != nil {
		tag := s.node.Tag
		if strings.HasPrefix(tag, "!!") || tag == "" {
			l.fail(s.line, s.key, "want a class, as Redisson writes it: nameMapper: !<com.example.Mapper> {}")
			return
		}
		// yaml gives the verbatim tag !<x> as x, a local one !x as !x.
		class = strings.TrimPrefix(tag, "!")
		if class == defaultNameMapper {
			class = ""
		}
	}
	o := l.opts
	switch {
	case class == "" && !o.set:
	case class == "":
		l.fail(0, "nameMapper", "WithNameMapper(%q) was given, but the config names no nameMapper: Java services using it lock the names as they are", o.mapperClass)
	case !o.set:
		l.fail(s.line, s.key, "%s maps every lock name before it becomes a key: rlock needs the same mapping in Go (redissonconfig.WithNameMapper), "+
			"or Java and Go services would lock different keys and not exclude each other", class)
	case class != o.mapperClass:
		l.fail(s.line, s.key, "the config names %s, but WithNameMapper was given for %s", class, o.mapperClass)
	default:
		l.cfg.NameMapper = o.mapper
	}
}
