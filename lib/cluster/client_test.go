package cluster

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/clusterrebootd/clusterrebootd/test/etcdtest"
)

// deadEndpoint returns a loopback URL on which nothing listens.
func deadEndpoint(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

func TestDialDeadEndpointIsUnavailable(t *testing.T) {
	const dialTimeout = time.Second
	start := time.Now()
	c, err := Dial(ctxT(t), Options{Endpoints: []string{deadEndpoint(t)}, Cluster: "x", DialTimeout: dialTimeout})
	if err == nil {
		c.Close()
		t.Fatal("Dial to a dead endpoint succeeded")
	}
	wantIs(t, err, ErrUnavailable)
	// A bound, not a speed test: Dial must give up around DialTimeout.
	if el := time.Since(start); el > dialTimeout+10*time.Second {
		t.Fatalf("Dial took %s with DialTimeout %s", el, dialTimeout)
	}
}

func TestDialValidatesOptions(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	notPEM := filepath.Join(dir, "notpem")
	for _, f := range []string{empty, notPEM} {
		if err := os.WriteFile(f, []byte(map[string]string{empty: "\n", notPEM: "hello"}[f]), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ep := []string{"http://127.0.0.1:1"}
	for name, o := range map[string]Options{
		"no endpoints":         {Cluster: "x"},
		"no cluster":           {Endpoints: ep},
		"slash in cluster":     {Endpoints: ep, Cluster: "a/b"},
		"user without pw":      {Endpoints: ep, Cluster: "x", Username: "u"},
		"pw without user":      {Endpoints: ep, Cluster: "x", PasswordFile: empty},
		"missing pw file":      {Endpoints: ep, Cluster: "x", Username: "u", PasswordFile: filepath.Join(dir, "nope")},
		"empty pw file":        {Endpoints: ep, Cluster: "x", Username: "u", PasswordFile: empty},
		"missing ca":           {Endpoints: ep, Cluster: "x", CAFile: filepath.Join(dir, "nope")},
		"ca not pem":           {Endpoints: ep, Cluster: "x", CAFile: notPEM},
		"cert without key":     {Endpoints: ep, Cluster: "x", CertFile: notPEM},
		"unreadable key pair":  {Endpoints: ep, Cluster: "x", CertFile: notPEM, KeyFile: notPEM},
		"server name, bad key": {Endpoints: ep, Cluster: "x", ServerName: "etcd", KeyFile: empty},
	} {
		c, err := Dial(ctxT(t), o)
		if err == nil {
			c.Close()
			t.Errorf("%s: Dial succeeded", name)
			continue
		}
		if errors.Is(err, ErrUnavailable) {
			t.Errorf("%s: %v: a configuration error must not look like unavailability", name, err)
		}
	}
}

func TestRequestsWhileEtcdIsDown(t *testing.T) {
	srv := etcdtest.Start(t)
	c, err := Dial(ctxT(t), Options{Endpoints: srv.Endpoints(), Cluster: "x", DialTimeout: time.Second, RequestTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := ctxT(t)
	if err := c.Register(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	calls := map[string]func() error{
		"Snapshot":      func() error { _, err := c.Snapshot(ctx); return err },
		"PublishAlive":  func() error { return c.PublishAlive(ctx, testAlive("n1"), time.Minute) },
		"Register":      func() error { return c.Register(ctx, "n2") },
		"SetPause":      func() error { return c.SetPause(ctx, Pause{Reason: "x"}) },
		"History":       func() error { _, err := c.History(ctx, "", time.Time{}); return err },
		"AppendHistory": func() error { return c.AppendHistory(ctx, HistoryEvent{Event: EventAborted, Node: "n1"}, time.Hour) },
		"NewSession": func() error {
			_, err := c.NewSession(ctx, time.Minute, LockInfo{Node: "n1"})
			return err
		},
	}
	for name, call := range calls {
		err := call()
		if !errors.Is(err, ErrUnavailable) {
			t.Errorf("%s while etcd is down: %v, want ErrUnavailable", name, err)
		}
	}
	srv.Restart(t)
	if _, err := c.Snapshot(ctx); err != nil {
		t.Fatalf("Snapshot after restart: %v", err)
	}
}

func TestSessionEndsWhenEtcdIsDown(t *testing.T) {
	srv := etcdtest.Start(t)
	c, err := Dial(ctxT(t), Options{Endpoints: srv.Endpoints(), Cluster: "x", RequestTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := ctxT(t)
	s, err := c.NewSession(ctx, 2*time.Second, LockInfo{Node: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	// No keepalive can succeed: the session ends within about its TTL.
	select {
	case <-s.Done():
	case <-ctx.Done():
		t.Fatal("session not done while etcd is down")
	}
	if s.KeepAliveHealthy() {
		t.Fatal("KeepAliveHealthy while etcd is down")
	}
	if err := s.Unlock(ctx); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Unlock while etcd is down: %v, want ErrUnavailable", err)
	}
	if err := s.Close(ctx); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Close while etcd is down: %v, want ErrUnavailable", err)
	}
}

func TestLockEndsWhenEtcdDies(t *testing.T) {
	srv := etcdtest.Start(t)
	c, err := Dial(ctxT(t), Options{Endpoints: srv.Endpoints(), Cluster: "x", RequestTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := ctxT(t)
	s1, err := c.NewSession(ctx, time.Minute, LockInfo{Node: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	s2, err := c.NewSession(ctx, 2*time.Second, LockInfo{Node: "n2"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s1.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s2.Lock(ctx) }()
	for { // until s2 is queued behind s1
		snap, err := c.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.Queue) == 2 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	srv.Kill()
	// Whichever the waiting Mutex notices first: the broken connection or
	// the session's end. Never success, never a hang.
	if err := <-done; !errors.Is(err, ErrLockLost) && !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Lock while etcd died: %v, want ErrLockLost or ErrUnavailable", err)
	}
}

func setupAuth(t *testing.T, srv *etcdtest.Server) {
	t.Helper()
	raw, err := clientv3.New(clientv3.Config{Endpoints: srv.Endpoints(), DialTimeout: 5 * time.Second, Logger: newZapLogger(discard())})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	ctx := ctxT(t)
	steps := []func() error{
		func() error { _, err := raw.RoleAdd(ctx, "root"); return err },
		func() error { _, err := raw.UserAdd(ctx, "root", "rootpw"); return err },
		func() error { _, err := raw.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := raw.UserAdd(ctx, "nobody", "nobodypw"); return err },
		func() error { _, err := raw.AuthEnable(ctx); return err },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("auth setup step %d: %v", i, err)
		}
	}
}

func TestDialWithAuth(t *testing.T) {
	srv := etcdtest.Start(t)
	setupAuth(t, srv)
	dir := t.TempDir()
	pwFile := func(name, pw string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(pw), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ctx := ctxT(t)
	o := Options{Endpoints: srv.Endpoints(), Cluster: "x", Username: "root", PasswordFile: pwFile("root", "rootpw\n")}
	c, err := Dial(ctx, o)
	if err != nil {
		t.Fatalf("Dial with the right password (trailing newline): %v", err)
	}
	if err := c.Register(ctx, "n1"); err != nil {
		t.Fatalf("Register as root: %v", err)
	}
	c.Close()

	o.PasswordFile = pwFile("crlf", "rootpw\r\n")
	if c, err := Dial(ctx, o); err != nil {
		t.Fatalf("Dial with a CRLF password file: %v", err)
	} else {
		c.Close()
	}

	o.PasswordFile = pwFile("wrong", "s3cr3t-wrong\n")
	_, err = Dial(ctx, o)
	if !errors.Is(err, ErrAuth) || errors.Is(err, ErrUnavailable) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("Dial with a wrong password: %v, want ErrAuth", err)
	}
	if strings.Contains(err.Error(), "s3cr3t-wrong") {
		t.Fatalf("error reveals the password: %v", err)
	}

	o.Username, o.PasswordFile = "nobody", pwFile("nobody", "nobodypw")
	_, err = Dial(ctx, o)
	if !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("Dial as a user without permissions: %v, want ErrAuth (permission denied)", err)
	}
}

// writeCerts creates a CA, a server certificate for 127.0.0.1 and a client
// certificate in dir.
func writeCerts(t *testing.T, dir string) (ca, srvCert, srvKey, cliCert, cliKey string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	leaf := func(name string, serial int64, usage x509.ExtKeyUsage) (string, string) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return write(name+".crt", "CERTIFICATE", der), write(name+".key", "EC PRIVATE KEY", kder)
	}
	ca = write("ca.crt", "CERTIFICATE", caDER)
	srvCert, srvKey = leaf("server", 2, x509.ExtKeyUsageServerAuth)
	cliCert, cliKey = leaf("client", 3, x509.ExtKeyUsageClientAuth)
	return
}

func TestDialWithTLSClientCert(t *testing.T) {
	dir := t.TempDir()
	ca, sc, sk, cc, ck := writeCerts(t, dir)
	srv := etcdtest.StartWith(t, etcdtest.Options{CertFile: sc, KeyFile: sk, TrustedCAFile: ca, ClientCertAuth: true})
	if !strings.HasPrefix(srv.ClientURL(), "https://") {
		t.Fatalf("TLS server URL %s", srv.ClientURL())
	}
	ctx := ctxT(t)
	o := Options{Endpoints: srv.Endpoints(), Cluster: "x", CAFile: ca, CertFile: cc, KeyFile: ck, DialTimeout: 2 * time.Second}
	c, err := Dial(ctx, o)
	if err != nil {
		t.Fatalf("Dial with TLS client cert: %v", err)
	}
	if err := c.Register(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	c.Close()

	o.ServerName = "localhost"
	if c, err := Dial(ctx, o); err != nil {
		t.Fatalf("Dial with server name: %v", err)
	} else {
		c.Close()
	}

	// Without a client certificate the server refuses the handshake.
	o.CertFile, o.KeyFile, o.ServerName = "", "", ""
	if c, err := Dial(ctx, o); err == nil {
		c.Close()
		t.Fatal("Dial without client certificate succeeded")
	}
}

func TestClassify(t *testing.T) {
	live := context.Background()
	cancelled, cancel := context.WithCancel(live)
	cancel()
	other := errors.New("boom")
	for _, tc := range []struct {
		ctx   context.Context
		err   error
		is    []error
		isNot []error
	}{
		{live, nil, nil, nil},
		{live, context.DeadlineExceeded, []error{ErrUnavailable, context.DeadlineExceeded}, []error{ErrAuth}},
		{live, fmt.Errorf("x: %w", rpctypesNoLeader()), []error{ErrUnavailable}, nil},
		{live, grpcUnavailable(), []error{ErrUnavailable}, nil},
		{live, rpctypesPermissionDenied(), []error{ErrAuth}, []error{ErrUnavailable, ErrCorrupt}},
		{live, rpctypesInvalidToken(), []error{ErrAuth}, nil},
		{live, rpctypesAuthFailed(), []error{ErrAuth}, nil},
		{live, rpctypesTooManyRequests(), []error{ErrUnavailable}, nil},
		{live, sessionExpired(), []error{ErrLockLost}, nil},
		{live, clientv3.ErrNoAvailableEndpoints, []error{ErrUnavailable}, nil},
		{live, other, []error{other}, []error{ErrUnavailable, ErrAuth, ErrLockLost, ErrConflict, ErrCorrupt}},
		{live, ErrConflict, []error{ErrConflict}, []error{ErrUnavailable}},
		{cancelled, grpcCanceled(), []error{context.Canceled}, []error{ErrUnavailable}},
	} {
		got := classify(tc.ctx, "op", tc.err)
		if tc.err == nil {
			if got != nil {
				t.Errorf("classify(nil) = %v", got)
			}
			continue
		}
		for _, want := range tc.is {
			if !errors.Is(got, want) {
				t.Errorf("classify(%v) = %v: want errors.Is %v", tc.err, got, want)
			}
		}
		for _, no := range tc.isNot {
			if errors.Is(got, no) {
				t.Errorf("classify(%v) = %v: must not be %v", tc.err, got, no)
			}
		}
		if !strings.Contains(got.Error(), tc.err.Error()) {
			t.Errorf("classify(%v) = %v: cause text lost", tc.err, got)
		}
	}
}

func TestCorruptErrorMessage(t *testing.T) {
	err := corrupt("/clusterrebootd/x/pause", "bad %s", "thing")
	if err.Error() != "cluster: corrupt value at /clusterrebootd/x/pause: bad thing" {
		t.Fatalf("message %q", err)
	}
	wantIs(t, fmt.Errorf("wrapped: %w", err), ErrCorrupt)
	if errors.Is(err, ErrConflict) {
		t.Fatal("CorruptError is ErrConflict")
	}
	if errors.Unwrap(err) == nil {
		t.Fatal("no cause")
	}
}

func rpctypesNoLeader() error         { return rpctypes.ErrNoLeader }
func rpctypesPermissionDenied() error { return rpctypes.ErrPermissionDenied }
func rpctypesInvalidToken() error     { return rpctypes.ErrInvalidAuthToken }
func rpctypesAuthFailed() error       { return rpctypes.ErrAuthFailed }
func rpctypesTooManyRequests() error  { return rpctypes.ErrTooManyRequests }
func sessionExpired() error           { return concurrency.ErrSessionExpired }
func grpcUnavailable() error          { return status.Error(codes.Unavailable, "connection refused") }
func grpcCanceled() error             { return status.Error(codes.Canceled, "context canceled") }

func TestZapBridge(t *testing.T) {
	var buf strings.Builder
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	zl := newZapLogger(log).With(zap.String("endpoint", "e1"))
	zl.Warn("retrying", zap.Int("attempt", 2))
	zl.Info("quiet")
	out := buf.String()
	for _, want := range []string{"level=DEBUG", "msg=retrying", "component=etcd-client", "zap_level=warn", "attempt=2", "endpoint=e1", "msg=quiet"} {
		if !strings.Contains(out, want) {
			t.Errorf("bridged log %q lacks %q", out, want)
		}
	}
	if err := zl.Sync(); err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	newZapLogger(slog.New(slog.NewTextHandler(&buf, nil))).Error("hidden") // info level: debug lines dropped
	if buf.Len() != 0 {
		t.Fatalf("client log at info level leaked: %q", buf.String())
	}
}
