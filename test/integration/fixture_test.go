package integration

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// Bounds of the harness. They bound waits; they are not assertions of speed.
const (
	waitLong    = 60 * time.Second // a condition that must come
	procTimeout = 90 * time.Second // any single clusterrebootd run
	pollEvery   = 25 * time.Millisecond
)

// Exit codes of DESIGN §6.
const (
	exitOK      = 0
	exitHealth  = 3
	exitBusy    = 4
	exitBlocked = 5
	exitEtcd    = 6
)

// settings are the configuration knobs the tests turn; defaults() gives the
// short timings of the suite.
type settings struct {
	TTL, HealthTimeout, MaxHoldWait string
	DialTimeout, RequestTimeout     string
	MaxRebootDuration               string
	MaxConcurrent                   int
	MinHealthyAbsolute              int
	FallbackNodes                   []string
	Endpoints                       []string // nil: the cluster's etcd
	NoScript                        bool     // no health script configured
}

// The timings are short, but not so short that a starved machine (make
// test runs this suite beside the other -race suites on 2 cores) turns a
// scheduling stall into a lost lease or a timed-out script: a 2 s lock.ttl
// expired sessions under load. Tests of expiry wait progressBound(ttl).
func defaults() settings {
	return settings{TTL: "5s", HealthTimeout: "3s", MaxHoldWait: "1m", DialTimeout: "5s", RequestTimeout: "5s",
		MaxRebootDuration: "10m", MaxConcurrent: 1}
}

func (s settings) ttl() time.Duration {
	d, err := time.ParseDuration(s.TTL)
	if err != nil {
		panic(err)
	}
	return d
}

// cluster is one clusterrebootd cluster (one etcd prefix) of simulated nodes.
type cluster struct {
	t         *testing.T
	name      string // cluster name: etcd prefix /clusterrebootd/<name>
	prefix    string // "/clusterrebootd/<name>/"
	dir       string
	endpoints []string
	set       settings
	cli       *clientv3.Client
	rec       *recorder

	rebootLog, gateScript, nodeHealth, rebootScript string

	mu    sync.Mutex
	procs []*proc
	seq   int
}

var clusterSeq atomic.Int64

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// newCluster lays out a cluster on etcd endpoints: the shared scripts, a
// client for the test and a recorder of every event under its prefix.
func newCluster(t *testing.T, endpoints []string, set settings) *cluster {
	t.Helper()
	short := unsafeName.ReplaceAllString(t.Name()[strings.LastIndex(t.Name(), "/")+1:], "-")
	if len(short) > 40 {
		short = short[:40]
	}
	name := fmt.Sprintf("it%03d-%s", clusterSeq.Add(1), strings.Trim(short, "-."))
	c := &cluster{t: t, name: name, prefix: "/clusterrebootd/" + name + "/", dir: t.TempDir(), endpoints: endpoints, set: set}
	c.rebootLog = filepath.Join(c.dir, "reboots.log")
	c.gateScript = c.script("cluster-gate", fmt.Sprintf(gateScript, c.dir))
	c.nodeHealth = c.script("node-health", nodeHealthScript)
	c.rebootScript = c.script("reboot", rebootScript)
	if err := os.MkdirAll(filepath.Join(c.dir, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second,
		// Reconnect quickly after an etcd restart (gRPC's default backoff
		// grows to two minutes).
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: 2 * time.Second,
		})}})
	if err != nil {
		t.Fatal(err)
	}
	c.cli = cli
	c.rec = startRecorder(t, cli, c.prefix)
	t.Cleanup(c.cleanup)
	return c
}

// The health script obeys flag files in the node's directory, per phase:
// gate-deny-<phase> makes it exit 1; gate-block-<phase> makes it wait
// (bounded, and killed by health.timeout anyway) after appending to
// gate-blocked-<phase>. Every call is appended to gate.calls.
const gateScript = `#!/bin/sh
d='%s'/"$NODE_NAME"
p="$CLUSTERREBOOTD_PHASE"
echo "$p" >> "$d/gate.calls"
if [ -e "$d/gate-block-$p" ]; then
	echo x >> "$d/gate-blocked-$p"
	i=0
	while [ -e "$d/gate-block-$p" ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done
fi
if [ -e "$d/gate-deny-$p" ]; then
	echo "denied by the test in phase $p"
	exit 1
fi
echo "ok: phase $p, $HEALTHY_NODES of $CLUSTER_SIZE healthy, rebooting: ${REBOOTING_NODES:-none}"
`

