// Command tick measures the cost of the common case: `clusterrebootd check
// --once` on a node that needs no reboot, against a real (embedded) etcd.
// It reports wall time, CPU time, peak RSS and etcd gRPC requests per tick
// (from the server's own Prometheus counters, by gRPC method), plus the
// binary's size and the load average. -runs repeats the measurement so a
// shared machine's noise shows; the figures are upper bounds.
//
//	cd hack && go run ./bench/tick -binary ../bin/clusterrebootd -n 200 -runs 3
package main

import (
	"bufio"
	"flag"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

func main() {
	binary := flag.String("binary", "", "clusterrebootd binary")
	n := flag.Int("n", 100, "ticks to measure")
	runs := flag.Int("runs", 1, "repeat the measurement this many times")
	flag.Parse()
	if err := run(*binary, *n, *runs); err != nil {
		fmt.Fprintln(os.Stderr, "tick:", err)
		os.Exit(1)
	}
}

func run(binary string, n, runs int) error {
	if binary == "" {
		return fmt.Errorf("-binary is required")
	}
	dir, err := os.MkdirTemp("", "tick-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// The spawn helper (hack/bench/spawn) reports the check's own peak RSS;
	// built from this module, so run from hack/ (go run ./bench/tick).
	spawner := filepath.Join(dir, "spawn")
	if out, err := exec.Command("go", "build", "-o", spawner, "./bench/spawn").CombinedOutput(); err != nil {
		return fmt.Errorf("build ./bench/spawn (run from hack/): %w: %s", err, out)
	}
	endpoint, stop, err := startEtcd(filepath.Join(dir, "etcd"))
	if err != nil {
		return err
	}
	defer stop()
	cfgPath := filepath.Join(dir, "config.toml")
	cfg := fmt.Sprintf(`node_name = "bench"
cluster = "bench"
[[detector]]
type = "file"
path = %q
[health]
healthy_states = []
[etcd]
endpoints = [%q]
[reboot]
method = "command"
command = ["/bin/false"]
[systemd]
holder = "foreground"
[metrics]
textfile = ""
[paths]
kill_switch = %q
state_dir = %q
run_dir = %q
`, filepath.Join(dir, "reboot-required"), endpoint, filepath.Join(dir, "disable"), filepath.Join(dir, "state"), filepath.Join(dir, "run"))
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return err
	}
	// The first run registers the node and grants the alive lease.
	if err := exec.Command(binary, "--config", cfgPath, "check", "--once").Run(); err != nil {
		return fmt.Errorf("warm-up check: %w", err)
	}
	fi, err := os.Stat(binary)
	if err != nil {
		return err
	}
	fmt.Printf("check --once, nothing needed, %d ticks x %d runs against embedded etcd on loopback; %d CPUs; binary %.1f MiB\n",
		n, runs, runtime.NumCPU(), float64(fi.Size())/(1<<20))
	for r := range runs {
		if err := measure(spawner, binary, cfgPath, endpoint, n, r+1); err != nil {
			return err
		}
	}
	return nil
}

// measure runs n ticks and prints one line of figures.
func measure(spawner, binary, cfgPath, endpoint string, n, r int) error {
	before, err := grpcRequests(endpoint)
	if err != nil {
		return err
	}
	load0 := loadavg()
	var walls, cpus []time.Duration
	var maxRSS int64
	var floor int64
	usage := filepath.Join(filepath.Dir(cfgPath), "usage")
	for range n {
		// Through spawn: started directly from this process (an embedded
		// etcd, tens of MiB), the child's ru_maxrss would be ours.
		cmd := exec.Command(spawner, usage, binary, "--config", cfgPath, "--log-level", "warn", "check", "--once")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("check: %w: %s", err, out)
		}
		b, err := os.ReadFile(usage)
		if err != nil {
			return err
		}
		var wall, utime, stime, rss, self int64
		if _, err := fmt.Sscan(string(b), &wall, &utime, &stime, &rss, &self); err != nil {
			return fmt.Errorf("spawn output %q: %w", b, err)
		}
		walls = append(walls, time.Duration(wall))
		cpus = append(cpus, time.Duration(utime+stime))
		maxRSS = max(maxRSS, rss)
		floor = max(floor, self)
	}
	after, err := grpcRequests(endpoint)
	if err != nil {
		return err
	}
	slices.Sort(walls)
	slices.Sort(cpus)
	fmt.Printf("run %d (load %s -> %s):\n", r, load0, loadavg())
	fmt.Printf("  wall:  p50 %s  p99 %s  max %s\n", pct(walls, 50), pct(walls, 99), walls[len(walls)-1])
	fmt.Printf("  cpu:   p50 %s  p99 %s (user+sys)\n", pct(cpus, 50), pct(cpus, 99))
	fmt.Printf("  peak RSS: %.1f MiB (ru_maxrss via spawn, whose own %.1f MiB is the floor)\n", float64(maxRSS)/1024, float64(floor)/1024)
	var total int64
	var parts []string
	for _, m := range slices.Sorted(maps.Keys(after)) {
		if d := after[m] - before[m]; d > 0 {
			total += d
			parts = append(parts, fmt.Sprintf("%s %.2f", m, float64(d)/float64(n)))
		}
	}
	fmt.Printf("  etcd gRPC requests per tick: %.2f (%s)\n", float64(total)/float64(n), strings.Join(parts, ", "))
	return nil
}

// loadavg is the first three fields of /proc/loadavg.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func pct(d []time.Duration, p int) time.Duration {
	i := (len(d)*p + 99) / 100
	return d[min(max(i-1, 0), len(d)-1)].Round(10 * time.Microsecond)
}

// grpcRequests reads etcd's grpc_server_started_total counter by method
// (unary calls, and streams opened).
func grpcRequests(endpoint string) (map[string]int64, error) {
	resp, err := http.Get(endpoint + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	total := map[string]int64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "grpc_server_started_total{") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		_, method, _ := strings.Cut(line, `grpc_method="`)
		method, _, _ = strings.Cut(method, `"`)
		if err == nil {
			total[method] += int64(v)
		}
	}
	return total, sc.Err()
}

func startEtcd(dir string) (string, func(), error) {
	ports := make([]int, 2)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", nil, err
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		l.Close()
	}
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = "bench", dir
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cu, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", ports[0]))
	pu, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", ports[1]))
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.Metrics = "extensive"
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return "", nil, err
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		e.Close()
		return "", nil, fmt.Errorf("etcd not ready")
	}
	return cu.String(), e.Close, nil
}
