// Command demo runs a local clusterrebootd cluster: an embedded etcd (the
// real server, go.etcd.io/etcd/server/v3/embed) and N simulated nodes, each a
// real `clusterrebootd` process with its own config, boot id and paths in a
// temp dir. Every node needs a reboot; the reboot command tells the demo,
// which "boots" the node after a short random delay (new boot id, reboot-
// required flag gone) and runs its post-boot `check --once`. The demo prints
// the timeline from etcd's watch stream and a summary, and fails if more
// than max_concurrent nodes were ever down at once.
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

func main() {
	// The demo binary doubles as the nodes' reboot command.
	if len(os.Args) == 4 && os.Args[1] == "reboot-notify" {
		if err := notify(os.Args[2], os.Args[3]); err != nil {
			fmt.Fprintln(os.Stderr, "reboot-notify:", err)
			os.Exit(1)
		}
		return
	}
	binary := flag.String("binary", "", "path of the clusterrebootd binary (make build)")
	nodes := flag.Int("nodes", 5, "number of simulated nodes")
	maxConc := flag.Int("max-concurrent", 1, "lock.max_concurrent of every node")
	minBoot := flag.Duration("boot-min", time.Second, "shortest simulated reboot")
	maxBoot := flag.Duration("boot-max", 3*time.Second, "longest simulated reboot")
	keep := flag.Bool("keep", false, "keep the temp dir (configs, node logs) for inspection")
	timeout := flag.Duration("timeout", 90*time.Second, "give up after this long")
	flag.Parse()
	if *binary == "" {
		fmt.Fprintln(os.Stderr, "demo: -binary is required (make demo passes bin/clusterrebootd)")
		os.Exit(2)
	}
	d := &demo{binary: *binary, n: *nodes, maxConc: *maxConc, bootMin: *minBoot, bootMax: *maxBoot, start: time.Now()}
	err := d.run(*timeout, *keep)
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo: FAILED:", err)
		os.Exit(1)
	}
}

type demo struct {
	binary           string
	n, maxConc       int
	bootMin, bootMax time.Duration
	dir, sock        string
	endpoint         string
	start            time.Time
	self             string

	mu        sync.Mutex
	down      map[string]time.Time // node → reboot requested, until its slot is released
	off       map[string]bool      // node powered off: from its reboot command until it boots
	maxDown   int
	slots     map[string]bool
	maxSlots  int
	released  []time.Time // slot releases, for handover
	handovers []time.Duration
	rebooted  map[string]bool
	failures  []string
	done      chan struct{}
	wake      map[string]chan struct{} // boot → run the node's check at once (OnBootSec)
}

// tick is the simulated clusterrebootd-check.timer interval.
const tick = time.Second

// timer is one node's clusterrebootd-check.timer: a check every tick while
// the node is up, and one right after boot.
func (d *demo) timer(ctx context.Context, name string) {
	for ctx.Err() == nil {
		d.mu.Lock()
		down := d.off[name]
		d.mu.Unlock()
		if !down {
			if code, err := d.check(ctx, name); err != nil && ctx.Err() == nil {
				d.noteExit(name, code)
			}
		}
		jitter := time.Duration(mrand.Int64N(int64(tick / 4)))
		select {
		case <-ctx.Done():
		case <-d.wake[name]:
		case <-time.After(tick + jitter):
		}
	}
}

// noteExit records a check that ended in a code a blocked or waiting node
// does not give: 1 (internal), 2 (config), 6 (etcd), 7 (detector).
func (d *demo) noteExit(name string, code int) {
	switch code {
	case 3, 4, 5: // blocked by a gate: the timer tries again, as in production
		return
	}
	d.fail("%s: check exited %d (see %s)", name, code, filepath.Join(d.dir, name, "log"))
}

func (d *demo) logf(format string, a ...any) {
	fmt.Printf("[%6.2fs] %s\n", time.Since(d.start).Seconds(), fmt.Sprintf(format, a...))
}

