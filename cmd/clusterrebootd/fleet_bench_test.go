package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/clusterrebootd/clusterrebootd/lib/cluster"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	co "github.com/clusterrebootd/clusterrebootd/lib/coordinator"
	"github.com/clusterrebootd/clusterrebootd/test/etcdtest"
)

// BenchmarkFleet is the load a fleet puts on etcd, compressed in time: N
// simulated nodes (default 1000) each run the real Check (own etcd client,
// as a `check --once` process would) once per interval, spread evenly over
// it; the real 5-minute timer is compressed to CLUSTERREBOOTD_BENCH_INTERVAL
// (default 60s). Phases:
//
//  1. register: the first round (every node registers and grants its alive lease);
//  2. idle: CLUSTERREBOOTD_BENCH_ROUNDS rounds (default 2) where nothing is needed;
//  3. wave: 100 nodes need a reboot (max_concurrent 5, simulated reboot 2 s,
//     post-boot check at once) while everybody keeps ticking;
//  4. expiry: history_ttl is compressed to 120 s, so the history lease
//     buckets (4 s wide) expire during the run; then one compaction;
//  5. status: `status` on N members, in-process and, when
//     CLUSTERREBOOTD_BIN names a binary, as a process.
//
// Reported per phase: etcd requests per tick and per second (real time
// scale: divide by the compression), etcd CPU, revisions, DB size.
//
//	go test -run '^$' -bench Fleet -benchtime 1x -timeout 60m ./cmd/clusterrebootd/
func BenchmarkFleet(b *testing.B) {
	n := envInt("CLUSTERREBOOTD_BENCH_FLEET", 1000)
	wave := min(envInt("CLUSTERREBOOTD_BENCH_WAVE", 100), n)
	interval := envDurations("CLUSTERREBOOTD_BENCH_INTERVAL", []time.Duration{60 * time.Second})[0]
	rounds := envInt("CLUSTERREBOOTD_BENCH_ROUNDS", 2)
	const real = 5 * time.Minute
	scale := float64(real) / float64(interval) // compression factor
	for i := 0; i < b.N; i++ {
		srv := etcdtest.Start(b)
		f := newFleet(b, srv, fmt.Sprintf("fleet%d", time.Now().UnixNano()), n)
		f.mc, f.reboot = 5, 2*time.Second
		b.Logf("fleet: %d nodes, tick interval 5m compressed to %s (x%.0f), load %s", n, interval, scale, loadavg())

		report := func(phase string, ticks int, d etcdDelta, wall time.Duration) {
			b.Logf("%-8s %5d ticks in %6.1fs (load %s): per tick %s", phase, ticks, wall.Seconds(), loadavg(), d.per(float64(max(ticks, 1))))
			b.Logf("%-8s etcd: %.1f req/s compressed = %.2f req/s at the real 5-minute interval; etcd CPU %.1f%% of a core compressed = %.2f%% real; DB %.2f MiB (in use %.2f MiB), %.0f keys",
				"", d.requests()/wall.Seconds(), d.requests()/wall.Seconds()/scale, 100*d.CPU/wall.Seconds(), 100*d.CPU/wall.Seconds()/scale,
				d.DBSize/(1<<20), d.DBInUse/(1<<20), d.Keys)
		}
		phase := func(name string, rounds int, before func()) {
			m0 := scrapeEtcd(b, srv.ClientURL())
			t0 := time.Now()
			if before != nil {
				before()
			}
			ticks := f.rounds(rounds, interval)
			report(name, ticks, diffEtcd(m0, scrapeEtcd(b, srv.ClientURL())), time.Since(t0))
		}
		phase("register", 1, nil)
		phase("idle", rounds, nil)
		tw := f.tickWalls()
		b.Logf("         in-process Check wall (no process start): p50 %.1f ms p99 %.1f ms; View %d bytes of keys+values", ms(pctl(tw, 50)), ms(pctl(tw, 99)), f.viewBytes())

		// The wave: 100 nodes need a reboot from now on.
		phase("wave", 1, func() {
			for _, nd := range f.nodes[:wave] {
				if err := os.WriteFile(filepath.Join(nd.dir, "reboot-required"), nil, 0o644); err != nil {
					b.Fatal(err)
				}
			}
		})
		deadline := time.Now().Add(10 * time.Minute)
		for f.rebooted() < wave && time.Now().Before(deadline) {
			phase("wave+", 1, nil)
		}
		hist := f.count("/history/")
		mw := scrapeEtcd(b, srv.ClientURL())
		b.Logf("         wave done: %d/%d rebooted, %d history records (%.1f per reboot), slots left %d, %d ticks skipped (check lock busy); DB %.2f MiB in use %.2f MiB",
			f.rebooted(), wave, hist, float64(hist)/float64(wave), f.count("/slots/"), f.skipped.Load(),
			mw.sum("etcd_mvcc_db_total_size_in_bytes")/(1<<20), mw.sum("etcd_mvcc_db_total_size_in_use_in_bytes")/(1<<20))

		f.status(b, "with the wave's history")

		// History expiry: the buckets' leases run out (history_ttl 120 s + 4 s).
		m0 := scrapeEtcd(b, srv.ClientURL())
		time.Sleep(130 * time.Second)
		m1 := scrapeEtcd(b, srv.ClientURL())
		b.Logf("expiry   history records now %d; DB %.2f MiB in use %.2f MiB, keys %.0f, leases expired %.0f",
			f.count("/history/"), m1.sum("etcd_mvcc_db_total_size_in_bytes")/(1<<20), m1.sum("etcd_mvcc_db_total_size_in_use_in_bytes")/(1<<20),
			m1.sum("etcd_debugging_mvcc_keys_total"), m1.sum("etcd_debugging_server_lease_expired_total")-m0.sum("etcd_debugging_server_lease_expired_total"))
		f.compact()
		time.Sleep(2 * time.Second)
		m2 := scrapeEtcd(b, srv.ClientURL())
		b.Logf("compact  at revision %.0f: DB %.2f MiB, in use %.2f MiB (etcd needs --auto-compaction-*; without it every tick's revision stays)",
			m2.sum("etcd_debugging_mvcc_current_revision"), m2.sum("etcd_mvcc_db_total_size_in_bytes")/(1<<20), m2.sum("etcd_mvcc_db_total_size_in_use_in_bytes")/(1<<20))

		f.status(b, "history expired")
		f.close()
	}
	b.ReportMetric(0, "ns/op")
}

