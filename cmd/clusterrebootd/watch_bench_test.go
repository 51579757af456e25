package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/clusterrebootd/clusterrebootd/test/etcdtest"
)

// BenchmarkWatchStartRevision isolates the ~100 ms seen in back-to-back
// handovers: an etcd watch whose start revision is not in the future
// (WithRev(r) with r <= the store's current revision, as lib/cluster's
// WaitChange uses after a snapshot whenever anything was written since) is
// put in the server's "unsynced" watcher group, which a background loop
// catches up only every 100 ms (watchResyncPeriod in
// go.etcd.io/etcd/server/v3/storage/mvcc/watchable_store.go). An event that
// happens while the watcher is unsynced waits for that loop. A watch from
// "now" (no revision) is synced at once.
//
// Each sample: read the revision, write another key (as the holder's alive
// publish does), open the watch, wait for its creation, write the watched
// key, measure until the event arrives.
func BenchmarkWatchStartRevision(b *testing.B) {
	srv := etcdtest.Start(b)
	cli, err := clientv3.New(clientv3.Config{Endpoints: srv.Endpoints(), Logger: zap.NewNop()})
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	for _, past := range []bool{false, true} {
		name := "from=now"
		if past {
			name = "from=snapshot-revision+1"
		}
		b.Run(name, func(b *testing.B) {
			var samples []time.Duration
			for i := 0; i < b.N; i++ {
				for j := range 20 {
					samples = append(samples, watchDelay(b, cli, past, fmt.Sprintf("/bench/watch/%d/%d", i, j)))
					time.Sleep(time.Duration(rand.IntN(50)) * time.Millisecond) // random phase against the 100 ms loop
				}
			}
			slices.Sort(samples)
			b.ReportMetric(ms(pctl(samples, 50)), "p50-ms")
			b.ReportMetric(ms(pctl(samples, 99)), "p99-ms")
			b.ReportMetric(0, "ns/op")
			b.Logf("%s: %d samples, load %s: p50 %.2f ms p99 %.2f ms max %.2f ms", name, len(samples), loadavg(),
				ms(pctl(samples, 50)), ms(pctl(samples, 99)), ms(samples[len(samples)-1]))
		})
	}
}

func watchDelay(b *testing.B, cli *clientv3.Client, past bool, key string) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	snap, err := cli.Get(ctx, key)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := cli.Put(ctx, key+"-other", "x"); err != nil { // the holder's own alive publish
		b.Fatal(err)
	}
	opts := []clientv3.OpOption{clientv3.WithCreatedNotify()}
	if past {
		opts = append(opts, clientv3.WithRev(snap.Header.Revision+1))
	}
	wch := cli.Watch(ctx, key, opts...)
	if wr := <-wch; !wr.Created {
		b.Fatalf("watch not created: %v", wr.Err())
	}
	start := time.Now()
	if _, err := cli.Put(ctx, key, "v"); err != nil {
		b.Fatal(err)
	}
	for wr := range wch {
		if len(wr.Events) > 0 {
			return time.Since(start)
		}
	}
	b.Fatal("watch closed")
	return 0
}
