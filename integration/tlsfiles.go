package integration

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TLSFiles are throwaway PEM files for a TLS test: a CA, a server
// certificate it signed, and a client certificate it signed, in a
// directory removed when the test ends.
type TLSFiles struct {
	CAFile                string // the CA's certificate
	ServerCert, ServerKey string // for TLSOptions
	ClientCert, ClientKey string // a client certificate the CA signed
	// Hosts are the server certificate's names (DNS names and IP
	// addresses).
	Hosts []string
}

// Options returns TLSOptions for a server with these files.
func (f *TLSFiles) Options(authClients bool) *TLSOptions {
	return &TLSOptions{CertFile: f.ServerCert, KeyFile: f.ServerKey, CAFile: f.CAFile, AuthClients: authClients}
}

// NewTLSFiles makes a CA and the certificates it signs for a test: the
// server's for hosts (names or IP addresses; "127.0.0.1" for a server
// reached on loopback by address), and a client's. It fails the test
// on an error.
func NewTLSFiles(tb testing.TB, hosts ...string) *TLSFiles {
	tb.Helper()
	dir := tb.TempDir()
	f := &TLSFiles{Hosts: hosts}
	caKey, caCert, err := newCert(&x509.Certificate{
		Subject: pkix.Name{CommonName: "rlock test CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}, nil, nil)
	if err != nil {
		tb.Fatalf("rlock: integration: test CA: %v", err)
	}
	server := &x509.Certificate{Subject: pkix.Name{CommonName: "rlock test server"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			server.IPAddresses = append(server.IPAddresses, ip)
		} else {
			server.DNSNames = append(server.DNSNames, h)
		}
	}
	client := &x509.Certificate{Subject: pkix.Name{CommonName: "rlock test client"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	write := func(name, typ string, der []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			tb.Fatalf("rlock: integration: %v", err)
		}
		return path
	}
	f.CAFile = write("ca.pem", "CERTIFICATE", caCert.Raw)
	for _, c := range []struct {
		tmpl      *x509.Certificate
		cert, key *string
		name      string
	}{{server, &f.ServerCert, &f.ServerKey, "server"}, {client, &f.ClientCert, &f.ClientKey, "client"}} {
		key, cert, err := newCert(c.tmpl, caCert, caKey)
		if err != nil {
			tb.Fatalf("rlock: integration: test %s certificate: %v", c.name, err)
		}
		der, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			tb.Fatalf("rlock: integration: %v", err)
		}
		*c.cert = write(c.name+".pem", "CERTIFICATE", cert.Raw)
		*c.key = write(c.name+"-key.pem", "PRIVATE KEY", der)
	}
	return f
}

// newCert makes a key and a certificate from tmpl, signed by parent (self
// signed when parent is nil), valid for a day.
func newCert(tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*ecdsa.PrivateKey, *x509.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, err
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	if tmpl.KeyUsage == 0 {
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return key, cert, err
}