// The node-health command: unhealthy while <node dir>/unhealthy exists.
const nodeHealthScript = `#!/bin/sh
if [ -e "$1/unhealthy" ]; then
	echo "unhealthy (test flag)"
	exit 1
fi
echo healthy
`

// The reboot command records "<node> <boot_id>" in the reboot log, then
// blocks (bounded) while <node dir>/reboot-block exists, after appending to
// reboot-blocked.
const rebootScript = `#!/bin/sh
echo "$1 $(cat "$2/boot_id")" >> "$3"
if [ -e "$2/reboot-block" ]; then
	echo x >> "$2/reboot-blocked"
	i=0
	while [ -e "$2/reboot-block" ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done
fi
echo "reboot of $1 requested"
`

func (c *cluster) script(name, body string) string {
	p := filepath.Join(c.dir, name)
	if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
		c.t.Fatal(err)
	}
	return p
}

// cleanup kills what still runs, fails the test on a data race reported by
// a product process, and dumps the logs of a failed test.
func (c *cluster) cleanup() {
	c.mu.Lock()
	procs := append([]*proc(nil), c.procs...)
	c.mu.Unlock()
	for _, p := range procs {
		p.kill()
	}
	c.rec.stop()
	c.cli.Close()
	for _, p := range procs {
		if out := p.output(); strings.Contains(out, "DATA RACE") {
			c.t.Errorf("%s: the race detector reported a data race:\n%s", p.label, out)
		}
	}
	if !c.t.Failed() {
		return
	}
	for _, p := range procs {
		c.t.Logf("--- %s (exit %d) ---\n%s", p.label, p.exitCode(), tail(p.output(), 6000))
	}
	if b, err := os.ReadFile(c.rebootLog); err == nil {
		c.t.Logf("--- reboot log ---\n%s", b)
	}
	c.t.Logf("--- etcd events of %s ---\n%s", c.prefix, c.rec.dump())
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// node is one simulated machine.
type node struct {
	c    *cluster
	name string
	dir  string
	cfg  string
	set  settings
}

// addNode creates a node that needs a reboot, with the cluster's settings
// changed by edit.
func (c *cluster) addNode(name string, edit ...func(*settings)) *node {
	c.t.Helper()
	n := &node{c: c, name: name, dir: filepath.Join(c.dir, name), set: c.set}
	n.set.FallbackNodes = append([]string(nil), c.set.FallbackNodes...)
	for _, e := range edit {
		e(&n.set)
	}
	n.cfg = filepath.Join(n.dir, "config.toml")
	for _, sub := range []string{"run", "state"} {
		if err := os.MkdirAll(filepath.Join(n.dir, sub), 0o755); err != nil {
			c.t.Fatal(err)
		}
	}
	n.writeFile("boot_id", newBootID()+"\n")
	n.setNeedsReboot(true)
	n.writeConfig()
	return n
}

// addNodes adds node-1 … node-k, all needing a reboot.
func (c *cluster) addNodes(k int, edit ...func(*settings)) []*node {
	var ns []*node
	for i := 1; i <= k; i++ {
		ns = append(ns, c.addNode(fmt.Sprintf("node-%d", i), edit...))
	}
	return ns
}

func (n *node) writeConfig() {
	s := n.set
	endpoints := s.Endpoints
	if endpoints == nil {
		endpoints = n.c.endpoints
	}
	script := n.c.gateScript
	if s.NoScript {
		script = ""
	}
	cfg := fmt.Sprintf(`# integration test node %[1]s
node_name = %[1]q
cluster = %[2]q
alive_ttl = "1m"
history_ttl = "1h"

[[detector]]
type = "file"
path = %[3]q

[health]
script = %[4]q
timeout = %[5]q
healthy_states = []
node_health_command = [%[6]q, %[7]q]

[etcd]
endpoints = %[8]s
dial_timeout = %[9]q
request_timeout = %[10]q

[lock]
ttl = %[11]q
max_concurrent = %[12]d
max_hold_wait = %[13]q
backoff_min = "100ms"
backoff_max = "500ms"
max_reboot_duration = %[14]q

[policy]
min_healthy_absolute = %[15]d
fallback_nodes = %[16]s

[windows]
timezone = "UTC"
expected_reboot_duration = "0s"

[reboot]
method = "command"
command = [%[17]q, %[1]q, %[7]q, %[18]q]
timeout = "90s"

[systemd]
holder = "foreground"

[metrics]
textfile = ""

[paths]
kill_switch = %[19]q
state_dir = %[20]q
run_dir = %[21]q
boot_id = %[22]q
`, n.name, n.c.name, n.path("reboot-required"), script, s.HealthTimeout, n.c.nodeHealth, n.dir,
		tomlList(endpoints), s.DialTimeout, s.RequestTimeout, s.TTL, s.MaxConcurrent, s.MaxHoldWait, s.MaxRebootDuration,
		s.MinHealthyAbsolute, tomlList(s.FallbackNodes), n.c.rebootScript, n.c.rebootLog,
		n.path("disable"), n.path("state"), n.path("run"), n.path("boot_id"))
	n.writeFile("config.toml", cfg)
}

func tomlList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = fmt.Sprintf("%q", x)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func newBootID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (n *node) path(name string) string { return filepath.Join(n.dir, name) }

func (n *node) writeFile(name, content string) {
	n.c.t.Helper()
	tmp := n.path(name + ".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		n.c.t.Fatal(err)
	}
	if err := os.Rename(tmp, n.path(name)); err != nil {
		n.c.t.Fatal(err)
	}
}

// touch creates a flag file; remove deletes it.
func (n *node) touch(name string) { n.writeFile(name, "") }

func (n *node) remove(name string) {
	if err := os.Remove(n.path(name)); err != nil && !os.IsNotExist(err) {
		n.c.t.Fatal(err)
	}
}

func (n *node) exists(name string) bool {
	_, err := os.Stat(n.path(name))
	return err == nil
}

func (n *node) setNeedsReboot(need bool) {
	if need {
		n.writeFile("reboot-required", "*** System restart required ***\n")
	} else {
		n.remove("reboot-required")
	}
}

func (n *node) bootID() string {
	b, err := os.ReadFile(n.path("boot_id"))
	if err != nil {
		n.c.t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// gateCalls counts the health script's runs in phase.
func (n *node) gateCalls(phase string) int {
	b, err := os.ReadFile(n.path("gate.calls"))
	if err != nil {
		return 0
	}
	k := 0
	for _, l := range strings.Split(string(b), "\n") {
		if l == phase {
			k++
		}
	}
	return k
}

// start runs `clusterrebootd --config <node> args...` in the background.
func (n *node) start(args ...string) *proc {
	full := append([]string{"--config", n.cfg, "--log-format", "text"}, args...)
	return n.c.spawn(n.name+" "+strings.Join(args, " "), full)
}

// run runs a command to its end (bounded) and returns its exit code and output.
func (n *node) run(args ...string) (int, string) {
	n.c.t.Helper()
	p := n.start(args...)
	code := p.wait(n.c.t, procTimeout)
	return code, p.output()
}

// expect runs a command and fails the test unless it exits with want.
func (n *node) expect(want int, args ...string) string {
	n.c.t.Helper()
	code, out := n.run(args...)
	if code != want {
		n.c.t.Fatalf("%s %s: exit %d, want %d\n%s", n.name, strings.Join(args, " "), code, want, out)
	}
	return out
}

// boot simulates the node coming back from its reboot: a new boot id, an
// empty run directory (tmpfs), the update installed (no reboot-required),
// then the post-boot `check --once`, which must release the node's slot.
func (n *node) boot() {
	n.c.t.Helper()
	n.writeFile("boot_id", newBootID()+"\n")
	entries, err := os.ReadDir(n.path("run"))
	if err != nil {
		n.c.t.Fatal(err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(n.path("run"), e.Name())); err != nil {
			n.c.t.Fatal(err)
		}
	}
	n.setNeedsReboot(false)
	n.expect(exitOK, "check", "--once")
	if _, held := n.c.slots()[n.name]; held {
		n.c.t.Fatalf("%s: post-boot check exited 0 but its slot is still held", n.name)
	}
}

// proc is one clusterrebootd process (its own process group).
type proc struct {
	label   string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{}
	code    int
}

func (c *cluster) spawn(label string, args []string) *proc {
	c.t.Helper()
	c.mu.Lock()
	c.seq++
	seq := c.seq
	c.mu.Unlock()
	p := &proc{label: label, done: make(chan struct{}), code: -1,
		logPath: filepath.Join(c.dir, "logs", fmt.Sprintf("%03d-%s.log", seq, unsafeName.ReplaceAllString(label, "_")))}
	logf, err := os.Create(p.logPath)
	if err != nil {
		c.t.Fatal(err)
	}
	p.cmd = exec.Command(binary, args...)
	p.cmd.Env = productEnv()
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		logf.Close()
		c.t.Fatalf("start %s: %v", label, err)
	}
	go func() {
		_ = p.cmd.Wait()
		logf.Close()
		p.code = p.cmd.ProcessState.ExitCode()
		close(p.done)
	}()
	c.mu.Lock()
	c.procs = append(c.procs, p)
	c.mu.Unlock()
	return p
}

// operator is the user the product sees (history "by").
const operator = "it-operator"

// productEnv is the test's environment without what would change the
// product's behaviour (journald, sudo), with a known USER.
func productEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "JOURNAL_STREAM", "NOTIFY_SOCKET", "SUDO_USER", "USER", "WATCHDOG_USEC", "WATCHDOG_PID":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "USER="+operator)
}

