package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
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

// BenchmarkRollout measures the makespan of a whole rollout: N simulated
// nodes all need a reboot at t0, each reboot takes exactly R (simulated: the
// node is "off" for R, then boots with a new boot id and runs its post-boot
// check at once, as OnBootSec does), no gates, no soak. The physical limit
// is ceil(N/max_concurrent) × R; the overhead is what coordination adds.
//
// mode=watch is clusterrebootd: the real Check and Hold (foreground holder,
// lib/coordinator + lib/cluster + the real etcd); waiting holders queue on
// the mutex and wake on the slot release (etcd watch).
//
// mode=poll and mode=poll-aligned are the polling baseline on the same etcd,
// in the style of locksmith: a semaphore key holding the list of holders,
// taken and given back by compare-and-swap (2 requests per attempt); a
// waiting node tries once per check interval P. poll gives every node's
// timer a random phase (RandomizedDelaySec), poll-aligned fires all timers
// on the same grid (OnCalendar without randomisation).
//
// For watch it also logs the start-up, post-boot and handover percentiles
// and the makespan's critical path: start-up + handovers + reboots + post-boot
// checks along the chain of events that ended the rollout, with the median
// time per traced call (criticalPath).
//
// Environment: CLUSTERREBOOTD_BENCH_NODES (default 10,50),
// CLUSTERREBOOTD_BENCH_MAXCONC (1,2,5), CLUSTERREBOOTD_BENCH_REBOOT (R, 1s),
// CLUSTERREBOOTD_BENCH_POLL (P, 1s), CLUSTERREBOOTD_BENCH_MODES
// (watch,poll,poll-aligned), CLUSTERREBOOTD_BENCH_COLD (set: the watch
// rollout starts on an empty cluster instead of a fleet that has ticked
// once, with members and alive records).
//
//	go test -run '^$' -bench Rollout -benchtime 1x -timeout 60m ./cmd/clusterrebootd/
func BenchmarkRollout(b *testing.B) {
	srv := etcdtest.Start(b)
	reboot := envDurations("CLUSTERREBOOTD_BENCH_REBOOT", []time.Duration{time.Second})[0]
	poll := envDurations("CLUSTERREBOOTD_BENCH_POLL", []time.Duration{time.Second})[0]
	modes := []string{"watch", "poll", "poll-aligned"}
	if s := os.Getenv("CLUSTERREBOOTD_BENCH_MODES"); s != "" {
		modes = splitList(s)
	}
	for _, n := range envInts("CLUSTERREBOOTD_BENCH_NODES", []int{10, 50}) {
		for _, mc := range envInts("CLUSTERREBOOTD_BENCH_MAXCONC", []int{1, 2, 5}) {
			for _, mode := range modes {
				b.Run(fmt.Sprintf("nodes=%d/max=%d/mode=%s", n, mc, mode), func(b *testing.B) {
					limit := time.Duration((n+mc-1)/mc) * reboot
					var spans []time.Duration
					var reqs float64
					for i := 0; i < b.N; i++ {
						name := fmt.Sprintf("roll%d-%d-%s-%d", n, mc, mode, time.Now().UnixNano())
						before := scrapeEtcd(b, srv.ClientURL())
						var span time.Duration
						if mode == "watch" {
							span = rolloutWatch(b, srv, name, n, mc, reboot)
						} else {
							span = rolloutPoll(b, srv, name, n, mc, reboot, poll, mode == "poll-aligned")
						}
						d := diffEtcd(before, scrapeEtcd(b, srv.ClientURL()))
						reqs += d.requests()
						spans = append(spans, span)
					}
					slices.Sort(spans)
					med := pctl(spans, 50)
					over := float64(med-limit) / float64(limit) * 100
					b.ReportMetric(med.Seconds(), "makespan-s")
					b.ReportMetric(over, "overhead-%")
					b.ReportMetric(med.Seconds()/limit.Seconds(), "ratio")
					b.ReportMetric(reqs/float64(b.N), "etcd-req/rollout")
					b.ReportMetric(0, "ns/op")
					b.Logf("nodes=%d max=%d mode=%s R=%s P=%s load=%s: makespan %s (runs %v), limit %s, overhead %.2f%% (%.0f ms per wave), etcd requests %.0f",
						n, mc, mode, reboot, poll, loadavg(), med.Round(time.Millisecond), spans, limit, over,
						ms(med-limit)/float64((n+mc-1)/mc), reqs/float64(b.N))
				})
			}
		}
	}
}

