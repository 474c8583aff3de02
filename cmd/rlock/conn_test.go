package main

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// resolveArgs parses run's flags from args and resolves the connection.
func resolveArgs(t *testing.T, args ...string) (*connection, error) {
	t.Helper()
	var o runOptions
	fs := newRunFlags(&o)
	if err := parse(fs, append(args, "--name", "x")); err != nil {
		t.Fatalf("parse %q: %v", args, err)
	}
	return o.conn.resolve()
}

// clearEnv unsets rlock's variables for the test.
func clearEnv(t *testing.T) {
	for _, k := range []string{envAddr, envPassword, envSentinelPassword} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
}

// writeFile writes a file of the test's own and returns its path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSentinelFlags: --sentinel-master and --sentinel make one Config
// with the master set, the sentinels as Addrs, the sentinels' own
// credentials (flags, $RLOCK_SENTINEL_PASSWORD, a URL's) apart from the
// master's, and --db for the master. (Connecting through sentinels is
// lock.New's, tested where it is built.)
func TestSentinelFlags(t *testing.T) {
	clearEnv(t)
	t.Setenv(envSentinelPassword, "sentinel-env")
	t.Setenv(envPassword, "master-env")
	conn, err := resolveArgs(t, "--sentinel-master", "orders", "--sentinel", "127.0.0.1:26379, 127.0.0.2:26379",
		"--sentinel-username", "watcher", "--db", "2", "--username", "app")
	if err != nil {
		t.Fatal(err)
	}
	if len(conn.masters) != 1 {
		t.Fatalf("%d Configs, want one Client for the sentinel set", len(conn.masters))
	}
	c := conn.masters[0]
	if c.MasterSet != "orders" || !slices.Equal(c.Addrs, []string{"127.0.0.1:26379", "127.0.0.2:26379"}) || c.Cluster || c.DB != 2 {
		t.Fatalf("MasterSet %q Addrs %v Cluster %v DB %d", c.MasterSet, c.Addrs, c.Cluster, c.DB)
	}
	if c.SentinelUsername != "watcher" || c.SentinelPassword != "sentinel-env" || c.Username != "app" || c.Password != "master-env" {
		t.Fatalf("sentinel %q/%q, master %q/%q", c.SentinelUsername, c.SentinelPassword, c.Username, c.Password)
	}

	// The flag wins over the environment, a URL's credentials over both;
	// rediss:// sentinels mean TLS.
	conn, err = resolveArgs(t, "--sentinel-master", "orders", "--sentinel-password", "sentinel-flag", "--sentinel", "127.0.0.1:26379")
	if err != nil || conn.masters[0].SentinelPassword != "sentinel-flag" {
		t.Fatalf("--sentinel-password: %v, %+v", err, conn)
	}
	conn, err = resolveArgs(t, "--sentinel-master", "orders", "--sentinel-password", "sentinel-flag",
		"--sentinel", "rediss://w2:sentinel-url@127.0.0.1:26379,rediss://w2:sentinel-url@127.0.0.2:26379")
	if err != nil {
		t.Fatal(err)
	}
	if c := conn.masters[0]; c.SentinelUsername != "w2" || c.SentinelPassword != "sentinel-url" || c.Password != "master-env" || c.TLS == nil {
		t.Fatalf("URL credentials: sentinel %q/%q master %q TLS %v", c.SentinelUsername, c.SentinelPassword, c.Password, c.TLS)
	}
}