// wait waits for the process to exit and returns its exit code (-1 when
// killed by a signal). A process still running after timeout is killed and
// fails the test.
func (p *proc) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(timeout):
		p.kill()
		t.Fatalf("%s: still running after %s (killed)\n%s", p.label, timeout, tail(p.output(), 6000))
		return -1
	}
}

// expectExit waits (bounded) and fails the test unless the exit code is want.
func (p *proc) expectExit(t *testing.T, want int) {
	t.Helper()
	if code := p.wait(t, procTimeout); code != want {
		t.Fatalf("%s: exit %d, want %d\n%s", p.label, code, want, tail(p.output(), 6000))
	}
}

func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

func (p *proc) exitCode() int {
	select {
	case <-p.done:
		return p.code
	default:
		return -2 // still running
	}
}

// kill sends SIGKILL to the process group (the binary and everything it
// started in its group; health and reboot scripts run in their own groups)
// and reaps the process.
func (p *proc) kill() {
	if !p.running() {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
	}
}

func (p *proc) output() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return "(no output: " + err.Error() + ")"
	}
	return string(b)
}

// reboot is one line of the reboot log: a reboot command that ran.
type reboot struct{ node, bootID string }

func (c *cluster) reboots() []reboot {
	b, err := os.ReadFile(c.rebootLog)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		c.t.Fatal(err)
	}
	var out []reboot
	for _, l := range bytes.Split(b, []byte("\n")) {
		f := strings.Fields(string(l))
		if len(f) == 2 {
			out = append(out, reboot{f[0], f[1]})
		}
	}
	return out
}

func (c *cluster) rebootsOf(node string) int {
	k := 0
	for _, r := range c.reboots() {
		if r.node == node {
			k++
		}
	}
	return k
}

// waitFor polls cond until it holds or timeout passes (then the test fails).
// It returns how long it waited.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > timeout {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(pollEvery)
	}
	return time.Since(start)
}

// waitRebooted waits until node's reboot command ran k times (lines in the
// reboot log) and fails the test unless the node holds its slot.
func (n *node) waitRebooted(k int) {
	n.c.t.Helper()
	waitFor(n.c.t, fmt.Sprintf("reboot #%d of %s", k, n.name), waitLong, func() bool { return n.c.rebootsOf(n.name) >= k })
	if _, ok := n.c.slots()[n.name]; !ok {
		n.c.t.Fatalf("%s rebooted without holding its slot (slots: %v)", n.name, keys(n.c.slots()))
	}
}

// closedPort returns a loopback address nobody listens on.
func closedPort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}
