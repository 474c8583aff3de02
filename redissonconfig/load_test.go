package redissonconfig_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/redissonconfig"
)

// load loads yml and fails the test on an error.
func load(t *testing.T, yml string, opts ...redissonconfig.Option) (lock.Config, []redissonconfig.Warning) {
	t.Helper()
	cfg, ws, err := redissonconfig.Load([]byte(yml), opts...)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return cfg, ws
}

// warned returns the warning about key, failing the test without one.
func warned(t *testing.T, ws []redissonconfig.Warning, key string, line int, reason string) {
	t.Helper()
	for _, w := range ws {
		if w.Key == key {
			if w.Line != line || !strings.Contains(w.Reason, reason) {
				t.Fatalf("warning %v: want line %d and a reason with %q", w, line, reason)
			}
			return
		}
	}
	t.Fatalf("no warning about %s in %v", key, ws)
}

// A single-server config as Redisson's toYAML writes it: every default
// spelled out, most of them unused by rlock and listed, nulls ignored.
func TestLoadSingleServer(t *testing.T) {
	cfg, ws := load(t, `---
singleServerConfig:
  idleConnectionTimeout: 10000
  connectTimeout: 10000
  timeout: 3000
  retryAttempts: 4
  retryDelay: !<org.redisson.config.EqualJitterDelay> {baseDelay: PT1S, maxDelay: PT2S}
  subscriptionsPerConnection: 5
  clientName: null
  address: "redis://app:s3cret@redis.internal:6380"
  database: 3
  dnsMonitoringInterval: 5000
password: null
username: null
threads: 16
codec: !<org.redisson.codec.Kryo5Codec> {}
lockWatchdogTimeout: 20000
fairLockWaitTimeout: 60000
checkLockSyncedSlaves: true
slavesSyncTimeout: 500
`)
	if cfg.Cluster || cfg.MasterSet != "" || len(cfg.Addrs) != 1 || cfg.Addrs[0] != "redis.internal:6380" {
		t.Fatalf("Addrs %v, Cluster %v, MasterSet %q", cfg.Addrs, cfg.Cluster, cfg.MasterSet)
	}
	if cfg.Username != "app" || cfg.Password != "s3cret" || cfg.DB != 3 || cfg.TLS != nil {
		t.Fatalf("Username %q, Password %q, DB %d, TLS %v", cfg.Username, cfg.Password, cfg.DB, cfg.TLS)
	}
	if cfg.WatchdogTimeout != 20*time.Second || cfg.CommandTimeout != 3*time.Second || cfg.DialTimeout != 10*time.Second ||
		cfg.ReplicaSyncTimeout != 500*time.Millisecond || cfg.FairLockWaitTimeout != time.Minute || cfg.NameMapper != nil {
		t.Fatalf("timing %+v", cfg)
	}
	warned(t, ws, "singleServerConfig.idleConnectionTimeout", 3, "not used by rlock")
	warned(t, ws, "singleServerConfig.retryAttempts", 6, "retries")
	warned(t, ws, "singleServerConfig.retryDelay", 7, "retries")
	warned(t, ws, "threads", 15, "not used")
	for _, w := range ws {
		switch w.Key {
		case "singleServerConfig.clientName", "password", "username", "singleServerConfig.timeout", "lockWatchdogTimeout", "fairLockWaitTimeout":
			t.Fatalf("warning about a null or used setting: %v", w)
		}
		if strings.Contains(w.String(), "s3cret") {
			t.Fatalf("a warning shows the password: %v", w)
		}
	}
	for i := 1; i < len(ws); i++ {
		if ws[i].Line < ws[i-1].Line {
			t.Fatalf("warnings out of line order: %v", ws)
		}
	}
}