// fleet is N simulated nodes on one etcd.
type fleet struct {
	b      *testing.B
	srv    *etcdtest.Server
	name   string
	dir    string
	nodes  []*simNode
	mc     int
	reboot time.Duration
	raw    *clientv3.Client
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	locks   map[*simNode]*sync.Mutex // the host-local check lock (flock in the real command)
	skipped atomic.Int64             // ticks that found the check lock busy

	mu    sync.Mutex
	walls []time.Duration // Check wall of idle ticks
}

func newFleet(b *testing.B, srv *etcdtest.Server, name string, n int) *fleet {
	raw, err := clientv3.New(clientv3.Config{Endpoints: srv.Endpoints(), Logger: zap.NewNop()})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Minute)
	f := &fleet{b: b, srv: srv, name: name, dir: b.TempDir(), raw: raw, ctx: ctx, cancel: cancel, locks: map[*simNode]*sync.Mutex{}}
	for i := range n {
		nd := &simNode{name: fmt.Sprintf("node-%04d", i), dir: filepath.Join(f.dir, fmt.Sprint(i)), bootID: fmt.Sprintf("%032x", i)}
		if err := os.MkdirAll(nd.dir, 0o755); err != nil {
			b.Fatal(err)
		}
		f.nodes = append(f.nodes, nd)
		f.locks[nd] = &sync.Mutex{}
	}
	return f
}

func (f *fleet) close() {
	f.cancel()
	f.wg.Wait()
	f.raw.Close()
}

func (f *fleet) config(nd *simNode) config.Config {
	cfg := testConfig(nd.name, f.name, nd.dir, f.mc)
	cfg.Lock.TTL, cfg.Lock.MaxHoldWait = config.Duration(60*time.Second), config.Duration(30*time.Minute)
	cfg.Lock.MaxRebootDuration = config.Duration(30 * time.Minute)
	cfg.Etcd.RequestTimeout = config.Duration(10 * time.Second)
	cfg.AliveTTL = config.Duration(15 * time.Minute)
	cfg.HistoryTTL = config.Duration(120 * time.Second) // buckets of 4 s: expiry within the run
	return cfg
}

