package integration

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// TestTLS: a server with Options.TLS answers TLS clients holding a
// certificate of the test CA on TLSAddr (also after a restart), refuses
// those without one when it authenticates clients, and keeps its plain
// port.
func TestTLS(t *testing.T) {
	files := NewTLSFiles(t, "127.0.0.1")
	srv := Redis(t, Options{TLS: files.Options(true)})
	if srv.TLSAddr() == "" || srv.TLSAddr() == srv.DirectAddr() {
		t.Fatalf("TLSAddr %q, DirectAddr %q", srv.TLSAddr(), srv.DirectAddr())
	}
	pem, err := os.ReadFile(files.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		t.Fatal("CA file holds no certificate")
	}
	cert, err := tls.LoadX509KeyPair(files.ClientCert, files.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	ping := func(cfg *tls.Config) error {
		rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.TLSAddr()}, TLSConfig: cfg,
			ForceSingleClient: true, DisableCache: true, Dialer: net.Dialer{Timeout: 5 * time.Second}})
		if err != nil {
			return err
		}
		defer rc.Close()
		ctx := testCtx(t)
		return rc.Do(ctx, rc.B().Ping().Build()).Error()
	}
	if err := ping(&tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}}); err != nil {
		t.Fatalf("PING over TLS: %v", err)
	}
	if err := ping(&tls.Config{RootCAs: roots}); err == nil {
		t.Fatal("PING over TLS without a client certificate succeeded; the server authenticates clients")
	}
	if err := srv.Ping(testCtx(t)); err != nil {
		t.Fatalf("PING on the plain port: %v", err)
	}
	addr := srv.TLSAddr()
	if err := srv.Restart(testCtx(t), RestartOptions{}); err != nil {
		t.Fatal(err)
	}
	if srv.TLSAddr() != addr {
		t.Fatalf("TLSAddr %q after Restart, was %q", srv.TLSAddr(), addr)
	}
	if err := ping(&tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}}); err != nil {
		t.Fatalf("PING over TLS after Restart: %v", err)
	}
}