func TestLoadCredentials(t *testing.T) {
	for _, tc := range []struct {
		what, yml  string
		user, pass string
	}{
		{"top level", "username: u\npassword: p\nsingleServerConfig: {address: 'redis://h:1'}\n", "u", "p"},
		{"servers config (deprecated)", "singleServerConfig: {address: 'redis://h:1', username: u, password: p}\n", "u", "p"},
		{"top level wins", "password: top\nsingleServerConfig: {address: 'redis://h:1', password: old}\n", "", "top"},
		{"URL wins", "password: top\nsingleServerConfig: {address: 'redis://u2:url@h:1'}\n", "u2", "url"},
		{"URL with one part is a password", "username: u\nsingleServerConfig: {address: 'redis://only@h:1'}\n", "u", "only"},
		{"URL decoded", "singleServerConfig: {address: 'redis://:p%40ss%2Fw@h:1'}\n", "", "p@ss/w"},
		{"password as a number", "password: 1234\nsingleServerConfig: {address: 'redis://h:1'}\n", "", "1234"},
	} {
		t.Run(tc.what, func(t *testing.T) {
			cfg, _ := load(t, tc.yml)
			if cfg.Username != tc.user || cfg.Password != tc.pass {
				t.Fatalf("Username %q Password %q, want %q %q", cfg.Username, cfg.Password, tc.user, tc.pass)
			}
		})
	}
}

func TestLoadSentinel(t *testing.T) {
	cfg, ws := load(t, `sentinelServersConfig:
  sentinelAddresses:
  - "redis://:sentinel-pw@127.0.0.1:26379"
  - "redis://:sentinel-pw@127.0.0.2:26379"
  masterName: "mymaster"
  sentinelUsername: "watcher"
  database: 2
  readMode: "SLAVE"
  subscriptionMode: "SLAVE"
password: master-pw
`)
	if cfg.MasterSet != "mymaster" || strings.Join(cfg.Addrs, ",") != "127.0.0.1:26379,127.0.0.2:26379" || cfg.Cluster {
		t.Fatalf("MasterSet %q Addrs %v Cluster %v", cfg.MasterSet, cfg.Addrs, cfg.Cluster)
	}
	if cfg.Password != "master-pw" || cfg.SentinelUsername != "watcher" || cfg.SentinelPassword != "sentinel-pw" || cfg.DB != 2 {
		t.Fatalf("Password %q SentinelUsername %q SentinelPassword %q DB %d", cfg.Password, cfg.SentinelUsername, cfg.SentinelPassword, cfg.DB)
	}
	warned(t, ws, "sentinelServersConfig.subscriptionMode", 9, "master")

	// Without sentinelPassword, Redisson would try the master's password
	// on sentinels that ask for one; rlock says it does not.
	_, ws = load(t, "sentinelServersConfig: {sentinelAddresses: ['redis://s:26379'], masterName: m, sentinelPassword: null}\npassword: pw\n")
	warned(t, ws, "sentinelServersConfig.sentinelPassword", 1, "master's password")
}

func TestLoadCluster(t *testing.T) {
	cfg, _ := load(t, `clusterServersConfig:
  nodeAddresses:
  - "redis://127.0.0.1:7000"
  - "redis://[::1]:7001"
  - "redis://::1:7002"
  scanInterval: 1000
`)
	if !cfg.Cluster || strings.Join(cfg.Addrs, ",") != "127.0.0.1:7000,[::1]:7001,[::1]:7002" || cfg.PubSub != lock.PubSubAuto {
		t.Fatalf("Cluster %v Addrs %v PubSub %v", cfg.Cluster, cfg.Addrs, cfg.PubSub)
	}
	for mode, want := range map[string]lock.PubSubMode{"AUTO": lock.PubSubAuto, "ON": lock.PubSubSharded, "off": lock.PubSubPlain} {
		cfg, _ := load(t, "clusterServersConfig: {nodeAddresses: ['redis://h:1'], shardedSubscriptionMode: "+mode+"}\n")
		if cfg.PubSub != want {
			t.Fatalf("shardedSubscriptionMode %s: PubSub %v, want %v", mode, cfg.PubSub, want)
		}
	}
}

