package cluster

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/test/etcdtest"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// An etcd whose backend quota is reached refuses writes (NOSPACE alarm):
// every write of ours fails as ErrUnavailable with a message that tells the
// operator what to do, and nothing is half-written.
func TestNoSpaceIsUnavailable(t *testing.T) {
	srv := etcdtest.StartWith(t, etcdtest.Options{QuotaBackendBytes: 1 << 20})
	c := dial(t, srv, testCluster)
	ctx := ctxT(t)
	raw, err := clientv3.New(clientv3.Config{Endpoints: srv.Endpoints(), DialTimeout: 5 * time.Second, Logger: newZapLogger(discard())})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if err := c.Register(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	fill := strings.Repeat("x", 64<<10)
	for i := 0; ; i++ {
		_, err := raw.Put(ctx, "/filler/"+string(rune('a'+i%26))+strings.Repeat("y", i/26), fill)
		if errors.Is(err, rpctypes.ErrNoSpace) {
			break
		}
		if err != nil {
			t.Fatalf("filling etcd: %v", err)
		}
		if i > 1000 {
			t.Fatal("quota of 1 MiB never reached")
		}
	}

	err = c.PublishAlive(ctx, testAlive("n1"), time.Minute)
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "out of space") {
		t.Fatalf("PublishAlive on a full etcd: %v, want ErrUnavailable naming the quota", err)
	}
	if err := c.Register(ctx, "n2"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Register on a full etcd: %v", err)
	}
	// Reads still work, so status can explain.
	if _, err := c.Snapshot(ctx); err != nil {
		t.Fatalf("Snapshot on a full etcd: %v", err)
	}
}
