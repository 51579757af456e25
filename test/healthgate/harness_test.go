package healthgate

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/gate"
	"github.com/clusterrebootd/clusterrebootd/lib/proc"
	"github.com/clusterrebootd/clusterrebootd/test/etcdtest"
)

// Bounds of the harness. They bound waits; they are not assertions of speed.
const (
	runTimeout   = 90 * time.Second
	buildTimeout = 9 * time.Minute
)

// Exit codes of the script's contract (docs/health-gate.md).
const (
	exitOK      = 0
	exitFailed  = 1
	exitConfig  = 2
	exitMissing = 3
)

// etcdctl returns the path of a real etcdctl binary
// ($CLUSTERREBOOTD_ETCDCTL_BIN, else <repo>/bin/etcdctl, built when missing).
func etcdctl(t *testing.T) string {
	t.Helper()
	return etcdtest.Etcdctl(t)
}

// scriptSource is the script as shipped.
func scriptSource(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := etcdtest.RepoRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "packaging", "examples", "cluster-gate")
}

// rig is one installed copy of the script with its env file.
type rig struct {
	t      *testing.T
	script string         // executable copy, 0755
	dir    string         // 0700: holds the env file
	env    string         // env file path
	node   gate.ScriptEnv // what clusterrebootd would pass about the cluster
}

// newRig installs the script into a fresh directory (as an administrator
// would: mode 0755) with an env file holding lines.
func newRig(t *testing.T, lines ...string) *rig {
	t.Helper()
	src, err := os.ReadFile(scriptSource(t))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, script: filepath.Join(dir, "cluster-gate"), dir: dir, env: filepath.Join(dir, "cluster-gate.env")}
	if err := os.WriteFile(r.script, src, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(r.script, 0o755); err != nil {
		t.Fatal(err)
	}
	r.node = gate.ScriptEnv{Node: "node-1", Cluster: "test", ClusterSize: 3, HealthyNodes: 3}
	r.setEnv(lines...)
	return r
}

// setEnv replaces the env file; an etcdctl line is always added first so
// that every test uses the real etcdctl (a later line may override it).
func (r *rig) setEnv(lines ...string) {
	r.t.Helper()
	body := "GATE_ETCDCTL=" + shellQuote(etcdctl(r.t)) + "\n" + strings.Join(lines, "\n") + "\n"
	writeFile(r.t, r.env, body, 0o600)
}

// on returns a copy of r that reports to t (a subtest's), so that a failure
// ends the subtest and not its parent.
func (r *rig) on(t *testing.T) *rig {
	c := *r
	c.t = t
	return &c
}

type result struct {
	code  int
	first string
	out   string
}

func (r result) String() string { return fmt.Sprintf("exit %d, output:\n%s", r.code, r.out) }

// run runs the script in phase the way lib/gate runs a health script.
func (r *rig) run(phase gate.Phase, extraEnv ...string) result {
	r.t.Helper()
	env := append(r.node.Environ(phase), "CLUSTER_GATE_ENV="+r.env)
	env = append(env, extraEnv...)
	res, err := proc.Run(r.t.Context(), proc.Cmd{
		Argv:    []string{r.script, string(phase)},
		Env:     env,
		Timeout: runTimeout,
	})
	if err != nil {
		r.t.Fatalf("run %s: %v\n%s", phase, err, res.Output)
	}
	return result{code: res.ExitCode, first: res.FirstLine(), out: string(res.Output)}
}

// expect runs the script and checks the exit code and that the first line
// contains every one of wants.
func (r *rig) expect(phase gate.Phase, code int, wants ...string) result {
	r.t.Helper()
	res := r.run(phase)
	r.check(res, code, wants...)
	return res
}

func (r *rig) check(res result, code int, wants ...string) {
	r.t.Helper()
	if testing.Verbose() {
		r.t.Logf("%s", res)
	}
	if res.code != code {
		r.t.Fatalf("want exit %d, got %s", code, res)
	}
	for _, w := range wants {
		if !strings.Contains(res.first, w) {
			r.t.Fatalf("first line %q lacks %q; %s", res.first, w, res)
		}
	}
	switch {
	case code == exitOK && !strings.HasPrefix(res.first, "ok: "):
		r.t.Fatalf("exit 0 without an ok line: %s", res)
	case code != exitOK && !strings.HasPrefix(res.first, "refused: "):
		r.t.Fatalf("exit %d without a refused line: %s", code, res)
	}
}

func writeFile(t *testing.T, p, body string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(p, []byte(body), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// shellQuote quotes s for a sh assignment in the env file.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// joinURLs is ETCD_ENDPOINTS / GATE_*_ENDPOINTS syntax.
func joinURLs(urls []string) string { return strings.Join(urls, ",") }

// tcpUp listens on a loopback port and accepts (and drops) connections until
// the test ends; it returns "127.0.0.1:port".
func tcpUp(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
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
			c.Close()
		}
	}()
	return l.Addr().String()
}

// tcpDown returns "127.0.0.1:port" of a port nobody listens on.
func tcpDown(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// writeCerts creates a CA, a server certificate for 127.0.0.1 and a client
// certificate in dir (keys 0600).
func writeCerts(t *testing.T, dir string) (ca, srvCert, srvKey, cliCert, cliKey string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "healthgate test ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		writeFile(t, p, string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})), 0o600)
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