func TestLoadReplicaSync(t *testing.T) {
	cfg, ws := load(t, "singleServerConfig: {address: 'redis://h:1'}\ncheckLockSyncedSlaves: false\nslavesSyncTimeout: 2000\n")
	if cfg.ReplicaSyncTimeout >= 0 {
		t.Fatalf("checkLockSyncedSlaves false: ReplicaSyncTimeout %v, want negative", cfg.ReplicaSyncTimeout)
	}
	warned(t, ws, "slavesSyncTimeout", 3, "checkLockSyncedSlaves is false")
	cfg, _ = load(t, "singleServerConfig: {address: 'redis://h:1'}\n")
	if cfg.ReplicaSyncTimeout != 0 || cfg.WatchdogTimeout != 0 {
		t.Fatalf("defaults: ReplicaSyncTimeout %v WatchdogTimeout %v, want 0 (rlock's defaults, Redisson's values)", cfg.ReplicaSyncTimeout, cfg.WatchdogTimeout)
	}
}

func TestLoadEnvironment(t *testing.T) {
	t.Setenv("RC_TEST_HOST", "cache.internal")
	t.Setenv("RC_TEST_PW", "from-env")
	cfg, ws := load(t, `singleServerConfig:
  address: "redis://${RC_TEST_HOST}:${RC_TEST_PORT:-6390}"
  password: "${RC_TEST_PW:-unused}"
`)
	if cfg.Addrs[0] != "cache.internal:6390" || cfg.Password != "from-env" {
		t.Fatalf("Addrs %v Password %q", cfg.Addrs, cfg.Password)
	}
	if len(ws) != 0 {
		t.Fatalf("warnings %v, want none", ws)
	}
	// A variable that is neither set nor given a default is an error:
	// Redisson would send "${RC_TEST_UNSET}" as the password.
	_, _, err := redissonconfig.Load([]byte("singleServerConfig:\n  address: 'redis://h:1'\n  password: \"${RC_TEST_UNSET}\"\n"))
	var e *redissonconfig.Error
	if !errors.Is(err, lock.ErrInvalid) || !errors.As(err, &e) || e.Line != 3 || !strings.Contains(err.Error(), "RC_TEST_UNSET is not set") {
		t.Fatalf("Load with ${RC_TEST_UNSET}: %v, want ErrInvalid at line 3 saying it is not set", err)
	}
}

