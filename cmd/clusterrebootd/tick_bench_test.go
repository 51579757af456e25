package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/clusterrebootd/clusterrebootd/test/etcdtest"
)

// BenchmarkTick runs the whole `check --once` command in-process (run(),
// as main calls it: flags, config load, wiring, etcd dial, the check, exit
// code) on a node that needs nothing, against the real etcd. It is the
// profile-able part of an idle tick: process start-up and package init are
// measured by hack/bench/tick and GODEBUG=inittrace=1. Reports etcd
// requests per tick (from etcd's /metrics).
//
//	go test -run '^$' -bench '^BenchmarkTick$' -benchtime 200x -cpuprofile /tmp/tick.cpu ./cmd/clusterrebootd/
//	go tool pprof -top -cum cmd/clusterrebootd.test /tmp/tick.cpu
func BenchmarkTick(b *testing.B) {
	srv := etcdtest.Start(b)
	dir := b.TempDir()
	cfgPath := filepath.Join(dir, "config.toml")
	cfg := fmt.Sprintf(`node_name = "bench"
cluster = "tick"
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
`, filepath.Join(dir, "reboot-required"), srv.ClientURL(), filepath.Join(dir, "disable"), filepath.Join(dir, "state"), filepath.Join(dir, "run"))
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		b.Fatal(err)
	}
	args := []string{"--config", cfgPath, "--log-level", "warn", "check", "--once"}
	if code := run(args); code != 0 { // registers the node, grants the alive lease
		b.Fatalf("warm-up check: exit %d", code)
	}
	before := scrapeEtcd(b, srv.ClientURL())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if code := run(args); code != 0 {
			b.Fatalf("check: exit %d", code)
		}
	}
	b.StopTimer()
	d := diffEtcd(before, scrapeEtcd(b, srv.ClientURL()))
	b.ReportMetric(d.requests()/float64(b.N), "req/tick")
	b.Logf("%d ticks, load %s: per tick %s", b.N, loadavg(), d.per(float64(b.N)))
}
