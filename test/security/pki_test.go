package security

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
	"sync/atomic"
	"testing"
	"time"
)

// ca is a test certificate authority that writes its files into dir.
type ca struct {
	t    *testing.T
	name string
	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string // PEM of the CA certificate
}

var serial atomic.Int64

// pair is a certificate and its key on disk.
type pair struct{ cert, key string }

func newCA(t *testing.T, dir, name string) *ca {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	c := &ca{t: t, name: name, dir: dir, cert: cert, key: key}
	c.file = writePEM(t, filepath.Join(dir, name+"-ca.crt"), "CERTIFICATE", der, 0o644)
	return c
}

// server issues a server certificate for 127.0.0.1 and localhost. It may
// also authenticate clients: etcd's gRPC gateway dials etcd's own gRPC
// server with it, which --client-cert-auth checks like any client.
func (c *ca) server(cn string) pair {
	now := time.Now()
	return c.issue(cn, x509.ExtKeyUsageServerAuth, now.Add(-time.Hour), now.Add(24*time.Hour), x509.ExtKeyUsageClientAuth)
}

// client issues a client certificate whose CN etcd maps to a user name.
func (c *ca) client(cn string) pair {
	now := time.Now()
	return c.issue(cn, x509.ExtKeyUsageClientAuth, now.Add(-time.Hour), now.Add(24*time.Hour))
}

// expiredClient issues a client certificate that expired an hour ago.
func (c *ca) expiredClient(cn string) pair {
	now := time.Now()
	return c.issue(cn, x509.ExtKeyUsageClientAuth, now.Add(-48*time.Hour), now.Add(-time.Hour))
}

func (c *ca) issue(cn string, usage x509.ExtKeyUsage, notBefore, notAfter time.Time, more ...x509.ExtKeyUsage) pair {
	c.t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		c.t.Fatal(err)
	}
	n := serial.Add(1)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(n), Subject: pkix.Name{CommonName: cn},
		NotBefore: notBefore, NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: append([]x509.ExtKeyUsage{usage}, more...),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		c.t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		c.t.Fatal(err)
	}
	base := filepath.Join(c.dir, c.name+"-"+cn+"-"+big.NewInt(n).String())
	return pair{
		cert: writePEM(c.t, base+".crt", "CERTIFICATE", der, 0o644),
		key:  writePEM(c.t, base+".key", "PRIVATE KEY", kder, 0o600),
	}
}

func writePEM(t *testing.T, path, typ string, der []byte, mode os.FileMode) string {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // whatever the umask
		t.Fatal(err)
	}
	return path
}

func chmod(t *testing.T, path string, mode uint32) {
	t.Helper()
	if err := os.Chmod(path, os.FileMode(mode)); err != nil {
		t.Fatal(err)
	}
}
