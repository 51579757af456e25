package healthgate

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/lib/gate"
	"github.com/clusterrebootd/clusterrebootd/test/etcdtest"
)

const (
	preLock   = gate.PhasePreLock
	underLock = gate.PhaseUnderLock
	postBoot  = gate.PhasePostBoot
)

// TestEtcdQuorum runs the etcd check against a real three-member cluster
// whose members are named like the nodes that host them.
func TestEtcdQuorum(t *testing.T) {
	c := etcdtest.StartCluster(t, []string{"node-1", "node-2", "node-3"}, etcdtest.Options{})
	r := newRig(t)
	// Only the first member as endpoint: the script must find the others.
	r.node.EtcdEndpoints = c.Endpoints()[:1]

	steps := []quorumStep{
		{"all healthy", "node-1", nil, preLock, exitOK,
			[]string{"ok: pre-lock on node-1: etcd: quorum holds: 3 of 3 voting members healthy, 2 left with node-1 (on node-1) down, need 2"}},
		{"all healthy under the lock", "node-2", nil, underLock, exitOK,
			[]string{"2 left with node-2 (on node-2) down"}},
		{"all healthy after boot", "node-1", nil, postBoot, exitOK,
			[]string{"etcd: quorum: 3 of 3 voting members healthy, including node-1 on node-1"}},
		{"no member on this node", "worker-7", []string{"GATE_ETCD_LOCAL_MEMBER=none"}, preLock, exitOK,
			[]string{"3 left (no member on worker-7)"}},
	}
	stopped := []quorumStep{
		{"node-3 down, node-1 would break quorum", "node-1", nil, preLock, exitFailed,
			[]string{"refused: etcd: quorum would break: 2 of 3 voting members healthy, 1 left with node-1 (on node-1) down, need 2"}},
		{"same under the lock", "node-1", nil, underLock, exitFailed,
			[]string{"quorum would break"}},
		{"node-3 itself may go: its member is already down", "node-3", nil, preLock, exitOK,
			[]string{"quorum holds: 2 of 3 voting members healthy, 2 left (node-3 on node-3 down already)"}},
		{"a node without a member may go", "worker-7", []string{"GATE_ETCD_LOCAL_MEMBER=none"}, preLock, exitOK,
			[]string{"2 left (no member on worker-7)"}},
		{"explicit local member", "worker-7", []string{"GATE_ETCD_LOCAL_MEMBER=node-2"}, preLock, exitFailed,
			[]string{"1 left with node-2 (on worker-7) down"}},
		{"explicit unknown member is a config error", "node-1", []string{"GATE_ETCD_LOCAL_MEMBER=node-9"}, preLock, exitConfig,
			[]string{"GATE_ETCD_LOCAL_MEMBER names 'node-9'"}},
		{"post-boot: quorum and own member fine", "node-1", nil, postBoot, exitOK,
			[]string{"quorum: 2 of 3"}},
		{"post-boot: own member not back", "node-3", nil, postBoot, exitFailed,
			[]string{"refused: etcd: member node-3 on node-3 is not healthy yet (2 of 3 healthy)"}},
	}
	run := func(t *testing.T, node string, env []string, phase gate.Phase, code int, wants []string) {
		t.Helper()
		r := r.on(t)
		r.node.Node = node
		r.setEnv(env...)
		res := r.expect(phase, code, wants...)
		if !strings.Contains(res.out, "node-3 (") || !strings.Contains(res.out, "--- etcd: exit") {
			if code != exitConfig {
				t.Fatalf("details lack the member table: %s", res)
			}
		}
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) { run(t, s.node, s.env, s.phase, s.code, s.wants) })
	}

	// Another node holds a reboot slot (REBOOTING_NODES): its member is
	// about to go down or not back yet, so it counts as down too.
	t.Run("another node rebooting", func(t *testing.T) {
		r := r.on(t) // a copy: RebootingNodes stays unset for the steps below
		r.node.Node = "node-1"
		r.node.RebootingNodes = []string{"node-2"}
		r.setEnv()
		res := r.expect(preLock, exitFailed,
			"refused: etcd: quorum would break: 3 of 3 voting members healthy, 1 left with node-1 (on node-1), node-2 (rebooting) down, need 2")
		if !strings.Contains(res.out, "[on a rebooting node]") {
			t.Fatalf("details do not mark node-2: %s", res)
		}
		// A rebooting node without a member changes nothing.
		r.node.RebootingNodes = []string{"worker-7", "node-1"}
		r.expect(underLock, exitOK, "2 left with node-1 (on node-1) down")
		// After boot only this node's own member matters.
		r.node.RebootingNodes = []string{"node-2", "node-1"}
		r.expect(postBoot, exitOK, "etcd: quorum: 3 of 3")
	})

	c.Member(t, "node-3").Stop()
	for _, s := range stopped {
		t.Run(s.name, func(t *testing.T) { run(t, s.node, s.env, s.phase, s.code, s.wants) })
	}
	res := r.run(preLock)
	if !strings.Contains(res.out, "node-3 (") || !strings.Contains(res.out, "UNHEALTHY") {
		t.Fatalf("details do not show node-3 unhealthy: %s", res)
	}

	// Two of three down: no quorum at all, in every phase, for every node.
	c.Member(t, "node-2").Stop()
	r.setEnv("GATE_ETCD_LOCAL_MEMBER=none")
	r.node.Node = "worker-7"
	for _, ph := range []gate.Phase{preLock, underLock, postBoot} {
		r.expect(ph, exitFailed, "refused: etcd: ")
	}
	// Only a dead endpoint given: the member list cannot be had.
	r.node.EtcdEndpoints = []string{c.Member(t, "node-2").ClientURL()}
	r.expect(preLock, exitFailed, "refused: etcd: cannot list members via "+c.Member(t, "node-2").ClientURL())

	c.StartMembers(t, "node-2", "node-3")
	r.node.EtcdEndpoints = c.Endpoints()
	r.node.Node = "node-1"
	r.setEnv()
	r.expect(preLock, exitOK, "3 of 3 voting members healthy")
}

