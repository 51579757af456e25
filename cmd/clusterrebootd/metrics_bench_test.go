package main

// Helpers shared by the benchmarks: etcd's own Prometheus counters (scraped
// from the member's client URL, which serves /metrics), percentiles, and a
// tracing decorator of the coordinator's cluster port that records when each
// etcd-facing call started and ended.

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	co "github.com/clusterrebootd/clusterrebootd/lib/coordinator"
)

// etcdMetrics is one scrape: metric name with its labels → value.
type etcdMetrics map[string]float64

func scrapeEtcd(tb testing.TB, clientURL string) etcdMetrics {
	tb.Helper()
	hc := &http.Client{Timeout: 10 * time.Second}
	resp, err := hc.Get(clientURL + "/metrics")
	if err != nil {
		tb.Fatalf("scrape %s/metrics: %v", clientURL, err)
	}
	defer resp.Body.Close()
	m := etcdMetrics{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		m[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		tb.Fatalf("scrape: %v", err)
	}
	return m
}

// sum adds every series of name whose labels contain all of the given
// label="value" fragments.
func (m etcdMetrics) sum(name string, labels ...string) float64 {
	var t float64
	for k, v := range m {
		base, lab, _ := strings.Cut(k, "{")
		if base != name {
			continue
		}
		ok := true
		for _, l := range labels {
			if !strings.Contains(lab, l) {
				ok = false
				break
			}
		}
		if ok {
			t += v
		}
	}
	return t
}

// etcdDelta is what etcd did between two scrapes.
type etcdDelta struct {
	Unary     map[string]float64 // unary RPCs started, by gRPC method
	Streams   map[string]float64 // streams opened (Watch, LeaseKeepAlive)
	WatchRecv float64            // watch create/cancel requests received
	WatchSent float64            // watch responses sent (events batches, created, cancelled)
	KARecv    float64            // lease keepalive messages received (background keepalives + KeepAliveOnce)
	Events    float64            // events delivered to watchers (etcd_debugging_mvcc_events_total)
	Range     float64            // etcd_mvcc_range_total
	Txn       float64            // etcd_mvcc_txn_total
	Put       float64            // etcd_mvcc_put_total
	Delete    float64            // etcd_mvcc_delete_total
	Revisions float64            // etcd_debugging_mvcc_current_revision
	CPU       float64            // etcd process CPU seconds
	DBSize    float64            // etcd_mvcc_db_total_size_in_bytes at the end
	DBInUse   float64            // etcd_mvcc_db_total_size_in_use_in_bytes at the end
	Keys      float64            // etcd_debugging_mvcc_keys_total at the end
}

var unaryMethods = []string{"Range", "Txn", "Put", "DeleteRange", "LeaseGrant", "LeaseRevoke", "LeaseTimeToLive", "LeaseLeases", "Compact", "Status"}

func diffEtcd(a, b etcdMetrics) etcdDelta {
	d := etcdDelta{Unary: map[string]float64{}, Streams: map[string]float64{}}
	for _, m := range unaryMethods {
		if v := b.sum("grpc_server_started_total", `grpc_method="`+m+`"`) - a.sum("grpc_server_started_total", `grpc_method="`+m+`"`); v != 0 {
			d.Unary[m] = v
		}
	}
	for _, m := range []string{"Watch", "LeaseKeepAlive"} {
		if v := b.sum("grpc_server_started_total", `grpc_method="`+m+`"`) - a.sum("grpc_server_started_total", `grpc_method="`+m+`"`); v != 0 {
			d.Streams[m] = v
		}
	}
	diff := func(name string, labels ...string) float64 { return b.sum(name, labels...) - a.sum(name, labels...) }
	d.WatchRecv = diff("grpc_server_msg_received_total", `grpc_method="Watch"`)
	d.WatchSent = diff("grpc_server_msg_sent_total", `grpc_method="Watch"`)
	d.KARecv = diff("grpc_server_msg_received_total", `grpc_method="LeaseKeepAlive"`)
	d.Events = diff("etcd_debugging_mvcc_events_total")
	d.Range = diff("etcd_mvcc_range_total")
	d.Txn = diff("etcd_mvcc_txn_total")
	d.Put = diff("etcd_mvcc_put_total")
	d.Delete = diff("etcd_mvcc_delete_total")
	d.Revisions = diff("etcd_debugging_mvcc_current_revision")
	d.CPU = diff("process_cpu_seconds_total")
	d.DBSize = b.sum("etcd_mvcc_db_total_size_in_bytes")
	d.DBInUse = b.sum("etcd_mvcc_db_total_size_in_use_in_bytes")
	d.Keys = b.sum("etcd_debugging_mvcc_keys_total")
	return d
}

// requests is every unary RPC plus every stream opened.
func (d etcdDelta) requests() float64 {
	var t float64
	for _, v := range d.Unary {
		t += v
	}
	for _, v := range d.Streams {
		t += v
	}
	return t
}

// per formats the counters divided by n.
func (d etcdDelta) per(n float64) string {
	var parts []string
	keys := make([]string, 0, len(d.Unary))
	for k := range d.Unary {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.2f", k, d.Unary[k]/n))
	}
	for _, k := range []string{"Watch", "LeaseKeepAlive"} {
		if v := d.Streams[k]; v != 0 {
			parts = append(parts, fmt.Sprintf("%s-stream %.2f", k, v/n))
		}
	}
	return fmt.Sprintf("requests %.2f (%s); watch msgs in %.2f out %.2f; watch events %.2f; keepalive msgs %.2f; revisions %.2f; etcd cpu %.2f ms",
		d.requests()/n, strings.Join(parts, ", "), d.WatchRecv/n, d.WatchSent/n, d.Events/n, d.KARecv/n, d.Revisions/n, 1000*d.CPU/n)
}

// pctl is the p-th percentile (nearest rank) of sorted samples.
func pctl(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p/100+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// loadavg is /proc/loadavg's first three fields, recorded with every number.
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

// tracer records the etcd-facing calls of every coordinator.
type tracer struct {
	mu  sync.Mutex
	ops []traceOp
}

type traceOp struct {
	node, op   string
	start, end time.Time
}

func (t *tracer) add(node, op string, start time.Time) {
	end := time.Now()
	t.mu.Lock()
	t.ops = append(t.ops, traceOp{node, op, start, end})
	t.mu.Unlock()
}

// window sums, per operation, the time node spent in it within [from, to].
func (t *tracer) window(node string, from, to time.Time) map[string]time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]time.Duration{}
	for _, o := range t.ops {
		if o.node != node || o.end.Before(from) || o.start.After(to) {
			continue
		}
		s, e := o.start, o.end
		if s.Before(from) {
			s = from
		}
		if e.After(to) {
			e = to
		}
		out[o.op] += e.Sub(s)
	}
	return out
}

