package security

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/test/etcdtest"
)

// Exit codes of DESIGN §6.
const (
	exitOK     = 0
	exitConfig = 2
	exitEtcd   = 6
)

const (
	procTimeout = 90 * time.Second // any single clusterrebootd run
	rootPW      = "root-admin-pw"  // etcd root's password (the fixture's admin)
)

// secureEtcd is an etcd member that requires client certificates signed by
// ca and has authentication enabled. admin is a root client (certificate
// with CN "root").
type secureEtcd struct {
	t     *testing.T
	dir   string
	ca    *ca
	srv   *etcdtest.Server
	root  pair // client certificate CN=root
	admin *clientv3.Client
}

// startSecureEtcd starts the member and enables auth with a root user that
// has a password (for the gRPC gateway) and can also log in by certificate.
func startSecureEtcd(t *testing.T) *secureEtcd {
	t.Helper()
	dir := t.TempDir()
	e := &secureEtcd{t: t, dir: dir, ca: newCA(t, dir, "etcd")}
	srvPair := e.ca.server("etcd-server")
	e.root = e.ca.client("root")
	e.srv = etcdtest.StartWith(t, etcdtest.Options{CertFile: srvPair.cert, KeyFile: srvPair.key,
		TrustedCAFile: e.ca.file, ClientCertAuth: true})
	e.admin = e.client(e.root, "", "")
	t.Cleanup(func() { e.admin.Close() })
	ctx, cancel := ctx10s()
	defer cancel()
	if _, err := e.admin.UserAdd(ctx, "root", rootPW); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.UserGrantRole(ctx, "root", "root"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.AuthEnable(ctx); err != nil {
		t.Fatal(err)
	}
	return e
}

// client is an etcd client with the client certificate p and, when user is
// set, password authentication.
func (e *secureEtcd) client(p pair, user, pw string) *clientv3.Client {
	e.t.Helper()
	tlsCfg, err := tlsFor(e.ca.file, p)
	if err != nil {
		e.t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: e.srv.Endpoints(), DialTimeout: 5 * time.Second,
		TLS: tlsCfg, Username: user, Password: pw})
	if err != nil {
		e.t.Fatal(err)
	}
	return cli
}

// rbac creates what hack/etcd-rbac.sh creates for cluster: the role
// clusterrebootd-<cluster> with readwrite on /clusterrebootd/<cluster>/ and
// the given users holding it. A user with an empty password is a
// certificate-only user (etcd maps the client certificate's CN to it).
func (e *secureEtcd) rbac(cluster string, users map[string]string) {
	e.t.Helper()
	ctx, cancel := ctx10s()
	defer cancel()
	role := "clusterrebootd-" + cluster
	prefix := "/clusterrebootd/" + cluster + "/"
	if _, err := e.admin.RoleAdd(ctx, role); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.admin.RoleGrantPermission(ctx, role, prefix, clientv3.GetPrefixRangeEnd(prefix),
		clientv3.PermissionType(clientv3.PermReadWrite)); err != nil {
		e.t.Fatal(err)
	}
	for u, pw := range users {
		e.addUser(u, pw)
		if _, err := e.admin.UserGrantRole(ctx, u, role); err != nil {
			e.t.Fatal(err)
		}
	}
}

// addUser creates a user without any role.
func (e *secureEtcd) addUser(user, pw string) {
	e.t.Helper()
	ctx, cancel := ctx10s()
	defer cancel()
	var err error
	if pw == "" {
		_, err = e.admin.UserAddWithOptions(ctx, user, "", &clientv3.UserAddOptions{NoPassword: true})
	} else {
		_, err = e.admin.UserAdd(ctx, user, pw)
	}
	if err != nil {
		e.t.Fatal(err)
	}
}

// dumpPrefix returns every key and value under prefix (read as root).
func (e *secureEtcd) dumpPrefix(prefix string) map[string]string {
	e.t.Helper()
	ctx, cancel := ctx10s()
	defer cancel()
	resp, err := e.admin.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		e.t.Fatal(err)
	}
	m := map[string]string{}
	for _, kv := range resp.Kvs {
		m[string(kv.Key)] = string(kv.Value)
	}
	return m
}

func ctx10s() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 10*time.Second)
}

// node is one simulated machine talking to a secureEtcd.
type node struct {
	t       *testing.T
	name    string
	cluster string
	dir     string
	cfg     string
	conf    nodeConf
}

// nodeConf is what a test varies in a node's configuration.
type nodeConf struct {
	Endpoints    []string
	CAFile       string
	Cert         pair   // client certificate; zero: none
	Username     string // with PasswordFile
	PasswordFile string
	HealthScript string // "" → none
	DialTimeout  string // "" → 2s
}