// TestEtcdLocalMemberByAddress: when no member carries this node's name,
// members whose every URL is a loopback address count as local (they
// cannot run anywhere else), which is the fail-closed reading of a cluster
// that lives on 127.0.0.1.
func TestEtcdLocalMemberByAddress(t *testing.T) {
	host, _ := os.Hostname()
	for _, n := range []string{"m1", "m2", "m3"} {
		if strings.EqualFold(host, n) || strings.HasPrefix(host, n+".") {
			t.Skipf("host name %q is a member name of this test", host)
		}
	}
	c := etcdtest.StartCluster(t, []string{"m1", "m2", "m3"}, etcdtest.Options{})
	r := newRig(t)
	r.node.Node = "elsewhere"
	r.node.EtcdEndpoints = c.Endpoints()
	// Members are listed in etcd's order (by ID), so the names are checked one by one.
	res := r.expect(preLock, exitFailed, "quorum would break: 3 of 3 voting members healthy, 0 left with ", " (on elsewhere) down",
		"m1", "m2", "m3", "3 members look local")
	if strings.Count(res.out, "[on elsewhere]") != 3 {
		t.Fatalf("want three members marked local: %s", res)
	}
	r.setEnv("GATE_ETCD_LOCAL_MEMBER=m2")
	r.expect(preLock, exitOK, "2 left with m2 (on elsewhere) down")
}

// TestSecondClusterTLS: the optional second cluster (say, Kubernetes' etcd)
// over TLS with client certificates, checked next to the tool's own etcd.
func TestSecondClusterTLS(t *testing.T) {
	own := etcdtest.Start(t)
	dir := t.TempDir()
	ca, sc, sk, cc, ck := writeCerts(t, dir)
	k8s := etcdtest.StartWith(t, etcdtest.Options{CertFile: sc, KeyFile: sk, TrustedCAFile: ca, ClientCertAuth: true})

	r := newRig(t)
	r.node.EtcdEndpoints = own.Endpoints()
	base := []string{
		"GATE_ETCD_LOCAL_MEMBER=none",
		"GATE_ETCD2_NAME=k8s-etcd",
		"GATE_ETCD2_ENDPOINTS=" + shellQuote(joinURLs(k8s.Endpoints())),
		"GATE_ETCD2_CACERT=" + shellQuote(ca),
		"GATE_ETCD2_LOCAL_MEMBER=none",
	}
	withCert := append(append([]string(nil), base...), "GATE_ETCD2_CERT="+shellQuote(cc), "GATE_ETCD2_KEY="+shellQuote(ck))

	r.setEnv(withCert...)
	res := r.expect(preLock, exitOK, "etcd: quorum holds: 1 of 1", "k8s-etcd: quorum holds: 1 of 1")
	if !strings.Contains(res.out, "--- etcd2: exit 0") {
		t.Fatalf("no etcd2 details: %s", res)
	}

	// No client certificate: the TLS handshake fails, so does the gate.
	r.setEnv(base...)
	r.expect(preLock, exitFailed, "refused: k8s-etcd: cannot list members via https://")
	// Half a key pair is a configuration error.
	r.setEnv(append(append([]string(nil), base...), "GATE_ETCD2_CERT="+shellQuote(cc))...)
	r.expect(preLock, exitConfig, "GATE_ETCD2_CERT and GATE_ETCD2_KEY go together")

	// The second cluster down: refused although the own cluster is fine.
	r.setEnv(withCert...)
	k8s.Stop()
	res = r.expect(preLock, exitFailed, "refused: k8s-etcd: ")
	if !strings.Contains(res.out, "--- etcd: exit 0") {
		t.Fatalf("the own cluster should still pass: %s", res)
	}
	// Both down: the first failing check leads, the count of the others follows.
	own.Stop()
	r.expect(preLock, exitFailed, "refused: etcd: ", "(+1 more failed)")

	own.Restart(t)
	k8s.Restart(t)
	r.expect(postBoot, exitOK, "k8s-etcd: quorum: 1 of 1")

	// The second cluster only in the phases it is configured for.
	r.setEnv(append(withCert, "GATE_ETCD2_PHASES=post-boot")...)
	k8s.Stop()
	r.expect(preLock, exitOK)
	r.expect(postBoot, exitFailed, "k8s-etcd")
}

