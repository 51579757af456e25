package security

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/authpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/test/etcdtest"
)

// envEtcdctl points at an etcdctl for the script's etcdctl backend; without
// it (and without etcdctl in PATH) that backend's test is skipped.
const envEtcdctl = "CLUSTERREBOOTD_ETCDCTL_BIN"

func rbacScript(t *testing.T) string {
	t.Helper()
	root, err := etcdtest.RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "hack", "etcd-rbac.sh")
}

// runScript runs hack/etcd-rbac.sh with PATH extended by pathDir.
func runScript(t *testing.T, pathDir string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, rbacScript(t), args...)
	cmd.Env = append(os.Environ(), "PATH="+pathDir+":"+os.Getenv("PATH"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// plainTLSEtcd is a member with client-cert auth and auth still disabled, as
// an operator finds a fresh cluster; admin is a certificate client (CN root).
func plainTLSEtcd(t *testing.T) (*secureEtcd, *clientv3.Client) {
	t.Helper()
	dir := t.TempDir()
	e := &secureEtcd{t: t, dir: dir, ca: newCA(t, dir, "etcd")}
	srvPair := e.ca.server("etcd-server")
	e.root = e.ca.client("root")
	e.srv = etcdtest.StartWith(t, etcdtest.Options{CertFile: srvPair.cert, KeyFile: srvPair.key,
		TrustedCAFile: e.ca.file, ClientCertAuth: true})
	e.admin = e.client(e.root, "", "")
	t.Cleanup(func() { e.admin.Close() })
	return e, e.admin
}

// wantLayout checks what the script must have created: auth on, the role
// with exactly one permission (readwrite on the cluster prefix), the users
// holding it.
func wantLayout(t *testing.T, admin *clientv3.Client, cluster string, users ...string) {
	t.Helper()
	ctx, cancel := ctx10s()
	defer cancel()
	st, err := admin.AuthStatus(ctx)
	if err != nil || !st.Enabled {
		t.Fatalf("auth status: %+v, %v; want enabled", st, err)
	}
	role := "clusterrebootd-" + cluster
	r, err := admin.RoleGet(ctx, role)
	if err != nil {
		t.Fatalf("role %s: %v", role, err)
	}
	prefix := "/clusterrebootd/" + cluster + "/"
	if len(r.Perm) != 1 || string(r.Perm[0].Key) != prefix || string(r.Perm[0].RangeEnd) != clientv3.GetPrefixRangeEnd(prefix) ||
		r.Perm[0].PermType != authpb.READWRITE {
		t.Fatalf("role %s permissions %v, want only readwrite on the prefix %s", role, r.Perm, prefix)
	}
	for _, u := range users {
		ur, err := admin.UserGet(ctx, u)
		if err != nil {
			t.Fatalf("user %s: %v", u, err)
		}
		if len(ur.Roles) != 1 || ur.Roles[0] != role {
			t.Fatalf("user %s roles %v, want [%s]", u, ur.Roles, role)
		}
	}
}

func TestRBACScriptGateway(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl not installed")
	}
	if _, err := exec.LookPath("jq"); err != nil {
		t.Skip("jq not installed")
	}
	e, admin := plainTLSEtcd(t)
	dir := t.TempDir()
	adminPW := filepath.Join(dir, "root.pw")
	userPW := filepath.Join(dir, "node.pw")
	writeSecret(t, adminPW, rootPW+"\n")
	writeSecret(t, userPW, "gateway-user-pw\n")
	// With auth enabled etcd's gateway refuses client certificates that
	// carry a CN (it would not map it to a user): curl's has none.
	any := e.ca.client("")
	args := []string{"--backend", "gateway", "--endpoints", e.srv.ClientURL(), "--cacert", e.ca.file,
		"--cert", any.cert, "--key", any.key, "--admin-password-file", adminPW, "--password-file", userPW, "gw"}
	for run := 1; run <= 2; run++ { // the second run must find everything in place
		out, err := runScript(t, t.TempDir(), args...)
		if err != nil {
			t.Fatalf("run %d: %v\n%s", run, err, out)
		}
		if strings.Contains(out, "gateway-user-pw") || strings.Contains(out, rootPW) {
			t.Fatalf("run %d printed a password:\n%s", run, out)
		}
		if run == 2 && !strings.Contains(out, "role clusterrebootd-gw exists") {
			t.Fatalf("second run did not find the role:\n%s", out)
		}
		wantLayout(t, admin, "gw", "clusterrebootd-gw")
	}
	// The shared user works end to end, and only on its prefix.
	n := newNode(t, "gw", "node-1", nodeConf{Endpoints: e.srv.Endpoints(), CAFile: e.ca.file, Cert: e.ca.client("node-1"),
		Username: "clusterrebootd-gw", PasswordFile: userPW})
	if r := n.run("check", "--once"); r.code != exitOK || !n.rebooted() {
		t.Fatalf("%s", r)
	}
	n2 := newNode(t, "other", "node-2", n.conf)
	if r := n2.run("check", "--once"); r.code != exitAccess || !strings.Contains(r.stderr, "permission denied") || n2.rebooted() {
		t.Fatalf("a user of cluster gw on cluster other: %s", r)
	}
}

func TestRBACScriptEtcdctl(t *testing.T) {
	t.Parallel()
	ctl := os.Getenv(envEtcdctl)
	if ctl == "" {
		var err error
		if ctl, err = exec.LookPath("etcdctl"); err != nil {
			t.Skipf("no etcdctl (set %s)", envEtcdctl)
		}
	}
	bin := t.TempDir()
	if err := os.Symlink(ctl, filepath.Join(bin, "etcdctl")); err != nil {
		t.Fatal(err)
	}
	e, admin := plainTLSEtcd(t)
	dir := t.TempDir()
	adminPW := filepath.Join(dir, "root.pw")
	writeSecret(t, adminPW, rootPW+"\n")
	// The admin by password (root is created with it); the nodes are
	// certificate-only users named after their certificates' CN.
	any := e.ca.client("whoever")
	args := []string{"--backend", "etcdctl", "--endpoints", e.srv.ClientURL(), "--cacert", e.ca.file,
		"--cert", any.cert, "--key", any.key, "--admin-password-file", adminPW,
		"--user", "node-1.example", "--user", "node-2.example", "ctl"}
	for run := 1; run <= 2; run++ {
		out, err := runScript(t, bin, args...)
		if err != nil || strings.Contains(out, rootPW) {
			t.Fatalf("run %d: %v\n%s", run, err, out)
		}
		if run == 2 && !strings.Contains(out, "authentication already enabled") {
			t.Fatalf("second run:\n%s", out)
		}
		wantLayout(t, admin, "ctl", "node-1.example", "node-2.example")
	}
	// A node added later with a password user; the admin is root by its
	// client certificate (CN root) this time.
	userPW := filepath.Join(dir, "node3.pw")
	writeSecret(t, userPW, "node3-pw\n")
	out, err := runScript(t, bin, "--backend", "etcdctl", "--endpoints", e.srv.ClientURL(), "--cacert", e.ca.file,
		"--cert", e.root.cert, "--key", e.root.key, "--user", "node-3", "--password-file", userPW, "ctl")
	if err != nil || strings.Contains(out, "node3-pw") {
		t.Fatalf("%v\n%s", err, out)
	}
	wantLayout(t, admin, "ctl", "node-1.example", "node-2.example", "node-3")

	for _, n := range []*node{
		newNode(t, "ctl", "node-1", nodeConf{Endpoints: e.srv.Endpoints(), CAFile: e.ca.file, Cert: e.ca.client("node-1.example")}),
		newNode(t, "ctl", "node-3", nodeConf{Endpoints: e.srv.Endpoints(), CAFile: e.ca.file, Cert: e.ca.client("x"), Username: "node-3", PasswordFile: userPW}),
	} {
		if r := n.run("simulate"); r.code == exitAccess || r.code == exitEtcd {
			t.Fatalf("%s", r)
		}
		if r := n.run("status"); r.code != exitOK {
			t.Fatalf("%s", r)
		}
	}
}

func TestRBACScriptDryRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	writeSecret(t, pw, "dry-run-secret\n")
	for _, backend := range []string{"etcdctl", "gateway"} {
		// Nothing listens on port 1: a dry run must not need etcd.
		out, err := runScript(t, t.TempDir(), "--dry-run", "--backend", backend, "--endpoints", "https://127.0.0.1:1",
			"--password-file", pw, "--admin-password-file", pw, "--user", "a", "--user", "b", "prod")
		if err != nil {
			t.Fatalf("%s: %v\n%s", backend, err, out)
		}
		for _, want := range []string{"clusterrebootd-prod", "/clusterrebootd/prod/", " a", " b", "enable"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: dry run lacks %q:\n%s", backend, want, out)
			}
		}
		if strings.Contains(out, "dry-run-secret") {
			t.Errorf("%s: dry run printed the password:\n%s", backend, out)
		}
	}
	for _, bad := range [][]string{{"--dry-run", "a/b"}, {"--dry-run"}, {"--dry-run", "--user", "x y", "c"}, {"--bogus", "c"}} {
		if out, err := runScript(t, t.TempDir(), bad...); err == nil {
			t.Errorf("%v accepted:\n%s", bad, out)
		}
	}
}

func writeSecret(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
