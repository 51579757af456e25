package cluster

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/clusterrebootd/clusterrebootd/test/etcdtest"
)

// testCA issues certificates in memory for the diagnosis tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

func (c *testCA) leaf(t *testing.T, cn string, usage x509.ExtKeyUsage, from, to time.Time) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: from, NotAfter: to, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

// tlsServer accepts connections on 127.0.0.1, handshakes and, like etcd's
// HTTP/2 server, writes first; it returns its address.
func tlsServer(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	l, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if err := c.(*tls.Conn).Handshake(); err != nil {
					return
				}
				_, _ = c.Write([]byte("hello"))
				_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
				_, _ = c.Read(make([]byte, 1))
			}()
		}
	}()
	return l.Addr().String()
}

func TestDiagnose(t *testing.T) {
	now := time.Now()
	ca, rogue := newTestCA(t, "ca"), newTestCA(t, "rogue ca")
	srvCert := ca.leaf(t, "srv", x509.ExtKeyUsageServerAuth, now.Add(-time.Hour), now.Add(time.Hour))
	expiredSrv := ca.leaf(t, "srv", x509.ExtKeyUsageServerAuth, now.Add(-2*time.Hour), now.Add(-time.Hour))
	client := ca.leaf(t, "node-1", x509.ExtKeyUsageClientAuth, now.Add(-time.Hour), now.Add(time.Hour))
	expiredClient := ca.leaf(t, "node-1", x509.ExtKeyUsageClientAuth, now.Add(-2*time.Hour), now.Add(-time.Hour))
	rogueClient := rogue.leaf(t, "node-1", x509.ExtKeyUsageClientAuth, now.Add(-time.Hour), now.Add(time.Hour))

	mtls := &tls.Config{Certificates: []tls.Certificate{srvCert}, ClientCAs: ca.pool, ClientAuth: tls.RequireAndVerifyClientCert}
	serverOnly := &tls.Config{Certificates: []tls.Certificate{srvCert}}
	refuseAll := &tls.Config{Certificates: []tls.Certificate{srvCert}, ClientAuth: tls.RequireAnyClientCert,
		VerifyPeerCertificate: func([][]byte, [][]*x509.Certificate) error { return errors.New("no") }}
	mtlsAddr, plainAddr := tlsServer(t, mtls), tlsServer(t, serverOnly)
	expiredAddr := tlsServer(t, &tls.Config{Certificates: []tls.Certificate{expiredSrv}})
	refuseAddr := tlsServer(t, refuseAll)
	dead := deadEndpoint(t)

	cli := func(certs ...tls.Certificate) *tls.Config {
		return &tls.Config{RootCAs: ca.pool, Certificates: certs, MinVersion: tls.VersionTLS12}
	}
	for _, tc := range []struct {
		name string
		ep   string
		cfg  *tls.Config
		want []string // "" entries: want no diagnosis
	}{
		{"all fine", "https://" + mtlsAddr, cli(client), nil},
		{"plain http, reachable", "http://" + mtlsAddr, nil, nil},
		{"refused", dead, nil, []string{"connection refused"}},
		{"refused https", strings.Replace(dead, "http:", "https:", 1), cli(client), []string{"connection refused"}},
		{"unknown server CA", "https://" + plainAddr, &tls.Config{RootCAs: rogue.pool}, []string{"unknown authority", "etcd.tls.ca_file"}},
		{"server name mismatch", "https://" + plainAddr, &tls.Config{RootCAs: ca.pool, ServerName: "etcd.example"}, []string{"etcd.tls.server_name"}},
		{"expired server certificate", "https://" + expiredAddr, cli(), []string{"expired", "renew it"}},
		{"no client certificate", "https://" + mtlsAddr, cli(), []string{"certificate required", "set etcd.tls.cert_file and etcd.tls.key_file"}},
		{"client certificate of another CA", "https://" + mtlsAddr, cli(rogueClient), []string{"certificate required", "not signed by any CA the etcd server trusts"}},
		{"expired client certificate", "https://" + mtlsAddr, cli(expiredClient), []string{"expired certificate", "etcd.tls.cert_file", `(CN "node-1") expired at`}},
		{"client certificate refused", "https://" + refuseAddr, cli(client), []string{"bad certificate", "rejected this node's client certificate"}},
		{"bare host:port", mtlsAddr, cli(client), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := diagnose(context.Background(), []string{tc.ep}, tc.cfg, 5*time.Second)
			if len(tc.want) == 0 {
				if got != "" {
					t.Fatalf("diagnose = %q, want nothing", got)
				}
				return
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Fatalf("diagnose = %q, want %q in it", got, w)
				}
			}
		})
	}
	// Several endpoints: each problem is reported.
	got := diagnose(context.Background(), []string{dead, "https://" + plainAddr}, &tls.Config{RootCAs: rogue.pool}, 5*time.Second)
	if !strings.Contains(got, "connection refused") || !strings.Contains(got, "unknown authority") {
		t.Fatalf("two endpoints: %q", got)
	}
	// A spent budget diagnoses nothing rather than blocking.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got := diagnose(ctx, []string{"https://" + mtlsAddr}, cli(), time.Second); got != "" {
		t.Fatalf("cancelled: %q", got)
	}
}

