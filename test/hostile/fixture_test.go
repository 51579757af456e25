package hostile

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// node is one simulated machine of its own cluster (its own etcd prefix):
// a file detector, an optional health script, a reboot command that only
// appends the node name to a log, the holder in the foreground and every
// host path below its directory.
type node struct {
	t         *testing.T
	name      string
	cluster   string
	prefix    string // "/clusterrebootd/<cluster>"
	dir       string
	cfg       string
	rebootLog string
	cli       *clientv3.Client
}

// nodeOpts are the knobs of newNode.
type nodeOpts struct {
	dir    string // the node's directory; "" makes one
	script string // absolute path of the health script; "" for none
	// needsReboot creates the reboot-required flag file.
	needsReboot bool
	extra       string // appended to the configuration (tables only)
}

const rebootScript = "#!/bin/sh\necho \"$1\" >> \"$2\"\n"

var clusterSeq atomic.Int64

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

func newNode(t *testing.T, endpoints []string, o nodeOpts) *node {
	t.Helper()
	short := unsafeName.ReplaceAllString(t.Name()[strings.LastIndex(t.Name(), "/")+1:], "-")
	if len(short) > 40 {
		short = short[:40]
	}
	cluster := strings.Trim(fmt.Sprintf("hx%03d-%s", clusterSeq.Add(1), short), "-.")
	n := &node{t: t, name: "n1", cluster: cluster, prefix: "/clusterrebootd/" + cluster, dir: o.dir}
	if n.dir == "" {
		n.dir = t.TempDir()
	}
	mkdir(t, n.path("run"))
	mkdir(t, n.path("state"))
	writeFile(t, n.path("boot_id"), "0123456789abcdef0123456789abcdef\n", 0o644)
	writeFile(t, n.path("reboot"), rebootScript, 0o755)
	n.rebootLog = n.path("reboots.log")
	if o.needsReboot {
		writeFile(t, n.path("reboot-required"), "", 0o644)
	}
	n.cfg = n.path("config.toml")
	writeFile(t, n.cfg, fmt.Sprintf(`node_name = %q
cluster = %q
alive_ttl = "1m"
history_ttl = "1h"

[[detector]]
type = "file"
path = %q

[health]
script = %q
timeout = "5s"
healthy_states = []

[etcd]
endpoints = [%s]
dial_timeout = "2s"
request_timeout = "2s"

[lock]
ttl = "10s"
max_hold_wait = "3s"
backoff_min = "100ms"
backoff_max = "500ms"

[windows]
timezone = "UTC"
expected_reboot_duration = "0s"

[reboot]
method = "command"
command = [%q, %q, %q]
timeout = "30s"

[systemd]
holder = "foreground"

[metrics]
textfile = ""

[paths]
kill_switch = %q
state_dir = %q
run_dir = %q
boot_id = %q
%s`, n.name, cluster, n.path("reboot-required"), o.script, quoteList(endpoints),
		n.path("reboot"), n.name, n.rebootLog,
		n.path("disable"), n.path("state"), n.path("run"), n.path("boot_id"), o.extra), 0o644)
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	n.cli = cli
	return n
}

func quoteList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = fmt.Sprintf("%q", x)
	}
	return strings.Join(q, ", ")
}

func (n *node) path(name string) string { return filepath.Join(n.dir, name) }

// run runs the binary with the node's configuration.
func (n *node) run(args ...string) result {
	n.t.Helper()
	return run(n.t, append([]string{"--config", n.cfg, "--log-format", "text"}, args...)...)
}

// reboots is how often the reboot command ran.
func (n *node) reboots() int {
	b, err := os.ReadFile(n.rebootLog)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		n.t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

func (n *node) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 10*time.Second)
}

// put writes value at the full key.
func (n *node) put(key, value string, opts ...clientv3.OpOption) {
	n.t.Helper()
	ctx, cancel := n.ctx()
	defer cancel()
	if _, err := n.cli.Put(ctx, key, value, opts...); err != nil {
		n.t.Fatalf("etcd put %s: %v", key, err)
	}
}

// keys returns every key under the cluster prefix with its ModRevision.
func (n *node) keys() map[string]int64 {
	n.t.Helper()
	ctx, cancel := n.ctx()
	defer cancel()
	resp, err := n.cli.Get(ctx, n.prefix+"/", clientv3.WithPrefix())
	if err != nil {
		n.t.Fatal(err)
	}
	out := map[string]int64{}
	for _, kv := range resp.Kvs {
		out[string(kv.Key)] = kv.ModRevision
	}
	return out
}

// hasSlot reports whether the node holds a slot.
func (n *node) hasSlot() bool {
	_, ok := n.keys()[n.prefix+"/slots/"+n.name]
	return ok
}

// sameKeys fails the test when the cluster's keys changed.
func (n *node) sameKeys(before map[string]int64, what string) {
	n.t.Helper()
	after := n.keys()
	for k, rev := range before {
		if after[k] != rev {
			n.t.Errorf("%s changed or deleted %q", what, k)
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			n.t.Errorf("%s created %q", what, k)
		}
	}
}
