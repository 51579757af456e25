package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/clusterrebootd/clusterrebootd/lib/cluster"
	co "github.com/clusterrebootd/clusterrebootd/lib/coordinator"
	"github.com/clusterrebootd/clusterrebootd/test/etcdtest"
)

// BenchmarkHandover measures the time from a slot's release to the next
// node's reboot action with 1, 10 and 100 holders waiting on one etcd
// (loopback). The waiting holders run the real Hold (mutex queue, slot watch
// under the lock, gates without a health script, fenced write); only the
// reboot is replaced by a timestamp. Each iteration is one round: K holders
// queue, then K handovers are measured. Reports p50/p99 per handover.
//
//	go test -run '^$' -bench Handover -benchtime 3x ./cmd/clusterrebootd/
func BenchmarkHandover(b *testing.B) {
	srv := etcdtest.Start(b)
	for _, k := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("waiting=%d", k), func(b *testing.B) {
			var samples []time.Duration
			for i := 0; i < b.N; i++ {
				samples = append(samples, handoverRound(b, srv, k, fmt.Sprintf("bench%d-%d-%d", k, i, time.Now().UnixNano()))...)
			}
			slices.Sort(samples)
			q := func(p int) float64 {
				return float64(samples[min(len(samples)*p/100, len(samples)-1)].Microseconds()) / 1000
			}
			b.ReportMetric(q(50), "p50-ms")
			b.ReportMetric(q(99), "p99-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
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

func handoverRound(b *testing.B, srv *etcdtest.Server, k int, name string) []time.Duration {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	opts := cluster.Options{Endpoints: srv.Endpoints(), DialTimeout: 2 * time.Second, RequestTimeout: 5 * time.Second, Cluster: name}
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
	var wg sync.WaitGroup
	dir := b.TempDir()
	for i := range k {
		node := fmt.Sprintf("n%03d", i)
		nd := &simNode{name: node, dir: filepath.Join(dir, node), bootID: node + "-boot"}
		if err := os.MkdirAll(nd.dir, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(nd.dir, "reboot-required"), nil, 0o644); err != nil {
			b.Fatal(err)
		}
		client, err := cluster.Dial(ctx, opts)
		if err != nil {
			b.Fatal(err)
		}
		cfg := testConfig(node, name, nd.dir, 1)
		cfg.Lock.MaxHoldWait = 0 // bounded by ctx
		w, err := assemble(&cfg, nil, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		w.lazy.once.Do(func() { w.lazy.c = client })
		w.deps.Host = simHost{nd: nd, p: &simProc{}}
		w.deps.Rebooter = benchRebooter{node: node, out: reboots}
		coord, err := co.New(w.opts, w.deps)
		if err != nil {
			b.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer client.Close()
			if err := coord.Hold(ctx); err != nil && ctx.Err() == nil {
				b.Errorf("%s: hold: %v", node, err)
			}
		}()
	}
	raw, err := clientv3.New(clientv3.Config{Endpoints: srv.Endpoints(), Logger: zap.NewNop()})
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	for {
		resp, err := raw.Get(ctx, "/clusterrebootd/"+name+"/lock/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			b.Fatal(err)
		}
		if resp.Count == int64(k) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // let the mutex owner reach its slot watch

	b.ResetTimer()
	var samples []time.Duration
	current := "seed"
	for range k {
		snap, err := admin.Snapshot(ctx)
		if err != nil {
			b.Fatal(err)
		}
		i := slices.IndexFunc(snap.Slots, func(s cluster.Slot) bool { return s.Node == current })
		if i < 0 {
			b.Fatalf("slot of %s not found", current)
		}
		start := time.Now()
		if err := admin.ReleaseSlot(ctx, snap.Slots[i], cluster.HistoryEvent{Event: "completed", Node: current, At: start}, time.Hour); err != nil {
			b.Fatal(err)
		}
		select {
		case r := <-reboots:
			samples = append(samples, r.at.Sub(start))
			current = r.node
		case <-ctx.Done():
			b.Fatal("no handover")
		}
	}
	b.StopTimer()
	cancel()
	wg.Wait()
	return samples
}