// TestConnectionFlags: what each combination of flags resolves to, and
// the combinations refused as bad usage.
func TestConnectionFlags(t *testing.T) {
	clearEnv(t)
	conn, err := resolveArgs(t, "--cluster", "--addr", "127.0.0.1:7000,redis://127.0.0.2:7001")
	if err != nil {
		t.Fatal(err)
	}
	if c := conn.masters; len(c) != 1 || !c[0].Cluster || !slices.Equal(c[0].Addrs, []string{"127.0.0.1:7000", "127.0.0.2:7001"}) {
		t.Fatalf("--cluster: %+v", c)
	}
	conn, err = resolveArgs(t, "--addr", "redis://u:p@127.0.0.1:6379/4,127.0.0.2:6379")
	if err != nil {
		t.Fatal(err)
	}
	if c := conn.masters; len(c) != 2 || c[0].Username != "u" || c[0].Password != "p" || c[0].DB != 4 || c[1].Password != "" || c[1].DB != 0 {
		t.Fatalf("a RedLock with per-master URLs: %+v", c)
	}
	conn, err = resolveArgs(t, "--addr", "127.0.0.1:6379", "--tls-server-name", "redis.internal")
	if err != nil || conn.masters[0].TLS == nil || conn.masters[0].TLS.ServerName != "redis.internal" {
		t.Fatalf("--tls-server-name implies TLS: %v %+v", err, conn)
	}

	dir := t.TempDir()
	for _, tc := range []struct {
		what string
		args []string
		msg  string
	}{
		{"sentinel without master", []string{"--sentinel", "h:26379"}, "--sentinel needs --sentinel-master"},
		{"master without sentinels", []string{"--sentinel-master", "m"}, "--sentinel-master needs --sentinel"},
		{"sentinel and addr", []string{"--sentinel-master", "m", "--sentinel", "h:1", "--addr", "h:2"}, "exclude each other"},
		{"sentinel and cluster", []string{"--sentinel-master", "m", "--sentinel", "h:1", "--cluster"}, "exclude each other"},
		{"negative db", []string{"--db", "-1"}, "want 0 or more"},
		{"db and cluster", []string{"--cluster", "--db", "1"}, "database 0 only"},
		{"db twice", []string{"--addr", "redis://h:1/3", "--db", "2"}, "names database 3"},
		{"cluster seeds differ", []string{"--cluster", "--addr", "redis://h:1,rediss://h:2"}, "differ in credentials, TLS or database"},
		{"bad URL", []string{"--addr", "redis://:hunter2@h"}, "no port"},
		{"cert without key", []string{"--tls-cert", "c.pem"}, "go together"},
		{"CA file missing", []string{"--tls-ca", filepath.Join(dir, "none.pem")}, "--tls-ca"},
		{"CA file without PEM", []string{"--tls-ca", writeFile(t, "ca.pem", "not a certificate")}, "no PEM certificate"},
		{"config missing", []string{"--redisson-config", filepath.Join(dir, "none.yaml")}, "--redisson-config"},
		{"config malformed", []string{"--redisson-config", writeFile(t, "bad.yaml", "singleServerConfig:\n  address: [\n")}, "line"},
		{"config with nameMapper", []string{"--redisson-config", writeFile(t, "nm.yaml",
			"singleServerConfig: {address: 'redis://h:1'}\nnameMapper: !<com.example.M> {}\n")}, "no name mapping"},
	} {
		t.Run(tc.what, func(t *testing.T) {
			_, err := resolveArgs(t, tc.args...)
			var ee *exitErr
			if !errors.As(err, &ee) || ee.code != exitUsage || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("%v, want a usage error with %q", err, tc.msg)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("the error shows the password: %v", err)
			}
		})
	}
}