// rounds runs r rounds of ticks, each node once per interval, evenly spread.
// Ticks that start a holder keep running (in the background) until the
// reboot; the next tick of such a node finds the holder active.
func (f *fleet) rounds(r int, interval time.Duration) int {
	n := len(f.nodes)
	start := time.Now()
	var wg sync.WaitGroup
	ticks := 0
	for k := range r * n {
		at := start.Add(time.Duration(k) * interval / time.Duration(n))
		if d := time.Until(at); d > 0 {
			time.Sleep(d)
		}
		nd := f.nodes[k%n]
		nd.mu.Lock()
		off := nd.off
		nd.mu.Unlock()
		if off {
			continue
		}
		ticks++
		wg.Add(1)
		f.wg.Add(1)
		done := make(chan struct{})
		go func() {
			defer f.wg.Done()
			f.check(nd, done, false)
		}()
		go func() { // the tick counts until Check returns or its holder starts waiting
			defer wg.Done()
			select {
			case <-done:
			case <-time.After(interval):
			}
		}()
	}
	wg.Wait()
	return ticks
}

// check is one `check --once` with a holder that runs on its own (as the
// transient unit does): the check lock covers the check, not the holder.
// A tick that finds the lock busy is skipped; the post-boot check waits.
func (f *fleet) check(nd *simNode, done chan struct{}, wait bool) {
	defer close(done)
	lk := f.locks[nd]
	if wait {
		lk.Lock()
	} else if !lk.TryLock() {
		f.skipped.Add(1)
		return
	}
	locked := true
	defer func() {
		if locked {
			lk.Unlock()
		}
	}()
	start := time.Now()
	client, err := cluster.Dial(f.ctx, cluster.Options{Endpoints: f.srv.Endpoints(), DialTimeout: 10 * time.Second,
		RequestTimeout: 10 * time.Second, Cluster: f.name})
	if err != nil {
		if f.ctx.Err() == nil {
			f.b.Errorf("%s: dial: %v", nd.name, err)
		}
		return
	}
	defer client.Close()
	p := &simProc{}
	nd.mu.Lock()
	if nd.proc == nil {
		nd.proc = p
	}
	nd.mu.Unlock()
	defer func() {
		nd.mu.Lock()
		if nd.proc == p {
			nd.proc = nil
		}
		nd.mu.Unlock()
	}()
	cfg := f.config(nd)
	w, err := assemble(&cfg, nil, nil, nil)
	if err != nil {
		f.b.Error(err)
		return
	}
	w.lazy.once.Do(func() { w.lazy.c = client })
	w.deps.Host = simHost{nd: nd, p: p}
	w.deps.Holder = simHolder{nd: nd, p: p, hold: &w.fg.hold}
	started := false
	w.deps.Rebooter = rebootFunc(func(string) error {
		nd.mu.Lock()
		nd.off = true
		nd.mu.Unlock()
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			time.Sleep(f.reboot)
			nd.mu.Lock()
			nd.bootID, nd.off, nd.marker = nd.bootID+"+", false, ""
			nd.rebooted++
			nd.mu.Unlock()
			_ = os.Remove(filepath.Join(nd.dir, "reboot-required"))
			f.check(nd, make(chan struct{}), true) // post-boot check at once (OnBootSec)
		}()
		return nil
	})
	coord, err := co.New(w.opts, w.deps)
	if err != nil {
		f.b.Error(err)
		return
	}
	w.fg.hold = func(ctx context.Context) error {
		started = true
		locked = false
		lk.Unlock()
		p.holding.Store(true)
		defer p.holding.Store(false)
		return coord.Hold(ctx)
	}
	err = coord.Check(f.ctx)
	if err != nil && f.ctx.Err() == nil {
		f.b.Errorf("%s: check: %v", nd.name, err)
	}
	if !started {
		f.mu.Lock()
		f.walls = append(f.walls, time.Since(start))
		f.mu.Unlock()
	}
}

func (f *fleet) tickWalls() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := slices.Clone(f.walls)
	slices.Sort(w)
	return w
}

func (f *fleet) rebooted() int {
	n := 0
	for _, nd := range f.nodes {
		nd.mu.Lock()
		if nd.rebooted > 0 && !nd.off {
			n++
		}
		nd.mu.Unlock()
	}
	return n
}