var nodeSeq int

func newNode(t *testing.T, cluster, name string, c nodeConf) *node {
	t.Helper()
	n := &node{t: t, name: name, cluster: cluster, dir: t.TempDir(), conf: c}
	for _, sub := range []string{"run", "state"} {
		if err := os.MkdirAll(filepath.Join(n.dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	n.write("boot_id", randHex(16)+"\n", 0o644)
	n.write("reboot-required", "*** System restart required ***\n", 0o644)
	n.write("reboot", "#!/bin/sh\necho \"$1\" >> \"$2\"\necho reboot requested\n", 0o755)
	n.writeConfig()
	return n
}

func (n *node) path(name string) string { return filepath.Join(n.dir, name) }

func (n *node) write(name, content string, mode os.FileMode) {
	n.t.Helper()
	if err := os.WriteFile(n.path(name), []byte(content), mode); err != nil {
		n.t.Fatal(err)
	}
	if err := os.Chmod(n.path(name), mode); err != nil {
		n.t.Fatal(err)
	}
}

func (n *node) writeConfig() {
	c := n.conf
	dial := c.DialTimeout
	if dial == "" {
		dial = "2s"
	}
	var etcd strings.Builder
	fmt.Fprintf(&etcd, "endpoints = %s\ndial_timeout = %q\nrequest_timeout = \"2s\"\n", tomlList(c.Endpoints), dial)
	if c.Username != "" || c.PasswordFile != "" {
		fmt.Fprintf(&etcd, "username = %q\npassword_file = %q\n", c.Username, c.PasswordFile)
	}
	etcd.WriteString("[etcd.tls]\n")
	if c.CAFile != "" {
		fmt.Fprintf(&etcd, "ca_file = %q\n", c.CAFile)
	}
	if c.Cert.cert != "" {
		fmt.Fprintf(&etcd, "cert_file = %q\nkey_file = %q\n", c.Cert.cert, c.Cert.key)
	}
	cfg := fmt.Sprintf(`# security test node %[1]s
node_name = %[1]q
cluster = %[2]q
alive_ttl = "1m"
history_ttl = "1h"

[[detector]]
type = "file"
path = %[3]q

[health]
script = %[4]q
timeout = "5s"
healthy_states = []

[etcd]
%[5]s
[lock]
ttl = "10s"
max_hold_wait = "20s"
backoff_min = "100ms"
backoff_max = "500ms"

[windows]
timezone = "UTC"
expected_reboot_duration = "0s"

[reboot]
method = "command"
command = [%[6]q, %[1]q, %[7]q]

[systemd]
holder = "foreground"

[metrics]
textfile = ""

[paths]
kill_switch = %[8]q
state_dir = %[9]q
run_dir = %[10]q
boot_id = %[11]q
`, n.name, n.cluster, n.path("reboot-required"), c.HealthScript, etcd.String(), n.path("reboot"), n.path("reboots.log"),
		n.path("disable"), n.path("state"), n.path("run"), n.path("boot_id"))
	n.write("config.toml", cfg, 0o644)
	n.cfg = n.path("config.toml")
}

// rebooted reports whether the node's reboot command ran.
func (n *node) rebooted() bool {
	_, err := os.Stat(n.path("reboots.log"))
	return err == nil
}

// result is one finished clusterrebootd run.
type result struct {
	args           []string
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("clusterrebootd %s: exit %d\n--- stdout ---\n%s--- stderr ---\n%s",
		strings.Join(r.args, " "), r.code, r.stdout, r.stderr)
}

// run runs `clusterrebootd --config <node> --log-format json args...` to its
// end (bounded by procTimeout).
func (n *node) run(args ...string) result {
	n.t.Helper()
	full := append([]string{"--config", n.cfg, "--log-format", "json"}, args...)
	ctx, cancel := context.WithTimeout(context.Background(), procTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, full...)
	cmd.Env = productEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	err := cmd.Run()
	if ctx.Err() != nil {
		n.t.Fatalf("clusterrebootd %v did not end within %s", args, procTimeout)
	}
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			n.t.Fatalf("run %v: %v", args, err)
		}
		code = ee.ExitCode()
	}
	return result{args: args, code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// productEnv is the test's environment without what would change the
// product's behaviour (journald, systemd notification).
func productEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "JOURNAL_STREAM", "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID":
			continue
		}
		env = append(env, kv)
	}
	return env
}

func tomlList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = strconv.Quote(x)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
