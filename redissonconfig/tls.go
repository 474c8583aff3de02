package redissonconfig

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
)

// Redisson's sslVerificationMode.
const (
	verifyStrict = "STRICT"  // the chain and the host name (the default)
	verifyCAOnly = "CA_ONLY" // the chain, not the host name
	verifyNone   = "NONE"    // nothing
)

// tlsConfig is the TLS configuration of a Redisson sslVerificationMode.
// Certificates come from the system roots: Redisson's truststore and
// keystore are Java keystores that Load does not read. The server name
// is left empty, so that each node is checked against its own host.
//
// For CA_ONLY the chain is checked against the config's RootCAs when the
// connection is made, so that roots added to the returned config later
// (the rlock command's --tls-ca) are used; modify it in place.
func tlsConfig(mode string) *tls.Config {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	switch mode {
	case verifyCAOnly:
		c.InsecureSkipVerify = true // the host name; the chain is checked below
		c.VerifyConnection = func(cs tls.ConnectionState) error { return verifyChain(cs, c.RootCAs) }
	case verifyNone:
		c.InsecureSkipVerify = true
	}
	return c
}

// verifyChain checks the server's certificate chain against roots (nil:
// the system's), without its host name.
func verifyChain(cs tls.ConnectionState, roots *x509.CertPool) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("rlock: the server sent no certificate")
	}
	opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool()}
	for _, c := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(opts)
	return err
}