func (f *fleet) count(rel string) int64 {
	p := "/clusterrebootd/" + f.name + rel
	resp, err := f.raw.Get(f.ctx, p, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		f.b.Fatal(err)
	}
	return resp.Count
}

// viewBytes is what a View reads: every key under P except history.
func (f *fleet) viewBytes() int {
	p := "/clusterrebootd/" + f.name
	resp, err := f.raw.Get(f.ctx, p+"/", clientv3.WithRange(p+"/history/"))
	if err != nil {
		f.b.Fatal(err)
	}
	n := 0
	for _, kv := range resp.Kvs {
		n += len(kv.Key) + len(kv.Value)
	}
	return n
}

func (f *fleet) compact() {
	resp, err := f.raw.Get(f.ctx, "/")
	if err != nil {
		f.b.Fatal(err)
	}
	if _, err := f.raw.Compact(f.ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		f.b.Fatal(err)
	}
}

// status measures `status` on the fleet: in-process (View + History), and
// the real binary when CLUSTERREBOOTD_BIN is set.
func (f *fleet) status(b *testing.B, label string) {
	nd := f.nodes[len(f.nodes)-1]
	var walls []time.Duration
	var d etcdDelta
	var out int
	const reps = 10
	for range reps {
		m0 := scrapeEtcd(b, f.srv.ClientURL())
		start := time.Now()
		client, err := cluster.Dial(f.ctx, cluster.Options{Endpoints: f.srv.Endpoints(), Cluster: f.name, RequestTimeout: 10 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		cfg := f.config(nd)
		w, err := assemble(&cfg, nil, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		w.lazy.once.Do(func() { w.lazy.c = client })
		coord, err := co.New(w.opts, w.deps)
		if err != nil {
			b.Fatal(err)
		}
		st, err := coord.Status(f.ctx, 720*time.Hour)
		if err != nil {
			b.Fatal(err)
		}
		var buf bytes.Buffer
		printStatus(&buf, st)
		out = buf.Len()
		_ = writeJSON(io.Discard, st)
		client.Close()
		walls = append(walls, time.Since(start))
		d = addDelta(d, diffEtcd(m0, scrapeEtcd(b, f.srv.ClientURL())))
	}
	slices.Sort(walls)
	p := "/clusterrebootd/" + f.name
	h, err := f.raw.Get(f.ctx, p+"/history/", clientv3.WithPrefix())
	if err != nil {
		b.Fatal(err)
	}
	hb := 0
	for _, kv := range h.Kvs {
		hb += len(kv.Key) + len(kv.Value)
	}
	b.Logf("status   (%s) %d members, in-process (dial + View + History + table), load %s: wall p50 %.1f ms p99 %.1f ms; per call %s; reads %d bytes (View) + %d bytes (%d history records); table %d bytes",
		label, len(f.nodes), loadavg(), ms(pctl(walls, 50)), ms(pctl(walls, 99)), d.per(reps), f.viewBytes(), hb, len(h.Kvs), out)
	bin := os.Getenv("CLUSTERREBOOTD_BIN")
	if bin == "" {
		return
	}
	cfgPath := filepath.Join(f.dir, "status.toml")
	cfgText := fmt.Sprintf("node_name = %q\ncluster = %q\n[etcd]\nendpoints = [%q]\n[metrics]\ntextfile = \"\"\n[paths]\nstate_dir = %q\nrun_dir = %q\n",
		nd.name, f.name, f.srv.ClientURL(), nd.dir, filepath.Join(nd.dir, "run"))
	if err := os.WriteFile(cfgPath, []byte(cfgText), 0o644); err != nil {
		b.Fatal(err)
	}
	walls = walls[:0]
	for range reps {
		start := time.Now()
		o, err := exec.Command(bin, "--config", cfgPath, "status").Output()
		if err != nil {
			b.Fatalf("status: %v: %s", err, o)
		}
		walls = append(walls, time.Since(start))
		out = len(o)
	}
	slices.Sort(walls)
	b.Logf("status   (%s) the binary (%s): wall p50 %.1f ms p99 %.1f ms, %d bytes of output", label, bin, ms(pctl(walls, 50)), ms(pctl(walls, 99)), out)
}