// TestLoadRefused: each config is refused with ErrInvalid, the line and
// the reason; none of the messages shows a password.
func TestLoadRefused(t *testing.T) {
	const single = "singleServerConfig: {address: 'redis://h:1'}\n"
	for _, tc := range []struct {
		what, yml string
		opts      []redissonconfig.Option
		line      int
		reason    string
	}{
		{"malformed", "singleServerConfig:\n  address: redis://h:1\n    timeout: 3\n", nil, 3, "malformed YAML"},
		{"unclosed list", "clusterServersConfig:\n  nodeAddresses: [redis://h:1\n", nil, 1, "malformed YAML"},
		{"empty", "", nil, 0, "empty config"},
		{"not a mapping", "- a\n- b\n", nil, 1, "want a mapping"},
		{"no servers config", "lockWatchdogTimeout: 1000\n", nil, 1, "no servers config"},
		{"two servers configs", single + "clusterServersConfig: {nodeAddresses: ['redis://h:1']}\n", nil, 2, "a second servers config"},
		{"replicated", "replicatedServersConfig: {nodeAddresses: ['redis://h:1']}\n", nil, 1, "not supported by rlock"},
		{"no address", "singleServerConfig: {database: 1}\n", nil, 1, "missing: the master's address"},
		{"no master name", "sentinelServersConfig:\n  sentinelAddresses: ['redis://h:1']\n", nil, 1, "missing: the name of the master set"},
		{"no scheme", "singleServerConfig:\n  address: 'h:1'\n", nil, 2, "want a URL"},
		{"no port", "singleServerConfig:\n  address: 'redis://:pw-not-shown@h'\n", nil, 2, "no port"},
		{"unix socket", "singleServerConfig:\n  address: 'redis+uds:///tmp/r.sock'\n", nil, 2, "unix sockets"},
		{"watchdog below MinLease", single + "lockWatchdogTimeout: 20\n", nil, 2, "shorter than 50ms"},
		{"watchdog not a number", single + "lockWatchdogTimeout: 30s\n", nil, 2, "want a whole number"},
		{"negative watchdog", single + "lockWatchdogTimeout: -1\n", nil, 2, "positive number of milliseconds"},
		{"negative fair wait", single + "fairLockWaitTimeout: -5\n", nil, 2, "positive number of milliseconds"},
		{"timeout outlasting a renewal", "singleServerConfig:\n  address: 'redis://h:1'\n  timeout: 7000\nlockWatchdogTimeout: 10000\n", nil, 3, "lower timeout below"},
		{"timeout outlasting a renewal, rounded", "singleServerConfig:\n  address: 'redis://h:1'\n  timeout: 7000\nlockWatchdogTimeout: 10000\n", nil, 3, "every 3.333s"},
		{"sync timeout 0", single + "slavesSyncTimeout: 0\n", nil, 2, "without bound"},
		{"sync timeout past the lease", single + "lockWatchdogTimeout: 1000\nslavesSyncTimeout: 1000\n", nil, 3, "could expire while rlock waits"},
		{"bad boolean", single + "checkLockSyncedSlaves: maybe\n", nil, 2, "want true or false"},
		{"bad database", "singleServerConfig: {address: 'redis://h:1', database: -1}\n", nil, 1, "want 0 or more"},
		{"cluster database", "clusterServersConfig:\n  nodeAddresses: ['redis://h:1']\n  database: 3\n", nil, 3, "database 0"},
		{"addresses not a list", "clusterServersConfig:\n  nodeAddresses: 'redis://h:1'\n", nil, 2, "want a list"},
		{"mixed TLS", "clusterServersConfig:\n  nodeAddresses: ['redis://h:1', 'rediss://h:2']\n", nil, 2, "rediss:// and some redis://"},
		{"different credentials", "clusterServersConfig:\n  nodeAddresses: ['redis://:a-secret@h:1', 'redis://:b-secret@h:2']\n", nil, 2, "different credentials"},
		{"bad verification mode", "singleServerConfig: {address: 'rediss://h:1'}\nsslVerificationMode: SOME\n", nil, 2, "want one of STRICT, CA_ONLY, NONE"},
		{"key given twice", "singleServerConfig:\n  address: 'redis://h:1'\n  address: 'redis://h:2'\n", nil, 3, "given twice"},
		{"nameMapper without Go mapping", single + "nameMapper: !<com.example.M> {}\n", nil, 2, "rlock needs the same mapping in Go"},
		{"nameMapper in servers config", "singleServerConfig:\n  address: 'redis://h:1'\n  nameMapper: !<com.example.M> {}\n", nil, 3, "rlock needs the same mapping"},
		{"nameMapper of another class", single + "nameMapper: !<com.example.M> {}\n",
			[]redissonconfig.Option{redissonconfig.WithNameMapper("com.example.Other", strings.ToUpper)}, 2, "WithNameMapper was given for com.example.Other"},
		{"Go mapping without nameMapper", single,
			[]redissonconfig.Option{redissonconfig.WithNameMapper("com.example.M", strings.ToUpper)}, 0, "names no nameMapper"},
		{"nameMapper without class", single + "nameMapper: {prefix: x}\n", nil, 2, "want a class"},
		{"WithNameMapper without mapper", single, []redissonconfig.Option{redissonconfig.WithNameMapper("com.example.M", nil)}, 0, "needs a class name and a mapper"},
		{"nil option", single, []redissonconfig.Option{nil}, 0, "nil Option"},
	} {
		t.Run(tc.what, func(t *testing.T) {
			cfg, _, err := redissonconfig.Load([]byte(tc.yml), tc.opts...)
			if !errors.Is(err, lock.ErrInvalid) {
				t.Fatalf("Load: %v, want ErrInvalid", err)
			}
			var e *redissonconfig.Error
			if !errors.As(err, &e) || e.Line != tc.line || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("Load: %v (line %d), want line %d and %q", err, e.Line, tc.line, tc.reason)
			}
			if strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "pw-not-shown") {
				t.Fatalf("the error shows a password: %v", err)
			}
			if cfg.Addrs != nil || cfg.NameMapper != nil {
				t.Fatalf("a refused config came back with %+v", cfg)
			}
		})
	}
}

