package security

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// tlsFor is the client TLS configuration of the test's own etcd clients.
func tlsFor(caFile string, p pair) (*tls.Config, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no certificate", caFile)
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if p.cert != "" {
		c, err := tls.LoadX509KeyPair(p.cert, p.key)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	return cfg, nil
}
