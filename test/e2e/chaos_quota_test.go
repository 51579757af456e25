//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/test/etcdtest"
	"github.com/clusterrebootd/clusterrebootd/test/histcheck"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// The quota scenario's own single etcd member: a small backend quota that
// the test fills, so it must not share the suite's cluster.
const (
	quotaNS    = "cre2e-etcdq"
	quotaVeth  = "cre2e-eq"
	quotaBytes = 8 << 20
)

var quotaIP = subnet + ".19"

// chaosQuota is the matrix's combination efQuota + nfNone: etcd's space
// quota is exhausted (--quota-backend-bytes, filled with junk, the
// NOSPACE alarm raised) while every node needs a reboot. Writes fail, so
// nobody takes a slot or reboots, and the check runs log the etcd error.
// The operator's recovery — delete the junk, compact, defragment, disarm the
// alarm — lets the nodes reboot one at a time. The history checker reads the
// history in two parts around the compaction.
func chaosQuota(t *testing.T) (violations int) {
	s := needSuite(t)
	qc, err := startQuotaEtcd(t, etcdtest.Binary(t), filepath.Join(s.work, "etcd-quota"))
	if err != nil {
		t.Fatal(err)
	}
	s2 := *s
	s2.etcd = qc
	sc := newScenarioOn(t, &s2, "quota", 3, nil)
	defer func() { violations = sc.violations }()
	sc.boot()
	sc.waitRegistered()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	junk := strings.Repeat("x", 1<<20)
	filled := false
	for i := 0; i < 64 && !filled; i++ {
		wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := qc.cli.Put(wctx, fmt.Sprintf("/cre2e-fill/%03d", i), junk)
		wcancel()
		if err != nil {
			if !strings.Contains(err.Error(), "database space exceeded") {
				t.Fatalf("filling etcd: %v", err)
			}
			filled = true
			sc.tl.note("etcd", "backend quota (%d MiB) exhausted after %d MiB of junk: %v", quotaBytes>>20, i, err)
		}
	}
	if !filled {
		t.Fatalf("etcd accepted 64 MiB with a quota of %d MiB", quotaBytes>>20)
	}
	sc.needReboot(sc.nodes...)
	sc.hold(20*time.Second, "etcd out of space: no slot, no reboot", func() string {
		for _, n := range sc.nodes {
			if sc.reboots(n) > 0 {
				return n.Name + " rebooted while etcd refused every write"
			}
		}
		if s, err := sc.slots(); err == nil && len(s) > 0 {
			return fmt.Sprintf("slots %v while etcd refused every write", s)
		}
		return ""
	})
	clear := 0
	for _, n := range sc.nodes {
		es, err := n.journal("-u", checkUnit, "-u", holdUnit)
		if err != nil {
			t.Errorf("%s: journal: %v", n.Name, err)
			continue
		}
		for _, e := range es {
			if m := field(e, "MESSAGE"); strings.Contains(m, "out of space") || strings.Contains(m, "space exceeded") {
				clear++
				if clear == 1 {
					t.Logf("%s logged: %s", n.Name, m)
				}
			}
		}
	}
	if clear == 0 {
		t.Errorf("no check or holder run named the etcd error (out of space) in its journal")
	}

	// The operator's recovery.
	if _, err := qc.cli.Delete(ctx, "/cre2e-fill/", clientv3.WithPrefix()); err != nil {
		t.Fatalf("delete the junk (allowed under NOSPACE): %v", err)
	}
	pre, fin, err := histcheck.Collect(ctx, qc.cli, sc.prefix, sc.startRev+1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := qc.cli.Compact(ctx, fin.Rev, clientv3.WithCompactPhysical()); err != nil {
		t.Fatalf("compact: %v", err)
	}
	if _, err := qc.cli.Defragment(ctx, qc.endpoints()[0]); err != nil {
		t.Fatalf("defragment: %v", err)
	}
	if _, err := qc.cli.AlarmDisarm(ctx, &clientv3.AlarmMember{}); err != nil {
		t.Fatalf("alarm disarm: %v", err)
	}
	sc.preCompaction, sc.compactRev = pre, fin.Rev
	sc.tl.note("etcd", "recovered: junk deleted, compacted at revision %d, defragmented, NOSPACE alarm disarmed", fin.Rev)
	sc.waitCompleted(4*time.Minute, sc.nodes...)
	for _, n := range sc.nodes {
		if r := sc.reboots(n); r != 1 {
			t.Errorf("%s: %d reboots, want 1", n.Name, r)
		}
	}
	sc.checkSafety()
	return sc.violations
}

// startQuotaEtcd starts one etcd member with a small backend quota in its
// own namespace on the bridge; it is stopped and its namespace removed when
// the test ends.
func startQuotaEtcd(t *testing.T, bin, dir string) (*etcdCluster, error) {
	teardown := func() {
		_ = ip("netns", "del", quotaNS)
		_ = ip("link", "del", quotaVeth)
	}
	teardown() // what a killed run left
	for _, s := range [][]string{
		{"netns", "add", quotaNS},
		{"link", "add", quotaVeth, "type", "veth", "peer", "name", "eth0", "netns", quotaNS},
		{"link", "set", quotaVeth, "master", bridgeName, "up"},
		{"-n", quotaNS, "addr", "add", quotaIP + "/24", "dev", "eth0"},
		{"-n", quotaNS, "link", "set", "eth0", "up"},
		{"-n", quotaNS, "link", "set", "lo", "up"},
	} {
		if err := ip(s...); err != nil {
			teardown()
			return nil, err
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		teardown()
		return nil, err
	}
	logf, err := os.Create(dir + ".log")
	if err != nil {
		teardown()
		return nil, err
	}
	m := &etcdMember{name: "q", ns: quotaNS, ip: quotaIP, done: make(chan struct{})}
	m.cmd = exec.Command("ip", "netns", "exec", quotaNS, bin, "--name", "q", "--data-dir", dir,
		"--listen-client-urls", "http://"+quotaIP+":2379", "--advertise-client-urls", "http://"+quotaIP+":2379",
		"--listen-peer-urls", "http://"+quotaIP+":2380", "--initial-advertise-peer-urls", "http://"+quotaIP+":2380",
		"--initial-cluster", "q=http://"+quotaIP+":2380", "--quota-backend-bytes", strconv.Itoa(quotaBytes), "--log-level", "warn")
	m.cmd.Stdout, m.cmd.Stderr = logf, logf
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := m.cmd.Start(); err != nil {
		logf.Close()
		teardown()
		return nil, err
	}
	writePidFile("etcd-q", m.cmd.Process.Pid)
	go func() {
		_ = m.cmd.Wait()
		logf.Close()
		close(m.done)
	}()
	c := &etcdCluster{members: []*etcdMember{m}}
	t.Cleanup(func() {
		c.stop()
		teardown()
	})
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.endpoints(), DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return c, err
	}
	c.cli = cli
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := cli.Put(ctx, "/cre2e/ready", time.Now().String())
		cancel()
		if err == nil {
			return c, nil
		}
		if time.Now().After(deadline) {
			return c, fmt.Errorf("quota etcd not writable after 30s: %w (log %s.log)", err, dir)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