func TestCertWindow(t *testing.T) {
	now := time.Now()
	ca := newTestCA(t, "ca")
	cfg := func(c tls.Certificate) *tls.Config { return &tls.Config{Certificates: []tls.Certificate{c}} }
	valid := ca.leaf(t, "n", x509.ExtKeyUsageClientAuth, now.Add(-time.Hour), now.Add(time.Hour))
	future := ca.leaf(t, "n", x509.ExtKeyUsageClientAuth, now.Add(time.Hour), now.Add(2*time.Hour))
	if got := certWindow(cfg(valid), now); got != "" {
		t.Fatalf("valid: %q", got)
	}
	if got := certWindow(cfg(future), now); !strings.Contains(got, "not valid before") {
		t.Fatalf("future: %q", got)
	}
	if got := certWindow(nil, now); got != "" {
		t.Fatalf("nil: %q", got)
	}
	if got := certWindow(&tls.Config{Certificates: []tls.Certificate{{}}}, now); got != "" {
		t.Fatalf("no leaf: %q", got)
	}
}

func TestAccessHint(t *testing.T) {
	now := time.Now()
	ca := newTestCA(t, "ca")
	withCert := &tls.Config{Certificates: []tls.Certificate{ca.leaf(t, "node-7.example", x509.ExtKeyUsageClientAuth, now.Add(-time.Hour), now.Add(time.Hour))}}
	for _, tc := range []struct {
		o    Options
		cfg  *tls.Config
		err  error
		want []string
	}{
		{Options{Cluster: "prod", Username: "u1"}, nil, rpctypes.ErrPermissionDenied, []string{`etcd user "u1"`, "/clusterrebootd/prod/", "clusterrebootd-prod", "hack/etcd-rbac.sh"}},
		{Options{Cluster: "prod"}, withCert, fmt.Errorf("x: %w", rpctypes.ErrPermissionDenied), []string{`"node-7.example" (the client certificate's CN)`}},
		{Options{Cluster: "prod"}, nil, rpctypes.ErrPermissionDenied, []string{"the client certificate's user"}},
		{Options{Cluster: "prod", Username: "u1"}, nil, rpctypes.ErrAuthFailed, []string{"etcd.password_file"}},
		{Options{Cluster: "prod"}, nil, rpctypes.ErrUserEmpty, []string{"authentication enabled"}},
		{Options{Cluster: "prod"}, nil, rpctypes.ErrInvalidAuthToken, []string{"token"}},
		{Options{Cluster: "prod"}, nil, errors.New("other"), nil},
	} {
		got := accessHint(tc.o, tc.cfg, tc.err)
		if len(tc.want) == 0 && got != "" {
			t.Errorf("%v: %q, want none", tc.err, got)
		}
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%v: %q lacks %q", tc.err, got, w)
			}
		}
	}
}

// TestDialExplainsTLSFailure: Dial against a real etcd that requires client
// certificates says what is wrong instead of only "deadline exceeded".
func TestDialExplainsTLSFailure(t *testing.T) {
	dir := t.TempDir()
	ca, sc, sk, cc, ck := writeCerts(t, dir)
	srv := etcdtest.StartWith(t, etcdtest.Options{CertFile: sc, KeyFile: sk, TrustedCAFile: ca, ClientCertAuth: true})
	other := t.TempDir()
	otherCA, _, _, _, _ := writeCerts(t, other)
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"wrong CA", Options{CAFile: otherCA, CertFile: cc, KeyFile: ck}, "certificate signed by unknown authority"},
		{"no client certificate", Options{CAFile: ca}, "certificate required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o
			o.Endpoints, o.Cluster, o.DialTimeout = srv.Endpoints(), "x", time.Second
			c, err := Dial(ctxT(t), o)
			if err == nil {
				c.Close()
				t.Fatal("Dial succeeded")
			}
			wantIs(t, err, ErrUnavailable)
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Dial: %v; want %q in it", err, tc.want)
			}
		})
	}
}