// breakdown prints the median per operation over all handovers.
func breakdown(per []map[string]time.Duration) string {
	all := map[string][]time.Duration{}
	for _, m := range per {
		for k, v := range m {
			all[k] = append(all[k], v)
		}
	}
	keys := make([]string, 0, len(all))
	for k := range all {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		v := all[k]
		for len(v) < len(per) { // handovers in which the op did not occur
			v = append(v, 0)
		}
		slices.Sort(v)
		parts = append(parts, fmt.Sprintf("%s p50 %.1f p99 %.1f", k, ms(pctl(v, 50)), ms(pctl(v, 99))))
	}
	return strings.Join(parts, "; ")
}

// traceCluster is the coordinator's cluster port with every call timed.
type traceCluster struct {
	co.Cluster
	node string
	tr   *tracer
}

func (c traceCluster) View(ctx context.Context) (co.View, error) {
	defer c.tr.add(c.node, "View", time.Now())
	return c.Cluster.View(ctx)
}

func (c traceCluster) NodeView(ctx context.Context, node string) (co.View, error) {
	defer c.tr.add(c.node, "View", time.Now())
	return c.Cluster.NodeView(ctx, node)
}

func (c traceCluster) GateView(ctx context.Context) (co.View, error) {
	defer c.tr.add(c.node, "View", time.Now())
	return c.Cluster.GateView(ctx)
}

func (c traceCluster) QueueView(ctx context.Context) (co.View, error) {
	defer c.tr.add(c.node, "QueueView", time.Now())
	return c.Cluster.QueueView(ctx)
}

func (c traceCluster) PublishAlive(ctx context.Context, a co.Alive) error {
	defer c.tr.add(c.node, "PublishAlive", time.Now())
	return c.Cluster.PublishAlive(ctx, a)
}

func (c traceCluster) AppendHistory(ctx context.Context, ev co.HistoryEvent) error {
	defer c.tr.add(c.node, "AppendHistory", time.Now())
	return c.Cluster.AppendHistory(ctx, ev)
}

func (c traceCluster) ReleaseSlot(ctx context.Context, s co.Slot, ev co.HistoryEvent) error {
	defer c.tr.add(c.node, "ReleaseSlot", time.Now())
	return c.Cluster.ReleaseSlot(ctx, s, ev)
}

func (c traceCluster) WaitChange(ctx context.Context, w co.Watch, afterRev int64) error {
	defer c.tr.add(c.node, "WaitChange(watch)", time.Now())
	return c.Cluster.WaitChange(ctx, w, afterRev)
}

func (c traceCluster) NewSession(ctx context.Context, info co.LockInfo) (co.Session, error) {
	defer c.tr.add(c.node, "NewSession", time.Now())
	s, err := c.Cluster.NewSession(ctx, info)
	if err != nil {
		return nil, err
	}
	return traceSession{Session: s, node: c.node, tr: c.tr}, nil
}

type traceSession struct {
	co.Session
	node string
	tr   *tracer
}

func (s traceSession) Lock(ctx context.Context) error {
	defer s.tr.add(s.node, "Lock(queue)", time.Now())
	return s.Session.Lock(ctx)
}

func (s traceSession) Unlock(ctx context.Context) error {
	defer s.tr.add(s.node, "Unlock", time.Now())
	return s.Session.Unlock(ctx)
}

func (s traceSession) AcquireSlot(ctx context.Context, sl co.Slot, ev co.HistoryEvent) (co.Slot, error) {
	defer s.tr.add(s.node, "AcquireSlot", time.Now())
	return s.Session.AcquireSlot(ctx, sl, ev)
}

func (s traceSession) Close(ctx context.Context) error {
	defer s.tr.add(s.node, "SessionClose", time.Now())
	return s.Session.Close(ctx)
}
