package cluster

import (
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestHistoryFiltering(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	// Written out of time order: History orders by revision (write order).
	events := []HistoryEvent{
		{Event: EventSlotTaken, Node: "a", At: t0.Add(2 * time.Hour)},
		{Event: EventRebootRequested, Node: "a", At: t0},
		{Event: EventSlotTaken, Node: "b", At: t0.Add(time.Hour), BootID: "x", By: "op"},
		{Event: EventCompleted, Node: "a", At: t0.Add(3 * time.Hour), DurationMS: 60000},
	}
	for _, ev := range events {
		if err := e.c.AppendHistory(ctx, ev, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	nodesOf := func(hs []HistoryEvent) (s []string) {
		for _, h := range hs {
			s = append(s, h.Node+":"+h.Event)
		}
		return s
	}
	for _, tc := range []struct {
		node  string
		since time.Time
		want  []string
	}{
		{"", time.Time{}, []string{"a:slot-taken", "a:reboot-requested", "b:slot-taken", "a:completed"}},
		{"a", time.Time{}, []string{"a:slot-taken", "a:reboot-requested", "a:completed"}},
		{"b", time.Time{}, []string{"b:slot-taken"}},
		{"c", time.Time{}, nil},
		{"", t0.Add(time.Hour), []string{"a:slot-taken", "b:slot-taken", "a:completed"}},
		{"a", t0.Add(2*time.Hour + 1), []string{"a:completed"}},
		{"", t0.Add(4 * time.Hour), nil},
	} {
		got, err := e.c.History(ctx, tc.node, tc.since)
		if err != nil {
			t.Fatal(err)
		}
		if g := nodesOf(got); len(g) != len(tc.want) || (len(g) > 0 && !equal(g, tc.want)) {
			t.Errorf("History(%q, %s) = %v, want %v", tc.node, tc.since, g, tc.want)
		}
		for i := 1; i < len(got); i++ {
			if got[i].Revision <= got[i-1].Revision {
				t.Errorf("History(%q) not ordered by revision: %+v", tc.node, got)
			}
		}
	}
	all, _ := e.c.History(ctx, "b", time.Time{})
	if want := (HistoryEvent{Event: EventSlotTaken, Node: "b", At: t0.Add(time.Hour), BootID: "x", By: "op", Revision: all[0].Revision}); all[0] != want {
		t.Fatalf("round trip: %+v, want %+v", all[0], want)
	}

	// All records share one history lease (one time bucket here).
	leases := map[int64]bool{}
	resp, err := e.raw.Get(ctx, e.P+"/history/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		leases[kv.Lease] = true
	}
	if len(leases) != 1 || leases[0] {
		t.Fatalf("history leases %v: want one shared lease", leases)
	}
	for id := range leases {
		ttl, err := e.raw.TimeToLive(ctx, clientv3.LeaseID(id))
		if err != nil || ttl.GrantedTTL < 3600 || ttl.GrantedTTL > 3600+3600/30 {
			t.Fatalf("history lease TTL %+v, %v: want history ttl plus at most one bucket", ttl, err)
		}
	}

	if err := e.c.AppendHistory(ctx, HistoryEvent{Event: EventExpired}, time.Hour); !errors.Is(err, ErrInvalid) {
		t.Fatalf("AppendHistory without node: %v, want ErrInvalid", err)
	}
	if err := e.c.AppendHistory(ctx, HistoryEvent{Event: EventExpired, Node: "a", DurationMS: -1}, time.Hour); !errors.Is(err, ErrInvalid) {
		t.Fatalf("AppendHistory with negative duration: %v, want ErrInvalid", err)
	}

	bad := e.P + "/history/00000000000000000001-zz"
	e.put(t, bad, `{"event":"completed","node":"a","at":"2026-01-01T00:00:00Z","extra":1}`)
	_, err = e.c.History(ctx, "", time.Time{})
	mustCorrupt(t, err, bad)
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestHistoryLeaseBuckets(t *testing.T) {
	c := &Client{prefix: "/clusterrebootd/x"}
	base := time.Unix(1_700_000_000, 0)
	day := 720 * time.Hour
	a, b := c.historyLease(base, day), c.historyLease(base.Add(time.Second), day)
	if a != b {
		t.Fatal("two records a second apart use different leases")
	}
	if a.id <= 0 || a.ttl != int64(day/time.Second)+24*3600 {
		t.Fatalf("lease %+v: want positive ID and ttl + 24h", a)
	}
	if c.historyLease(base.Add(25*time.Hour), day) == a {
		t.Fatal("records more than a bucket apart share a lease")
	}
	if c.historyLease(base, time.Hour) == a {
		t.Fatal("another history ttl shares the lease")
	}
	other := &Client{prefix: "/clusterrebootd/y"}
	if other.historyLease(base, day).id == a.id {
		t.Fatal("another cluster shares the lease")
	}
	if l := c.historyLease(base, time.Second); l.ttl != 2 {
		t.Fatalf("1s history ttl: lease ttl %d, want 2 (1 s bucket)", l.ttl)
	}
}

func TestHistoryNewBucketGrantsLease(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	// A 1 s history ttl has 1 s buckets: writes 2 s apart need two leases,
	// each granted on the fly after "lease not found".
	for i := range 2 {
		if i > 0 {
			time.Sleep(2 * time.Second)
		}
		if err := e.c.AppendHistory(ctx, HistoryEvent{Event: EventAborted, Node: "a"}, time.Second); err != nil {
			t.Fatalf("AppendHistory #%d: %v", i, err)
		}
	}
}