// TestRedissonConfigFlags: --redisson-config gives the connection and
// the lock settings; flags given override it one by one, a topology
// given replaces it, and the environment's defaults yield to it.
func TestRedissonConfigFlags(t *testing.T) {
	clearEnv(t)
	t.Setenv(envPassword, "from-env")
	t.Setenv(envAddr, "127.0.0.10:6379")
	sentinel := writeFile(t, "sentinel.yaml", `sentinelServersConfig:
  masterName: orders
  sentinelAddresses: ["redis://127.0.0.1:26379", "redis://127.0.0.2:26379"]
  sentinelPassword: sentinel-file
  database: 5
  timeout: 2000
password: master-file
lockWatchdogTimeout: 9000
checkLockSyncedSlaves: false
`)
	conn, err := resolveArgs(t, "--redisson-config", sentinel)
	if err != nil {
		t.Fatal(err)
	}
	c := conn.masters[0]
	if c.MasterSet != "orders" || len(c.Addrs) != 2 || c.DB != 5 || c.Password != "master-file" || c.SentinelPassword != "sentinel-file" ||
		c.WatchdogTimeout.Milliseconds() != 9000 || c.CommandTimeout.Milliseconds() != 2000 || c.ReplicaSyncTimeout >= 0 {
		t.Fatalf("from the file: %+v", c)
	}
	conn, err = resolveArgs(t, "--redisson-config", sentinel, "--password", "flag", "--db", "1")
	if c := conn.masters[0]; err != nil || c.Password != "flag" || c.DB != 1 || c.MasterSet != "orders" {
		t.Fatalf("flags over the file: %v %+v", err, c)
	}
	conn, err = resolveArgs(t, "--redisson-config", sentinel, "--addr", "127.0.0.9:6379")
	if c := conn.masters[0]; err != nil || c.MasterSet != "" || !slices.Equal(c.Addrs, []string{"127.0.0.9:6379"}) || c.WatchdogTimeout.Milliseconds() != 9000 {
		t.Fatalf("--addr replaces the file's sentinels, keeps its lock settings: %v %+v", err, c)
	}
	if _, err := resolveArgs(t, "--redisson-config", sentinel, "--cluster"); err == nil || !strings.Contains(err.Error(), "exclude each other") {
		t.Fatalf("--cluster over a sentinel config: %v", err)
	}

	single := writeFile(t, "single.yaml", "singleServerConfig: {address: 'redis://127.0.0.3:6379'}\n")
	conn, err = resolveArgs(t, "--redisson-config", single)
	if c := conn.masters[0]; err != nil || !slices.Equal(c.Addrs, []string{"127.0.0.3:6379"}) || c.Password != "from-env" {
		t.Fatalf("$RLOCK_ADDR yields to the file, $RLOCK_PASSWORD fills in: %v %+v", err, c)
	}
	conn, err = resolveArgs(t, "--redisson-config", single, "--cluster")
	if c := conn.masters[0]; err != nil || !c.Cluster || !slices.Equal(c.Addrs, []string{"127.0.0.3:6379"}) {
		t.Fatalf("--cluster makes the file's address a seed: %v %+v", err, c)
	}
	caOnly := writeFile(t, "tls.yaml", "singleServerConfig: {address: 'rediss://127.0.0.4:6379'}\nsslVerificationMode: CA_ONLY\n")
	conn, err = resolveArgs(t, "--redisson-config", caOnly)
	if c := conn.masters[0]; err != nil || c.TLS == nil || !c.TLS.InsecureSkipVerify || c.TLS.VerifyConnection == nil {
		t.Fatalf("the file's CA_ONLY TLS: %v %+v", err, c.TLS)
	}
	conn, err = resolveArgs(t, "--redisson-config", caOnly, "--addr", "127.0.0.5:6379")
	if c := conn.masters[0]; err != nil || c.TLS != nil {
		t.Fatalf("a plain --addr over a TLS file: %v, TLS %+v, want none", err, c.TLS)
	}
	conn, err = resolveArgs(t, "--redisson-config", caOnly, "--addr", "rediss://127.0.0.5:6379")
	if c := conn.masters[0]; err != nil || c.TLS == nil || c.TLS.VerifyConnection == nil {
		t.Fatalf("a rediss:// --addr over a CA_ONLY file keeps its verification mode: %v, TLS %+v", err, c.TLS)
	}

	var o runOptions
	if err := parse(newRunFlags(&o), []string{"--redisson-config", single, "--watchdog-timeout", "4s", "--name", "x"}); err != nil {
		t.Fatal(err)
	}
	conn, err = o.conn.resolve()
	if err != nil {
		t.Fatal(err)
	}
	lc := lockerConfig{masters: conn.masters, watchdogTimeout: o.watchdogTimeout}.clientConfig(0)
	if lc.WatchdogTimeout.Seconds() != 4 || lc.ClientID == "" {
		t.Fatalf("--watchdog-timeout over the file: %v, client id %q", lc.WatchdogTimeout, lc.ClientID)
	}
}
