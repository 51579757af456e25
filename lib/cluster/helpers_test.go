package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/test/etcdtest"
)

const testCluster = "test"

// env is one real etcd server plus a Client on it.
type env struct {
	srv *etcdtest.Server
	c   *Client
	raw *clientv3.Client // plain client for setting up and inspecting keys
	P   string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	srv := etcdtest.Start(t)
	e := &env{srv: srv, P: "/clusterrebootd/" + testCluster}
	e.c = dial(t, srv, testCluster)
	raw, err := clientv3.New(clientv3.Config{Endpoints: srv.Endpoints(), DialTimeout: 5 * time.Second, Logger: newZapLogger(discard())})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	e.raw = raw
	return e
}

func dial(t *testing.T, srv *etcdtest.Server, cluster string) *Client {
	t.Helper()
	c, err := Dial(ctxT(t), Options{
		Endpoints:      srv.Endpoints(),
		Cluster:        cluster,
		DialTimeout:    5 * time.Second,
		RequestTimeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// ctxT is a context bounded well beyond any expected wait, so a hung test
// fails instead of blocking the suite.
func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func (e *env) put(t *testing.T, key, val string, opts ...clientv3.OpOption) {
	t.Helper()
	if _, err := e.raw.Put(ctxT(t), key, val, opts...); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

func (e *env) get(t *testing.T, key string) *clientv3.GetResponse {
	t.Helper()
	resp, err := e.raw.Get(ctxT(t), key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	return resp
}

func (e *env) exists(t *testing.T, key string) bool {
	t.Helper()
	return len(e.get(t, key).Kvs) > 0
}

func (e *env) session(t *testing.T, node string, ttl time.Duration) *Session {
	t.Helper()
	s, err := e.c.NewSession(ctxT(t), ttl, LockInfo{Node: node, PID: 4242, BootID: "boot-" + node})
	if err != nil {
		t.Fatalf("NewSession(%s): %v", node, err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

func wantIs(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error %v: want errors.Is(%v)", err, target)
	}
}

func mustCorrupt(t *testing.T, err error, key string) {
	t.Helper()
	var ce *CorruptError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v: want *CorruptError for %s", err, key)
	}
	if ce.Key != key {
		t.Fatalf("CorruptError.Key = %q, want %q (%v)", ce.Key, key, err)
	}
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("errors.Is(%v, ErrCorrupt) = false", err)
	}
}

func testSlot(node string, now time.Time) Slot {
	return Slot{
		Node: node, BootID: "boot-" + node, Reason: "kernel update",
		AcquiredAt: now, Deadline: now.Add(30 * time.Minute),
	}
}

func testAlive(node string) Alive {
	return Alive{
		Node: node, BootID: "boot-" + node, Kernel: "6.1.0", Version: "1.0.0", State: StateIdle,
		Detector: "file", Healthy: true, MaxConcurrent: 1, UpdatedAt: time.Now().UTC().Truncate(time.Millisecond),
	}
}