// Several problems are all reported, in line order, on one line.
func TestLoadReportsEveryProblem(t *testing.T) {
	_, _, err := redissonconfig.Load([]byte("singleServerConfig:\n  address: 'redis://h:1'\n  timeout: 0\nlockWatchdogTimeout: 10\n"))
	msg := err.Error()
	if !errors.Is(err, lock.ErrInvalid) || strings.Contains(msg, "\n") ||
		!strings.Contains(msg, "line 3: singleServerConfig.timeout") || !strings.Contains(msg, "line 4: lockWatchdogTimeout") ||
		strings.Index(msg, "line 3") > strings.Index(msg, "line 4") {
		t.Fatalf("Load: %q", msg)
	}
}

func TestParseAddress(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want redissonconfig.Address
		bad  string
	}{
		{in: "redis://127.0.0.1:6379", want: redissonconfig.Address{HostPort: "127.0.0.1:6379", DB: -1}},
		{in: "rediss://u:p@host:6380/4", want: redissonconfig.Address{HostPort: "host:6380", TLS: true, Username: "u", Password: "p", DB: 4}},
		{in: "valkeys://:p@host:1/", want: redissonconfig.Address{HostPort: "host:1", TLS: true, Password: "p", DB: -1}},
		{in: "redis://p@host:1", want: redissonconfig.Address{HostPort: "host:1", Password: "p", DB: -1}},
		{in: "redis://[::1]:1", want: redissonconfig.Address{HostPort: "[::1]:1", DB: -1}},
		{in: "host:1", bad: "want a URL"},
		{in: "http://host:1", bad: "unknown scheme"},
		{in: "redis://host", bad: "no port"},
		{in: "redis://host:0", bad: "no port"},
		{in: "redis://host:1/x", bad: "not a database number"},
		{in: "redis://:pa?ss@host:1", bad: "percent-encode"},
		{in: "redis://:1", bad: "no host"},
	} {
		a, err := redissonconfig.ParseAddress(tc.in)
		switch {
		case tc.bad != "":
			if !errors.Is(err, lock.ErrInvalid) || !strings.Contains(err.Error(), tc.bad) {
				t.Errorf("ParseAddress(%q): %v, want ErrInvalid with %q", tc.in, err, tc.bad)
			}
		case err != nil || a != tc.want:
			t.Errorf("ParseAddress(%q) = %+v, %v; want %+v", tc.in, a, err, tc.want)
		}
	}
	if got := redissonconfig.Redact("rediss://user:hunter2@h:1/2"); got != "rediss://user:xxxxx@h:1/2" {
		t.Errorf("Redact = %q", got)
	}
}

