// Command tick measures the cost of the common case: `clusterrebootd check
// --once` on a node that needs no reboot, against a real (embedded) etcd.
// It reports wall time, CPU time, peak RSS and etcd gRPC requests per tick
// (from the server's own Prometheus counters), plus the binary's size.
//
//	cd hack && go run ./bench/tick -binary ../bin/clusterrebootd -n 200
package main

import (
	"bufio"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

func main() {
	binary := flag.String("binary", "", "clusterrebootd binary")
	n := flag.Int("n", 100, "ticks to measure")
	flag.Parse()
	if err := run(*binary, *n); err != nil {
		fmt.Fprintln(os.Stderr, "tick:", err)
		os.Exit(1)
	}
}

func run(binary string, n int) error {
	if binary == "" {
		return fmt.Errorf("-binary is required")
	}
	dir, err := os.MkdirTemp("", "tick-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
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
	before, err := grpcRequests(endpoint)
	if err != nil {
		return err
	}
	var walls, cpus []time.Duration
	var maxRSS int64
	for range n {
		cmd := exec.Command(binary, "--config", cfgPath, "--log-level", "warn", "check", "--once")
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("check: %w: %s", err, out)
		}
		walls = append(walls, time.Since(start))
		ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		cpus = append(cpus, time.Duration(ru.Utime.Nano()+ru.Stime.Nano()))
		maxRSS = max(maxRSS, ru.Maxrss)
	}
	after, err := grpcRequests(endpoint)
	if err != nil {
		return err
	}
	fi, err := os.Stat(binary)
	if err != nil {
		return err
	}
	slices.Sort(walls)
	slices.Sort(cpus)
	fmt.Printf("check --once, nothing needed, %d ticks against embedded etcd on loopback\n", n)
	fmt.Printf("  wall:  p50 %s  p99 %s  max %s\n", pct(walls, 50), pct(walls, 99), walls[len(walls)-1])
	fmt.Printf("  cpu:   p50 %s  p99 %s (user+sys)\n", pct(cpus, 50), pct(cpus, 99))
	fmt.Printf("  peak RSS: %.1f MiB\n", float64(maxRSS)/1024)
	fmt.Printf("  etcd gRPC requests per tick: %.2f\n", float64(after-before)/float64(n))
	fmt.Printf("  binary: %.1f MiB\n", float64(fi.Size())/(1<<20))
	return nil
}

func pct(d []time.Duration, p int) time.Duration {
	i := (len(d)*p + 99) / 100
	return d[min(max(i-1, 0), len(d)-1)].Round(10 * time.Microsecond)
}

// grpcRequests sums etcd's grpc_server_started_total counter.
func grpcRequests(endpoint string) (int64, error) {
	resp, err := http.Get(endpoint + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var total int64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "grpc_server_started_total{") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err == nil {
			total += int64(v)
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