func (d *demo) run(timeout time.Duration, keep bool) error {
	var err error
	if d.self, err = os.Executable(); err != nil {
		return err
	}
	if d.dir, err = os.MkdirTemp("", "clusterrebootd-demo-"); err != nil {
		return err
	}
	if keep {
		defer fmt.Println("demo files kept in", d.dir)
	} else {
		defer os.RemoveAll(d.dir)
	}
	etcd, err := d.startEtcd()
	if err != nil {
		return fmt.Errorf("embedded etcd: %w", err)
	}
	defer etcd.Close()
	d.logf("embedded etcd ready on %s (data in %s)", d.endpoint, filepath.Join(d.dir, "etcd"))

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{d.endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer cli.Close()

	if err := d.writeNodes(); err != nil {
		return err
	}
	ln, err := net.Listen("unix", d.sock)
	if err != nil {
		return err
	}
	defer ln.Close()

	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	d.down, d.off, d.slots, d.rebooted, d.done = map[string]time.Time{}, map[string]bool{}, map[string]bool{}, map[string]bool{}, make(chan struct{})
	watchReady := make(chan struct{})
	go d.watch(ctx, cli, watchReady)
	<-watchReady
	go d.serveReboots(ctx, ln)

	d.logf("%d nodes need a reboot (max_concurrent %d, simulated reboots of %s–%s); starting their timers (a check every %s)",
		d.n, d.maxConc, d.bootMin, d.bootMax, tick)
	var wg sync.WaitGroup
	d.wake = map[string]chan struct{}{}
	for i := 1; i <= d.n; i++ {
		d.wake[nodeName(i)] = make(chan struct{}, 1)
	}
	for i := 1; i <= d.n; i++ {
		wg.Add(1)
		go func(name string) {
			defer wg.Done()
			d.timer(ctx, name)
		}(nodeName(i))
	}
	select {
	case <-d.done:
	case <-ctx.Done():
		d.fail("timed out after %s", timeout)
	}
	cancel()
	wg.Wait()
	return d.summary()
}

func nodeName(i int) string { return fmt.Sprintf("node-%d", i) }

func (d *demo) fail(format string, a ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.failures = append(d.failures, fmt.Sprintf(format, a...))
}

// startEtcd starts the real etcd server in-process on free loopback ports.
func (d *demo) startEtcd() (*embed.Etcd, error) {
	cport, err := freePort()
	if err != nil {
		return nil, err
	}
	pport, err := freePort()
	if err != nil {
		return nil, err
	}
	cfg := embed.NewConfig()
	cfg.Name = "demo"
	cfg.Dir = filepath.Join(d.dir, "etcd")
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cu, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", cport))
	pu, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", pport))
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, err
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		e.Close()
		return nil, errors.New("not ready after 30s")
	}
	d.endpoint = cu.String()
	return e, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// writeNodes lays out every node: config, boot id, reboot-required flag,
// run and state dirs, and the shared health script.
func (d *demo) writeNodes() error {
	d.sock = filepath.Join(d.dir, "reboots.sock")
	script := filepath.Join(d.dir, "cluster-gate")
	gate := "#!/bin/sh\n# demo health gate: allow while at most one node is rebooting\n" +
		"echo \"phase $CLUSTERREBOOTD_PHASE: $HEALTHY_NODES of $CLUSTER_SIZE healthy, rebooting: ${REBOOTING_NODES:-none}\"\n" +
		"exit 0\n"
	if err := os.WriteFile(script, []byte(gate), 0o755); err != nil {
		return err
	}
	for i := 1; i <= d.n; i++ {
		name := nodeName(i)
		nd := filepath.Join(d.dir, name)
		for _, sub := range []string{"run", "state"} {
			if err := os.MkdirAll(filepath.Join(nd, sub), 0o755); err != nil {
				return err
			}
		}
		if err := os.WriteFile(filepath.Join(nd, "boot_id"), []byte(newBootID()+"\n"), 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(nd, "reboot-required"), []byte("*** System restart required ***\n"), 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(nd, "reboot-required.pkgs"), []byte("linux-image-6.1.0-99-amd64\n"), 0o644); err != nil {
			return err
		}
		cfg := fmt.Sprintf(`# demo node %[1]s
node_name = %[1]q
cluster = "demo"
alive_ttl = "1m"

[[detector]]
type = "file"
path = %[2]q

[health]
script = %[3]q
timeout = "5s"
healthy_states = []

[etcd]
endpoints = [%[4]q]
dial_timeout = "2s"
request_timeout = "2s"

[lock]
ttl = "10s"
max_concurrent = %[5]d
max_hold_wait = "2m"
backoff_min = "200ms"
backoff_max = "1s"
max_reboot_duration = "1m"

[policy]
min_healthy_absolute = 2

[windows]
timezone = "UTC"
expected_reboot_duration = "0s"

[reboot]
method = "command"
command = [%[6]q, "reboot-notify", %[7]q, %[1]q]
timeout = "5s"

[systemd]
holder = "foreground"

[metrics]
textfile = ""

[paths]
kill_switch = %[8]q
state_dir = %[9]q
run_dir = %[10]q
boot_id = %[11]q
`, name, filepath.Join(nd, "reboot-required"), script, d.endpoint, d.maxConc, d.self, d.sock,
			filepath.Join(nd, "disable"), filepath.Join(nd, "state"), filepath.Join(nd, "run"), filepath.Join(nd, "boot_id"))
		if err := os.WriteFile(filepath.Join(nd, "config.toml"), []byte(cfg), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func newBootID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// check runs `clusterrebootd check --once` for a node, appending its log.
func (d *demo) check(ctx context.Context, name string) (int, error) {
	nd := filepath.Join(d.dir, name)
	logf, err := os.OpenFile(filepath.Join(nd, "log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return -1, err
	}
	defer logf.Close()
	cmd := exec.CommandContext(ctx, d.binary, "--config", filepath.Join(nd, "config.toml"), "--log-format", "text", "check", "--once")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.WaitDelay = 2 * time.Second
	err = cmd.Run()
	code := cmd.ProcessState.ExitCode()
	if err != nil {
		return code, fmt.Errorf("%w (log: %s)", err, filepath.Join(nd, "log"))
	}
	return code, nil
}

// serveReboots receives the nodes' reboot commands.
func (d *demo) serveReboots(ctx context.Context, ln net.Listener) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		name, err := bufio.NewReader(conn).ReadString('\n')
		name = strings.TrimSpace(name)
		if err == nil {
			fmt.Fprintln(conn, "ok")
		}
		conn.Close()
		if err != nil || name == "" {
			continue
		}
		d.mu.Lock()
		d.down[name] = time.Now()
		d.off[name] = true
		if len(d.down) > d.maxDown {
			d.maxDown = len(d.down)
		}
		downNow := len(d.down)
		d.mu.Unlock()
		boot := d.bootMin + time.Duration(mrand.Int64N(int64(d.bootMax-d.bootMin)+1))
		d.logf("%s REBOOTING (nodes down now: %d; simulated boot takes %.1fs)", name, downNow, boot.Seconds())
		go d.boot(ctx, name, boot)
	}
}

// boot brings a node back: tmpfs run dir emptied, new boot id, the update
// installed (reboot-required gone), then post-boot checks as the timer's
// OnBootSec would run them until the node released its slot.
func (d *demo) boot(ctx context.Context, name string, after time.Duration) {
	select {
	case <-time.After(after):
	case <-ctx.Done():
		return
	}
	nd := filepath.Join(d.dir, name)
	entries, _ := os.ReadDir(filepath.Join(nd, "run"))
	for _, e := range entries {
		os.RemoveAll(filepath.Join(nd, "run", e.Name()))
	}
	os.Remove(filepath.Join(nd, "reboot-required"))
	os.Remove(filepath.Join(nd, "reboot-required.pkgs"))
	if err := os.WriteFile(filepath.Join(nd, "boot_id"), []byte(newBootID()+"\n"), 0o644); err != nil {
		d.fail("%s: %v", name, err)
		return
	}
	d.mu.Lock()
	d.off[name] = false
	d.mu.Unlock()
	d.logf("%s booted (new boot_id); its timer runs the post-boot check", name)
	select {
	case d.wake[name] <- struct{}{}:
	default:
	}
}

// watch follows the cluster's keys and prints the timeline.
func (d *demo) watch(ctx context.Context, cli *clientv3.Client, ready chan<- struct{}) {
	prefix := "/clusterrebootd/demo/"
	wch := cli.Watch(clientv3.WithRequireLeader(ctx), prefix, clientv3.WithPrefix(), clientv3.WithPrevKV())
	close(ready)
	lastAlive := map[string]string{}
	for resp := range wch {
		for _, ev := range resp.Events {
			key := strings.TrimPrefix(string(ev.Kv.Key), prefix)
			kind, rest, _ := strings.Cut(key, "/")
			del := ev.Type == clientv3.EventTypeDelete
			switch kind {
			case "lock":
				if del {
					continue // the holder's own log says when it unlocks; a queue entry vanishing is noise here
				}
				if ev.IsCreate() {
					var w struct{ Node string }
					_ = json.Unmarshal(ev.Kv.Value, &w)
					d.logf("%s queued for the cluster lock", orAnon(w.Node))
				}
			case "slots":
				d.slot(rest, del, ev.IsCreate())
			case "alive":
				if del {
					continue
				}
				var a struct{ State, Blocked string }
				_ = json.Unmarshal(ev.Kv.Value, &a)
				line := a.State
				if a.Blocked != "" {
					line += ": " + a.Blocked
				}
				if lastAlive[rest] != line && (a.State == "waiting" || a.State == "blocked") && a.Blocked != "" {
					d.logf("%s %s", rest, line)
				}
				lastAlive[rest] = line
			}
		}
	}
}

func orAnon(s string) string {
	if s == "" {
		return "(anonymous, e.g. etcdctl lock)"
	}
	return s
}

func (d *demo) slot(node string, del, create bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := time.Now()
	switch {
	case create:
		d.slots[node] = true
		if len(d.slots) > d.maxSlots {
			d.maxSlots = len(d.slots)
		}
		handover := ""
		if n := len(d.released); n > 0 {
			h := now.Sub(d.released[n-1])
			d.handovers = append(d.handovers, h)
			handover = fmt.Sprintf(" — handover %.0f ms after the last release", float64(h.Microseconds())/1000)
		}
		d.logf("%s took reboot slot %d/%d%s", node, len(d.slots), d.maxConc, handover)
	case del:
		delete(d.slots, node)
		since, wasDown := d.down[node]
		delete(d.down, node)
		d.released = append(d.released, now)
		if wasDown {
			d.rebooted[node] = true
			d.logf("%s back and healthy: slot released after %.1fs down", node, now.Sub(since).Seconds())
		} else {
			d.logf("%s slot released", node)
		}
		if len(d.rebooted) == d.n {
			close(d.done)
		}
	}
}

func (d *demo) summary() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	makespan := time.Since(d.start)
	if n := len(d.released); n > 0 {
		makespan = d.released[n-1].Sub(d.start)
	}
	fmt.Println()
	fmt.Println("summary")
	fmt.Printf("  nodes rebooted:        %d of %d\n", len(d.rebooted), d.n)
	fmt.Printf("  makespan:              %.1fs\n", makespan.Seconds())
	fmt.Printf("  max nodes down at once: %d (max_concurrent %d)\n", d.maxDown, d.maxConc)
	fmt.Printf("  max slots held at once: %d\n", d.maxSlots)
	if len(d.handovers) > 0 {
		hs := slices.Clone(d.handovers)
		slices.Sort(hs)
		fmt.Printf("  handover (slot released → next slot taken, gates included): p50 %.0f ms, max %.0f ms\n",
			ms(hs[len(hs)/2]), ms(hs[len(hs)-1]))
	}
	var errs []string
	errs = append(errs, d.failures...)
	if d.maxDown > d.maxConc || d.maxSlots > d.maxConc {
		errs = append(errs, fmt.Sprintf("SAFETY VIOLATION: %d nodes down, %d slots at once", d.maxDown, d.maxSlots))
	}
	if len(d.rebooted) != d.n {
		errs = append(errs, fmt.Sprintf("only %d of %d nodes rebooted", len(d.rebooted), d.n))
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	fmt.Println("  result:                ok")
	return nil
}

func ms(d time.Duration) float64 { return math.Round(float64(d.Microseconds())/100) / 10 }

// notify is the reboot command: it tells the demo that a node reboots.
func notify(sock, node string) error {
	conn, err := net.DialTimeout("unix", sock, 2*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := fmt.Fprintln(conn, node); err != nil {
		return err
	}
	ack, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || strings.TrimSpace(ack) != "ok" {
		return fmt.Errorf("no ack from the demo: %q %v", ack, err)
	}
	return nil
}
