package etcdtest

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

func clusterClient(t *testing.T, eps []string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func TestClusterQuorum(t *testing.T) {
	names := []string{"a", "b", "c"}
	c := StartCluster(t, names, Options{})
	if !slices.Equal(c.Names(), names) || len(c.Endpoints()) != 3 {
		t.Fatalf("names %v endpoints %v", c.Names(), c.Endpoints())
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	ml, err := clusterClient(t, c.Endpoints()[:1]).MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range ml.Members {
		got = append(got, m.Name)
	}
	slices.Sort(got)
	if !slices.Equal(got, names) {
		t.Fatalf("member list %v, want %v", got, names)
	}

	// A write through one member is read through another: one cluster.
	if _, err := clusterClient(t, c.Endpoints()[:1]).Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	b := clusterClient(t, []string{c.Member(t, "b").ClientURL()})
	if r, err := b.Get(ctx, "k"); err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "v" {
		t.Fatalf("get through b: %v %v", r, err)
	}

	// One member down: the other two still have a quorum.
	c.Member(t, "c").Stop()
	if err := c.Member(t, "a").waitHealthy(); err != nil {
		t.Fatalf("a with c down: %v", err)
	}
	// Two down: the last member has no leader and reports unhealthy.
	c.Member(t, "b").Stop()
	a := c.Member(t, "a")
	hc := &http.Client{Timeout: 5 * time.Second}
	url := "http://127.0.0.1:" + strconv.Itoa(a.metrics) + "/health"
	deadline := time.Now().Add(30 * time.Second)
	for probe(hc, url) == nil {
		if time.Now().After(deadline) {
			t.Fatal("a still healthy 30s after losing its quorum")
		}
		time.Sleep(100 * time.Millisecond)
	}

	c.StartMembers(t, "b", "c", "a")
	if !c.Member(t, "b").Running() || !c.Member(t, "c").Running() {
		t.Fatal("StartMembers did not start b and c")
	}
	if r, err := b.Get(ctx, "k"); err != nil || len(r.Kvs) != 1 {
		t.Fatalf("after StartMembers: %v %v", r, err)
	}
}