// TestEtcdAuth: username and password file, the password handed to etcdctl
// through its environment and never through its argv.
func TestEtcdAuth(t *testing.T) {
	srv := etcdtest.Start(t)
	enableAuth(t, srv)
	dir := t.TempDir()
	pw := filepath.Join(dir, "etcd-password")
	writeFile(t, pw, "s3cr3t-root\r\n", 0o600)
	wrong := filepath.Join(dir, "wrong-password")
	writeFile(t, wrong, "not-it\n", 0o600)

	// A wrapper that logs the argv and whether a password is in the
	// environment, then runs the real etcdctl.
	log := filepath.Join(dir, "etcdctl.log")
	wrapper := filepath.Join(dir, "etcdctl-wrapper")
	writeFile(t, wrapper, "#!/bin/sh\nprintf 'argv: %s\\n' \"$*\" >> "+shellQuote(log)+"\n"+
		"[ -n \"${ETCDCTL_PASSWORD:-}\" ] && echo 'env: password set' >> "+shellQuote(log)+"\n"+
		"exec "+shellQuote(etcdctl(t))+" \"$@\"\n", 0o755)

	r := newRig(t)
	r.node.EtcdEndpoints = srv.Endpoints()
	r.setEnv("GATE_ETCDCTL="+shellQuote(wrapper), "GATE_ETCD_LOCAL_MEMBER=none",
		"GATE_ETCD_USER=root", "GATE_ETCD_PASSWORD_FILE="+shellQuote(pw))
	// Variables an operator's shell may export must not steer etcdctl.
	res := r.run(preLock, "ETCDCTL_ENDPOINTS=http://127.0.0.1:1", "ETCDCTL_USER=nobody:nothing")
	r.check(res, exitOK, "etcd: quorum holds: 1 of 1")
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "s3cr3t") {
		t.Fatalf("the password appeared on etcdctl's command line:\n%s", data)
	}
	if strings.Count(string(data), "env: password set") < 2 || !strings.Contains(string(data), "member list") {
		t.Fatalf("etcdctl was not given the password through its environment:\n%s", data)
	}

	r.setEnv("GATE_ETCDCTL="+shellQuote(wrapper), "GATE_ETCD_LOCAL_MEMBER=none",
		"GATE_ETCD_USER=root", "GATE_ETCD_PASSWORD_FILE="+shellQuote(wrong))
	res = r.expect(preLock, exitFailed, "refused: etcd: cannot list members")
	if strings.Contains(res.out, "not-it") {
		t.Fatalf("output reveals the password: %s", res)
	}
	r.setEnv("GATE_ETCD_USER=root")
	r.expect(preLock, exitConfig, "GATE_ETCD_USER and GATE_ETCD_PASSWORD_FILE go together")
	r.setEnv("GATE_ETCD_USER=root", "GATE_ETCD_PASSWORD_FILE="+shellQuote(filepath.Join(dir, "missing")))
	r.expect(preLock, exitConfig, "is not readable")
}

func enableAuth(t *testing.T, srv *etcdtest.Server) {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: srv.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	steps := []func() error{
		func() error { _, err := cli.RoleAdd(ctx, "root"); return err },
		func() error { _, err := cli.UserAdd(ctx, "root", "s3cr3t-root"); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := cli.AuthEnable(ctx); return err },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("auth setup step %d: %v", i, err)
		}
	}
}

// quorumStep is one run of the gate against the 3-member cluster.
type quorumStep struct {
	name  string
	node  string
	env   []string
	phase gate.Phase
	code  int
	wants []string
}