func splitList(s string) []string {
	var out []string
	for _, f := range slices.Collect(func(yield func(string) bool) {
		start := 0
		for i := 0; i <= len(s); i++ {
			if i == len(s) || s[i] == ',' {
				if !yield(s[start:i]) {
					return
				}
				start = i + 1
			}
		}
	}) {
		if f != "" {
			out = append(out, f)
		}
	}
	return out
}

// rolloutWatch runs the rollout with the real coordinator and returns the
// time from t0 to the last slot release.
func rolloutWatch(b *testing.B, srv *etcdtest.Server, name string, n, mc int, reboot time.Duration) time.Duration {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	dir := b.TempDir()
	var (
		mu       sync.Mutex
		released = map[string]time.Time{}
		calls    []rebootAt // reboot calls
		callOf   = map[string]time.Time{}
		boots    = map[string]time.Time{}
		wg       sync.WaitGroup
		done     = make(chan struct{})
		tr       = &tracer{}
	)
	nodes := make([]*simNode, n)
	for i := range nodes {
		nd := &simNode{name: fmt.Sprintf("n%03d", i), dir: filepath.Join(dir, fmt.Sprint(i)), bootID: randomID(rand.New(rand.NewPCG(uint64(i), 7)))}
		if err := os.MkdirAll(nd.dir, 0o755); err != nil {
			b.Fatal(err)
		}
		nodes[i] = nd
	}
	var check func(nd *simNode)
	check = func(nd *simNode) {
		p := &simProc{}
		dialStart := time.Now()
		client, err := cluster.Dial(ctx, cluster.Options{Endpoints: srv.Endpoints(), DialTimeout: 5 * time.Second,
			RequestTimeout: 10 * time.Second, Cluster: name})
		tr.add(nd.name, "Dial", dialStart)
		if err != nil {
			b.Errorf("%s: dial: %v", nd.name, err)
			return
		}
		defer client.Close()
		nd.mu.Lock()
		nd.proc = p
		nd.mu.Unlock()
		cfg := testConfig(nd.name, name, nd.dir, mc)
		cfg.Lock.TTL, cfg.Lock.MaxHoldWait = config.Duration(60*time.Second), config.Duration(30*time.Minute)
		cfg.Lock.MaxRebootDuration = config.Duration(30 * time.Minute)
		cfg.Etcd.RequestTimeout = config.Duration(10 * time.Second)
		w, err := assemble(&cfg, nil, nil, nil)
		if err != nil {
			b.Error(err)
			return
		}
		w.lazy.once.Do(func() { w.lazy.c = client })
		w.deps.Cluster = traceCluster{Cluster: w.deps.Cluster, node: nd.name, tr: tr}
		w.deps.Host = simHost{nd: nd, p: p}
		w.deps.Holder = simHolder{nd: nd, p: p, hold: &w.fg.hold}
		w.deps.Rebooter = rebootFunc(func(string) error {
			nd.mu.Lock()
			nd.off = true
			nd.mu.Unlock()
			mu.Lock()
			calls = append(calls, rebootAt{nd.name, time.Now()})
			callOf[nd.name] = calls[len(calls)-1].at
			mu.Unlock()
			wg.Add(1)
			go func() { // the node is down for R, then boots and checks at once
				defer wg.Done()
				time.Sleep(reboot)
				nd.mu.Lock()
				nd.bootID, nd.off, nd.marker = nd.bootID+"+", false, ""
				nd.rebooted++
				nd.mu.Unlock()
				mu.Lock()
				boots[nd.name] = time.Now()
				mu.Unlock()
				_ = os.Remove(filepath.Join(nd.dir, "reboot-required"))
				check(nd)
			}()
			return nil
		})
		coord, err := co.New(w.opts, w.deps)
		if err != nil {
			b.Error(err)
			return
		}
		w.fg.hold = coord.Hold
		err = coord.Check(ctx)
		if err != nil && ctx.Err() == nil {
			b.Errorf("%s: check: %v", nd.name, err)
		}
		nd.mu.Lock()
		rebooted := nd.rebooted > 0
		nd.mu.Unlock()
		if rebooted { // the post-boot check released the slot
			mu.Lock()
			released[nd.name] = time.Now()
			if len(released) == n {
				close(done)
			}
			mu.Unlock()
		}
	}
	// A fleet has been ticking before its updates land: every node is a
	// member with an alive record (on its lease) when the rollout starts.
	// CLUSTERREBOOTD_BENCH_COLD=1 starts from an empty cluster instead.
	if os.Getenv("CLUSTERREBOOTD_BENCH_COLD") == "" {
		for _, nd := range nodes {
			wg.Add(1)
			go func() { defer wg.Done(); check(nd) }()
		}
		wg.Wait()
		tr.mu.Lock()
		tr.ops = nil
		tr.mu.Unlock()
	}
	for _, nd := range nodes {
		if err := os.WriteFile(filepath.Join(nd.dir, "reboot-required"), nil, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	t0 := time.Now()
	for _, nd := range nodes {
		wg.Add(1)
		go func() { defer wg.Done(); check(nd) }()
	}
	select {
	case <-done:
	case <-ctx.Done():
		b.Fatal("rollout did not finish")
	}
	wg.Wait()
	var last time.Time
	var postBoot, handover []time.Duration
	var relTimes []time.Time
	// The moment each slot was released: the start of the ReleaseSlot call
	// (the next holder may be woken, decide and call Reboot before the
	// releasing goroutine sees its Txn's answer on a busy machine).
	for _, o := range tr.ops {
		if o.op == "ReleaseSlot" {
			released[o.node] = o.start
		}
	}
	for node, t := range released {
		if t.After(last) {
			last = t
		}
		postBoot = append(postBoot, t.Sub(boots[node]))
		relTimes = append(relTimes, t)
	}
	slices.SortFunc(relTimes, time.Time.Compare)
	slices.SortFunc(calls, func(a, b rebootAt) int { return a.at.Compare(b.at) })
	for _, c := range calls[min(mc, len(calls)):] {
		// the release that freed this slot: the latest one before the call
		i, _ := slices.BinarySearchFunc(relTimes, c.at, time.Time.Compare)
		if i > 0 {
			handover = append(handover, c.at.Sub(relTimes[i-1]))
		}
	}
	slices.Sort(postBoot)
	slices.Sort(handover)
	b.Logf("  watch: start-up (t0 to first reboot call) %.1f ms; post-boot check (boot to release) p50 %.1f p99 %.1f ms; handover (release to next reboot call) p50 %.1f p99 %.1f ms",
		ms(calls[0].at.Sub(t0)), ms(pctl(postBoot, 50)), ms(pctl(postBoot, 99)), ms(pctl(handover, 50)), ms(pctl(handover, 99)))
	criticalPath(b, tr, t0, reboot, n, mc, released, boots, callOf, last)
	return last.Sub(t0)
}

// criticalPath decomposes the makespan along the chain of events that
// ended it: the last release ← its node's boot ← its reboot call ← the
// release that freed the slot for that call ← … ← the first wave's call ←
// t0. makespan = start-up + Σ handover + Σ (reboot R + its timer jitter) +
// Σ post-boot check, exactly; the overhead over the limit is everything but
// ⌈N/max⌉·R. Per phase it also prints the median time in each traced call
// (the rest of a phase is local work, gates and scheduling).
func criticalPath(b *testing.B, tr *tracer, t0 time.Time, reboot time.Duration, n, mc int,
	released, boots, callOf map[string]time.Time, last time.Time) {
	b.Helper()
	type rel struct {
		node string
		at   time.Time
	}
	var rels []rel
	for node, at := range released {
		rels = append(rels, rel{node, at})
	}
	slices.SortFunc(rels, func(a, b rel) int { return a.at.Compare(b.at) })
	node := slices.MaxFunc(rels, func(a, b rel) int { return a.at.Compare(b.at) }).node
	var startup, hand, post, jitter time.Duration
	var hands, posts []map[string]time.Duration
	waves := 0
	for {
		waves++
		post += released[node].Sub(boots[node])
		posts = append(posts, tr.window(node, boots[node], released[node]))
		jitter += boots[node].Sub(callOf[node]) - reboot
		call := callOf[node]
		i, _ := slices.BinarySearchFunc(rels, call, func(r rel, t time.Time) int { return r.at.Compare(t) })
		if i == 0 {
			startup = call.Sub(t0)
			hands = append(hands, tr.window(node, t0, call))
			break
		}
		prev := rels[i-1]
		hand += call.Sub(prev.at)
		hands = append(hands, tr.window(node, prev.at, call))
		node = prev.node
	}
	limit := time.Duration((n+mc-1)/mc) * reboot
	b.Logf("  critical path: %d waves; makespan %.1f ms = start-up %.1f + handovers %.1f + reboots %d×R + timer jitter %.1f + post-boot checks %.1f; overhead over the limit %.1f ms",
		waves, ms(last.Sub(t0)), ms(startup), ms(hand), waves, ms(jitter), ms(post), ms(last.Sub(t0)-limit))
	b.Logf("    start-up + handovers on the path, per call: %s", breakdown(hands))
	b.Logf("    post-boot checks on the path, per call: %s", breakdown(posts))
}

// rolloutPoll is the polling baseline: a semaphore key with the holders'
// names, compare-and-swap, one attempt per node per poll interval.
func rolloutPoll(b *testing.B, srv *etcdtest.Server, name string, n, mc int, reboot, poll time.Duration, aligned bool) time.Duration {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	cli, err := clientv3.New(clientv3.Config{Endpoints: srv.Endpoints(), Logger: zap.NewNop()})
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	sem := "/clusterrebootd/" + name + "/semaphore"
	// modify applies f to the holder list by compare-and-swap: 2 requests
	// (Get, Txn) per attempt, retried on a lost race.
	modify := func(f func([]string) ([]string, bool)) (bool, error) {
		for {
			g, err := cli.Get(ctx, sem)
			if err != nil {
				return false, err
			}
			var holders []string
			var rev int64
			if len(g.Kvs) == 1 {
				rev = g.Kvs[0].ModRevision
				if err := json.Unmarshal(g.Kvs[0].Value, &holders); err != nil {
					return false, err
				}
			}
			next, ok := f(holders)
			if !ok {
				return false, nil
			}
			val, _ := json.Marshal(next)
			t, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(sem), "=", rev)).Then(clientv3.OpPut(sem, string(val))).Commit()
			if err != nil {
				return false, err
			}
			if t.Succeeded {
				return true, nil
			}
		}
	}
	t0 := time.Now()
	var wg sync.WaitGroup
	ends := make([]time.Time, n)
	errs := make(chan error, n)
	for i := range n {
		node := fmt.Sprintf("n%03d", i)
		phase := time.Duration(rand.Int64N(int64(poll)))
		if aligned {
			phase = 0
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// ticks at t0 + phase + k·P
			for k := 0; ; k++ {
				if d := time.Until(t0.Add(phase + time.Duration(k)*poll)); d > 0 {
					time.Sleep(d)
				}
				ok, err := modify(func(h []string) ([]string, bool) {
					if len(h) >= mc {
						return nil, false
					}
					return append(h, node), true
				})
				if err != nil {
					errs <- err
					return
				}
				if !ok {
					continue
				}
				time.Sleep(reboot) // down; the post-boot check gives the slot back at once
				if _, err := modify(func(h []string) ([]string, bool) {
					return slices.DeleteFunc(h, func(s string) bool { return s == node }), true
				}); err != nil {
					errs <- err
					return
				}
				ends[i] = time.Now()
				return
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := errors.Join(slices.Collect(func(yield func(error) bool) {
		for e := range errs {
			if !yield(e) {
				return
			}
		}
	})...); err != nil {
		b.Fatal(err)
	}
	return slices.MaxFunc(ends, func(a, b time.Time) int { return a.Compare(b) }).Sub(t0)
}
