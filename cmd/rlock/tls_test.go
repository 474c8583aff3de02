package main

import (
	"strings"
	"testing"

	"github.com/rlock-go/rlock/integration"
)

// TestTLS: run and inspect against a redis-server that speaks TLS and
// asks for a client certificate, with a certificate for redis.test only
// (not the loopback address they dial): rediss:// or a --tls-* flag
// turns TLS on, --tls-ca verifies against the test CA, --tls-server-name
// names the certificate's host, --tls-cert and --tls-key authenticate;
// Redisson's CA_ONLY verifies the chain and not the name.
func TestTLS(t *testing.T) {
	files := integration.NewTLSFiles(t, "redis.test")
	srv := newServer(t, integration.Options{TLS: files.Options(true)})
	other := integration.NewTLSFiles(t, "redis.test") // another CA
	addr := srv.TLSAddr()
	name := lockName(t)
	ca := []string{"--tls-ca", files.CAFile}
	client := []string{"--tls-cert", files.ClientCert, "--tls-key", files.ClientKey}
	strict := writeFile(t, "strict.yaml", "singleServerConfig:\n  address: 'rediss://"+addr+"'\n")
	caOnly := writeFile(t, "ca-only.yaml", "singleServerConfig:\n  address: 'rediss://"+addr+"'\nsslVerificationMode: CA_ONLY\n")
	join := func(parts ...[]string) []string {
		var out []string
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	run := []string{"run", "--name", name}
	cmd := []string{"--", "sh", "-c", "echo held"}

	for _, tc := range []struct {
		what string
		args []string
		code int
		err  string // in stderr
	}{
		{"rediss URL", join(run, []string{"--addr", "rediss://" + addr, "--tls-server-name", "redis.test"}, ca, client, cmd), 0, ""},
		{"--tls-* implies TLS", join(run, []string{"--addr", addr, "--tls-server-name", "redis.test"}, ca, client, cmd), 0, ""},
		{"name not in the certificate", join(run, []string{"--addr", "rediss://" + addr}, ca, client, cmd), exitUnavailable, "--tls-server-name"},
		{"unknown CA", join(run, []string{"--addr", "rediss://" + addr, "--tls-server-name", "redis.test"}, client, cmd), exitUnavailable, "--tls-ca"},
		{"no client certificate", join(run, []string{"--addr", "rediss://" + addr, "--tls-server-name", "redis.test"}, ca, cmd), exitUnavailable, ""},
		{"config STRICT", join(run, []string{"--redisson-config", strict}, ca, client, cmd), exitUnavailable, "certificate"},
		{"config STRICT, name given", join(run, []string{"--redisson-config", strict, "--tls-server-name", "redis.test"}, ca, client, cmd), 0, ""},
		{"config CA_ONLY", join(run, []string{"--redisson-config", caOnly}, ca, client, cmd), 0, ""},
		{"config CA_ONLY, another CA", join(run, []string{"--redisson-config", caOnly, "--tls-ca", other.CAFile}, client, cmd), exitUnavailable, "certificate"},
		{"inspect", join([]string{"inspect", "--addr", "rediss://" + addr, "--tls-server-name", "redis.test"}, ca, client, []string{name}), 0, ""},
		{"inspect, config CA_ONLY", join([]string{"inspect", "--redisson-config", caOnly}, ca, client, []string{name}), 0, ""},
		{"inspect, unknown CA", join([]string{"inspect", "--addr", "rediss://" + addr, "--tls-server-name", "redis.test"}, client, []string{name}), exitUnavailable, "--tls-ca"},
	} {
		t.Run(tc.what, func(t *testing.T) {
			r := runRlock(t, tc.args...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.err) {
				t.Fatalf("exit %d, want %d (stderr with %q)\nstdout %s\nstderr %s", r.code, tc.code, tc.err, r.stdout, r.stderr)
			}
			if tc.code == 0 && tc.args[0] == "run" && r.stdout != "held\n" {
				t.Fatalf("stdout %q, want the command's", r.stdout)
			}
			if tc.code == 0 && tc.args[0] == "inspect" && !strings.Contains(r.stdout, "not locked") {
				t.Fatalf("stdout %q", r.stdout)
			}
		})
	}
}
