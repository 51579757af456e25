package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/clusterrebootd/clusterrebootd/lib/cluster"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	co "github.com/clusterrebootd/clusterrebootd/lib/coordinator"
	"github.com/clusterrebootd/clusterrebootd/test/etcdtest"
)

// BenchmarkHandover measures the time from a slot's release to the next
// node's reboot action with K holders queued on one etcd (loopback). The
// queued holders run the real Hold (mutex queue, slot watch under the lock,
// gates without a health script, fenced write); only the host and the
// reboot are simulated, the reboot by a timestamp. Each iteration is one
// round: K holders queue behind a seed slot, then up to 50 handovers are
// measured (so the queue stays about K long while measuring) and the rest
// of the holders are stopped.
//
// Two release timings: reboot=0s releases the slot as soon as the previous
// node asked for its reboot (back to back, the next holder has only just
// started watching P/slots/); reboot=250ms waits that long first, as a real
// reboot (minutes) always does. The difference is etcd's unsynced-watcher
// path (see docs/performance.md).
//
// Reported: p50/p99 handover, etcd requests, watch messages and events per
// release (from etcd's own /metrics; the bench's own read of the slot is
// subtracted), and where the time goes (median time per coordinator call
// within the handover). Environment:
//
//	CLUSTERREBOOTD_BENCH_QUEUES      queue lengths, default 1,10,100,1000
//	CLUSTERREBOOTD_BENCH_PER_CLIENT  holders sharing one etcd client, default 1
//	CLUSTERREBOOTD_BENCH_REBOOTS     release delays, default 0s,250ms
//
//	go test -run '^$' -bench Handover -benchtime 3x -timeout 60m ./cmd/clusterrebootd/
func BenchmarkHandover(b *testing.B) {
	srv := etcdtest.Start(b)
	perClient := envInt("CLUSTERREBOOTD_BENCH_PER_CLIENT", 1)
	for _, k := range envInts("CLUSTERREBOOTD_BENCH_QUEUES", []int{1, 10, 100, 1000}) {
		for _, delay := range envDurations("CLUSTERREBOOTD_BENCH_REBOOTS", []time.Duration{0, 250 * time.Millisecond}) {
			b.Run(fmt.Sprintf("waiting=%d/reboot=%s", k, delay), func(b *testing.B) {
				var samples []time.Duration
				var per []map[string]time.Duration
				var total etcdDelta
				var releases float64
				var snapBytes int
				for i := 0; i < b.N; i++ {
					r := handoverRound(b, srv, k, perClient, delay, fmt.Sprintf("bench%d-%d-%d", k, i, time.Now().UnixNano()))
					samples = append(samples, r.samples...)
					per = append(per, r.breakdown...)
					releases += float64(len(r.samples))
					snapBytes = r.snapBytes
					total = addDelta(total, r.etcd)
				}
				slices.Sort(samples)
				b.ReportMetric(ms(pctl(samples, 50)), "p50-ms")
				b.ReportMetric(ms(pctl(samples, 99)), "p99-ms")
				b.ReportMetric(total.requests()/releases, "req/release")
				b.ReportMetric(total.Events/releases, "events/release")
				b.ReportMetric(0, "ns/op")
				b.Logf("K=%d reboot=%s handovers=%d holders/client=%d load=%s: p50 %.1f ms p99 %.1f ms max %.1f ms",
					k, delay, len(samples), perClient, loadavg(), ms(pctl(samples, 50)), ms(pctl(samples, 99)), ms(samples[len(samples)-1]))
				b.Logf("  per release: %s", total.per(releases))
				b.Logf("  snapshot (View) size with the queue: %d bytes of keys+values", snapBytes)
				b.Logf("  time inside the handover (next holder's calls): %s", breakdown(per))
			})
		}
	}
}

func addDelta(a, b etcdDelta) etcdDelta {
	if a.Unary == nil {
		return b
	}
	for k, v := range b.Unary {
		a.Unary[k] += v
	}
	for k, v := range b.Streams {
		a.Streams[k] += v
	}
	a.WatchRecv += b.WatchRecv
	a.WatchSent += b.WatchSent
	a.KARecv += b.KARecv
	a.Events += b.Events
	a.Range += b.Range
	a.Txn += b.Txn
	a.Put += b.Put
	a.Delete += b.Delete
	a.Revisions += b.Revisions
	a.CPU += b.CPU
	a.DBSize, a.DBInUse, a.Keys = b.DBSize, b.DBInUse, b.Keys
	return a
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func envInts(name string, def []int) []int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		if v, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && v > 0 {
			out = append(out, v)
		}
	}
	return out
}

func envDurations(name string, def []time.Duration) []time.Duration {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	var out []time.Duration
	for _, f := range strings.Split(s, ",") {
		if v, err := time.ParseDuration(strings.TrimSpace(f)); err == nil && v >= 0 {
			out = append(out, v)
		}
	}
	return out
}

// benchRebooter timestamps the reboot action.
type benchRebooter struct {
	node string
	out  chan<- rebootAt
}

type rebootAt struct {
	node string
	at   time.Time
}

func (r benchRebooter) Reboot(context.Context, string) error {
	r.out <- rebootAt{r.node, time.Now()}
	return nil
}

type roundResult struct {
	samples   []time.Duration
	breakdown []map[string]time.Duration
	etcd      etcdDelta
	snapBytes int
}

