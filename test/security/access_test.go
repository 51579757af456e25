package security

import (
	"os"
	"strings"
	"testing"
)

// exitAccess is the exit code of a run that etcd refused (wrong password,
// no permission on the prefix): like an unreachable etcd, the node cannot
// coordinate, so it does nothing and the unit fails (DESIGN §6, code 6).
const exitAccess = exitEtcd

// TestTLSAndAuthWork runs the whole cycle (check → holder → fenced slot →
// reboot command → post-boot release) as an etcd user that has nothing but
// the role hack/etcd-rbac.sh creates, once identified by its client
// certificate's CN and once by a password.
func TestTLSAndAuthWork(t *testing.T) {
	t.Parallel()
	e := startSecureEtcd(t)
	const cl = "ok"
	e.rbac(cl, map[string]string{"node-1": "", "clusterrebootd-ok": "shared-pw"})
	for _, tc := range []struct {
		name string
		conf func(n *node) nodeConf
	}{
		{"certificate CN is the user", func(n *node) nodeConf {
			return nodeConf{CAFile: e.ca.file, Cert: e.ca.client("node-1")}
		}},
		{"shared user with password", func(n *node) nodeConf {
			n.write("etcd-password", "shared-pw\n", 0o600)
			return nodeConf{CAFile: e.ca.file, Cert: e.ca.client("anything"), Username: "clusterrebootd-ok", PasswordFile: n.path("etcd-password")}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t, cl, "node-1", nodeConf{})
			n.conf = tc.conf(n)
			n.conf.Endpoints = e.srv.Endpoints()
			n.writeConfig()
			for _, args := range [][]string{{"validate-config"}, {"simulate"}} {
				if r := n.run(args...); r.code != exitOK {
					t.Fatalf("%s", r)
				}
			}
			if r := n.run("check", "--once"); r.code != exitOK || !n.rebooted() {
				t.Fatalf("rebooted=%v\n%s", n.rebooted(), r)
			}
			slot := "/clusterrebootd/" + cl + "/slots/node-1"
			if _, ok := e.dumpPrefix(slot)[slot]; !ok {
				t.Fatalf("no slot %s after the reboot request", slot)
			}
			if r := n.run("status"); r.code != exitOK || !strings.Contains(r.stdout, "node-1") {
				t.Fatalf("%s", r)
			}
			if r := n.run("status", "--json"); r.code != exitOK || !strings.Contains(r.stdout, `"node-1"`) {
				t.Fatalf("%s", r)
			}
			// The node comes back: new boot id, update installed.
			n.write("boot_id", randHex(16)+"\n", 0o644)
			if err := os.Remove(n.path("reboot-required")); err != nil {
				t.Fatal(err)
			}
			if r := n.run("check", "--once"); r.code != exitOK {
				t.Fatalf("post-boot: %s", r)
			}
			if v, ok := e.dumpPrefix(slot)[slot]; ok {
				t.Fatalf("slot still held after the post-boot check: %s", v)
			}
		})
	}
}

// TestAccessFailures: every way the node's credentials can be wrong ends the
// run with the exit code of DESIGN §6, an error that names the cause, and no
// reboot and no slot.
func TestAccessFailures(t *testing.T) {
	t.Parallel()
	e := startSecureEtcd(t)
	const cl = "deny"
	e.rbac(cl, map[string]string{"node-1": "", "shared": "right-pw"})
	e.rbac("elsewhere", map[string]string{"other-cluster-node": "", "other-pw-user": "other-pw"})
	e.addUser("norole", "")
	other := newCA(t, e.dir, "rogue")
	pw := func(n *node, s string) string {
		n.write("etcd-password", s+"\n", 0o600)
		return n.path("etcd-password")
	}
	tests := []struct {
		name string
		conf func(n *node) nodeConf
		code int
		want []string // substrings of stderr
	}{
		{"wrong CA for the server", func(n *node) nodeConf {
			return nodeConf{CAFile: other.file, Cert: e.ca.client("node-1")}
		}, exitEtcd, []string{"etcd unavailable", "x509: certificate signed by unknown authority", "etcd.tls.ca_file"}},
		{"expired client certificate", func(n *node) nodeConf {
			return nodeConf{CAFile: e.ca.file, Cert: e.ca.expiredClient("node-1")}
		}, exitEtcd, []string{"etcd unavailable", "expired certificate", "etcd.tls.cert_file", `client certificate (CN "node-1") expired at`}},
		{"client certificate from another CA", func(n *node) nodeConf {
			return nodeConf{CAFile: e.ca.file, Cert: other.client("node-1")}
		}, exitEtcd, []string{"etcd unavailable", "certificate required", "etcd.tls.cert_file is not signed by any CA the etcd server trusts"}},
		{"no client certificate", func(n *node) nodeConf {
			return nodeConf{CAFile: e.ca.file}
		}, exitEtcd, []string{"etcd unavailable", "certificate required", "set etcd.tls.cert_file and etcd.tls.key_file"}},
		{"certificate user of another cluster", func(n *node) nodeConf {
			return nodeConf{CAFile: e.ca.file, Cert: e.ca.client("other-cluster-node")}
		}, exitAccess, []string{"etcd access denied", "permission denied", `"other-cluster-node" (the client certificate's CN)`, "/clusterrebootd/deny/", "clusterrebootd-deny"}},
		{"certificate user without a role", func(n *node) nodeConf {
			return nodeConf{CAFile: e.ca.file, Cert: e.ca.client("norole")}
		}, exitAccess, []string{"permission denied", `"norole"`}},
		{"certificate CN that is no etcd user", func(n *node) nodeConf {
			return nodeConf{CAFile: e.ca.file, Cert: e.ca.client("ghost")}
		}, exitAccess, []string{"permission denied", `"ghost"`, "or no such user exists"}},
		{"password user of another cluster", func(n *node) nodeConf {
			return nodeConf{CAFile: e.ca.file, Cert: e.ca.client("node-1"), Username: "other-pw-user", PasswordFile: pw(n, "other-pw")}
		}, exitAccess, []string{"permission denied", `etcd user "other-pw-user"`, "/clusterrebootd/deny/"}},
		{"wrong password", func(n *node) nodeConf {
			return nodeConf{CAFile: e.ca.file, Cert: e.ca.client("node-1"), Username: "shared", PasswordFile: pw(n, "wrong-pw")}
		}, exitAccess, []string{"etcd access denied", "invalid user ID or password", "etcd.password_file"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			n := newNode(t, cl, "node-1", nodeConf{})
			n.conf = tc.conf(n)
			n.conf.Endpoints = e.srv.Endpoints()
			n.writeConfig()
			for _, args := range [][]string{{"check", "--once"}, {"hold"}, {"status"}, {"simulate"}} {
				r := n.run(args...)
				if r.code != tc.code {
					t.Errorf("exit %d, want %d\n%s", r.code, tc.code, r)
				}
				for _, w := range tc.want {
					if !strings.Contains(r.stderr, w) {
						t.Errorf("stderr lacks %q\n%s", w, r)
					}
				}
			}
			if n.rebooted() {
				t.Fatal("the node rebooted")
			}
			if kv := e.dumpPrefix("/clusterrebootd/" + cl + "/"); len(kv) != 0 {
				t.Fatalf("a refused node wrote to etcd: %v", kv)
			}
		})
	}
}