// TestLoadConnects: a loaded config reaches a real server (its password
// from the environment, as Redisson configs keep it), and a Go mapping
// given for the config's nameMapper locks the mapped key.
func TestLoadConnects(t *testing.T) {
	yml := `singleServerConfig:
  address: "redis://${REDIS_ADDR}"
  password: "${REDIS_PASSWORD}"
nameMapper: !<com.example.PrefixMapper> {prefix: "svc:"}
lockWatchdogTimeout: 6000
`
	cfg, _ := load(t, yml, redissonconfig.WithNameMapper("com.example.PrefixMapper", func(n string) string { return "svc:" + n }))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := lock.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	name := "redissonconfig:" + t.Name()
	h, err := c.Mutex(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Unlock(context.Background())
	rc := integration.NewClient(t, shared.DirectAddr(), sharedPassword)
	ttl, err := rc.Do(ctx, rc.B().Pttl().Key("svc:"+name).Build()).AsInt64()
	if err != nil || ttl <= 0 || ttl > 6000 {
		t.Fatalf("PTTL of the mapped key: %d, %v; want the 6s lease of lockWatchdogTimeout", ttl, err)
	}
	if n, err := rc.Do(ctx, rc.B().Exists().Key(name).Build()).AsInt64(); err != nil || n != 0 {
		t.Fatalf("the unmapped key exists (%d, %v)", n, err)
	}
}

func TestLoadTLS(t *testing.T) {
	const single = "singleServerConfig:\n  address: 'rediss://h:1'\n"
	for _, tc := range []struct {
		what, yml string
		insecure  bool // InsecureSkipVerify
		chain     bool // the chain checked by VerifyConnection
		warnKey   string
		warnLine  int
		warn      string
	}{
		{what: "STRICT by default", yml: single},
		{what: "CA_ONLY", yml: single + "sslVerificationMode: CA_ONLY\n", insecure: true, chain: true},
		{what: "NONE", yml: single + "sslVerificationMode: NONE\n", insecure: true, warnKey: "sslVerificationMode", warnLine: 3, warn: "not verified"},
		{what: "endpoint identification off", yml: "singleServerConfig:\n  address: 'rediss://h:1'\n  sslEnableEndpointIdentification: false\n",
			insecure: true, warnKey: "singleServerConfig.sslEnableEndpointIdentification", warnLine: 3, warn: "not verified"},
		{what: "truststore", yml: single + "sslTruststore: file:/etc/redis/truststore.jks\n", warnKey: "sslTruststore", warnLine: 3, warn: "Java keystore"},
		{what: "keystore", yml: single + "sslKeystore: file:/etc/redis/client.p12\n", warnKey: "sslKeystore", warnLine: 3, warn: "no client certificate"},
	} {
		t.Run(tc.what, func(t *testing.T) {
			cfg, ws := load(t, tc.yml)
			if cfg.TLS == nil || cfg.TLS.InsecureSkipVerify != tc.insecure || (cfg.TLS.VerifyConnection != nil) != tc.chain || cfg.TLS.ServerName != "" {
				t.Fatalf("TLS %+v", cfg.TLS)
			}
			if tc.warnKey != "" {
				warned(t, ws, tc.warnKey, tc.warnLine, tc.warn)
			}
		})
	}
	cfg, ws := load(t, "singleServerConfig: {address: 'redis://h:1'}\nsslVerificationMode: CA_ONLY\n")
	if cfg.TLS != nil {
		t.Fatalf("TLS %+v without a rediss:// address", cfg.TLS)
	}
	warned(t, ws, "sslVerificationMode", 2, "no address is rediss://")
}

// TestWarningDiffers: row 22 of newcomer-2's table. A warning says
// whether the setting makes rlock behave differently from Redisson
// (Differs: readMode, subscriptionMode, a Java keystore, ...) or only
// goes unused with no effect on the locks (pool sizes, retries).
func TestWarningDiffers(t *testing.T) {
	_, ws := load(t, `singleServerConfig:
  address: "rediss://h:1"
  connectionPoolSize: 64
  retryAttempts: 3
  readMode: SLAVE
  subscriptionMode: SLAVE
sslTruststore: "file:/x.jks"
threads: 16
`)
	want := map[string]bool{
		"singleServerConfig.connectionPoolSize": false,
		"singleServerConfig.retryAttempts":      false,
		"singleServerConfig.readMode":           true,
		"singleServerConfig.subscriptionMode":   true,
		"sslTruststore":                         true,
		"threads":                               false,
	}
	for _, w := range ws {
		d, ok := want[w.Key]
		if !ok {
			continue
		}
		delete(want, w.Key)
		if w.Differs != d {
			t.Errorf("%v: Differs %v, want %v", w, w.Differs, d)
		}
	}
	if len(want) != 0 {
		t.Errorf("no warning for %v", want)
	}
}