// benchHolderConfig is a queued holder's configuration: testConfig with a
// production-like lock TTL (keepalive every TTL/3; 2 s would make 1000
// holders send 1500 keepalives per second) and no hold deadline.
func benchHolderConfig(node, name, dir string, maxConcurrent int) config.Config {
	cfg := testConfig(node, name, dir, maxConcurrent)
	cfg.Lock.MaxHoldWait = 0 // bounded by ctx
	cfg.Lock.TTL = config.Duration(60 * time.Second)
	cfg.Etcd.RequestTimeout = config.Duration(10 * time.Second)
	return cfg
}

// maxMeasured bounds the handovers measured per round: the queue stays
// about K long while measuring, and K=1000 does not take 1000 handovers.
const maxMeasured = 50

func handoverRound(b *testing.B, srv *etcdtest.Server, k, perClient int, delay time.Duration, name string) roundResult {
	b.Helper()
	b.StopTimer()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	opts := cluster.Options{Endpoints: srv.Endpoints(), DialTimeout: 5 * time.Second, RequestTimeout: 10 * time.Second, Cluster: name}
	admin, err := cluster.Dial(ctx, opts)
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close()
	// A first node holds the only slot; everybody else queues behind it.
	sess, err := admin.NewSession(ctx, 10*time.Second, cluster.LockInfo{Node: "seed", PID: 1, BootID: "seed-boot"})
	if err != nil {
		b.Fatal(err)
	}
	if err := sess.Lock(ctx); err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	if _, err := sess.AcquireSlot(ctx, cluster.Slot{Node: "seed", BootID: "seed-boot", Reason: "bench", AcquiredAt: now, Deadline: now.Add(time.Hour)},
		cluster.HistoryEvent{Event: "slot-taken", Node: "seed", At: now}, time.Hour); err != nil {
		b.Fatal(err)
	}
	_ = sess.Unlock(ctx)
	_ = sess.Close(ctx)

	reboots := make(chan rebootAt, k)
	tr := &tracer{}
	hctx, stopHolders := context.WithCancel(ctx)
	defer stopHolders()
	var wg sync.WaitGroup
	var clients []*cluster.Client
	defer func() {
		stopHolders()
		wg.Wait()
		for _, c := range clients {
			c.Close()
		}
	}()
	dir := b.TempDir()
	var client *cluster.Client
	for i := range k {
		node := fmt.Sprintf("n%04d", i)
		nd := &simNode{name: node, dir: filepath.Join(dir, node), bootID: node + "-boot"}
		if err := os.MkdirAll(nd.dir, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(nd.dir, "reboot-required"), nil, 0o644); err != nil {
			b.Fatal(err)
		}
		if i%perClient == 0 {
			if client, err = cluster.Dial(ctx, opts); err != nil {
				b.Fatal(err)
			}
			clients = append(clients, client)
		}
		cfg := benchHolderConfig(node, name, nd.dir, 1)
		w, err := assemble(&cfg, nil, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		c := client
		w.lazy.once.Do(func() { w.lazy.c = c })
		w.deps.Cluster = traceCluster{Cluster: w.deps.Cluster, node: node, tr: tr}
		w.deps.Host = simHost{nd: nd, p: &simProc{}}
		w.deps.Rebooter = benchRebooter{node: node, out: reboots}
		coord, err := co.New(w.opts, w.deps)
		if err != nil {
			b.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := coord.Hold(hctx); err != nil && hctx.Err() == nil {
				b.Errorf("%s: hold: %v", node, err)
			}
		}()
	}
	raw, err := clientv3.New(clientv3.Config{Endpoints: srv.Endpoints(), Logger: zap.NewNop()})
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	prefix := "/clusterrebootd/" + name
	for {
		resp, err := raw.Get(ctx, prefix+"/lock/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			b.Fatal(err)
		}
		if resp.Count == int64(k) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // the mutex owner reaches its slot watch, watchers get synced
	all, err := raw.Get(ctx, prefix+"/", clientv3.WithRange(prefix+"/history/"))
	if err != nil {
		b.Fatal(err)
	}
	res := roundResult{}
	for _, kv := range all.Kvs {
		res.snapBytes += len(kv.Key) + len(kv.Value)
	}

	m := min(k, maxMeasured)
	if k > 1 {
		m = min(k-1, maxMeasured) // a next release exists after the last measured one
	}
	before := scrapeEtcd(b, srv.ClientURL())
	current := "seed"
	release := func() time.Time {
		g, err := raw.Get(ctx, prefix+"/slots/"+current)
		if err != nil || len(g.Kvs) != 1 {
			b.Fatalf("slot of %s: %v (%d keys)", current, err, len(g.Kvs))
		}
		start := time.Now()
		if err := admin.ReleaseSlot(ctx, cluster.Slot{Node: current, ModRevision: g.Kvs[0].ModRevision},
			cluster.HistoryEvent{Event: "completed", Node: current, At: start}, time.Hour); err != nil {
			b.Fatal(err)
		}
		return start
	}
	b.StartTimer()
	for range m {
		start := release()
		select {
		case r := <-reboots:
			res.samples = append(res.samples, r.at.Sub(start))
			res.breakdown = append(res.breakdown, tr.window(r.node, start, r.at))
			current = r.node
		case <-ctx.Done():
			b.Fatal("no handover")
		}
		time.Sleep(delay)
	}
	b.StopTimer()
	if k == 1 {
		time.Sleep(300 * time.Millisecond) // the holder closes its session
	}
	after := scrapeEtcd(b, srv.ClientURL())
	res.etcd = diffEtcd(before, after)
	res.etcd.Unary["Range"] -= float64(m) // the bench's own read of each slot
	return res
}
