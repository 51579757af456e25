package cluster

import (
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestRegisterKeepsExisting(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	if err := e.c.Register(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	first := e.get(t, e.P+"/members/n1").Kvs[0]
	time.Sleep(5 * time.Millisecond)
	if err := e.c.Register(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	again := e.get(t, e.P+"/members/n1").Kvs[0]
	if again.ModRevision != first.ModRevision || string(again.Value) != string(first.Value) || first.Lease != 0 {
		t.Fatalf("second Register rewrote the member: %s → %s", first.Value, again.Value)
	}
	for _, bad := range []string{"", "a/b"} {
		if err := e.c.Register(ctx, bad); !errors.Is(err, ErrInvalid) {
			t.Fatalf("Register(%q): %v, want ErrInvalid", bad, err)
		}
	}
}

func TestForget(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	for _, n := range []string{"n1", "n2"} {
		if err := e.c.Register(ctx, n); err != nil {
			t.Fatal(err)
		}
		if err := e.c.PublishAlive(ctx, testAlive(n), time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.c.Forget(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	if e.exists(t, e.P+"/members/n1") || e.exists(t, e.P+"/alive/n1") {
		t.Fatal("n1 still registered or alive after Forget")
	}
	if !e.exists(t, e.P+"/members/n2") || !e.exists(t, e.P+"/alive/n2") {
		t.Fatal("Forget(n1) touched n2")
	}

	s := e.session(t, "n2", time.Minute)
	if err := s.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcquireSlot(ctx, testSlot("n2", time.Now()), HistoryEvent{}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Forget(ctx, "n2"); !errors.Is(err, ErrSlotHeld) {
		t.Fatalf("Forget of a node holding a slot: %v, want ErrSlotHeld", err)
	}
	if !e.exists(t, e.P+"/members/n2") || !e.exists(t, e.P+"/alive/n2") {
		t.Fatal("refused Forget deleted something")
	}
	if err := e.c.Forget(ctx, ""); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Forget(\"\"): %v", err)
	}
}

func leaseCount(t *testing.T, e *env) int {
	t.Helper()
	resp, err := e.raw.Leases(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return len(resp.Leases)
}

func TestPublishAliveReusesLease(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	const ttl = 2 * time.Second
	key := e.P + "/alive/n1"
	if n := leaseCount(t, e); n != 0 {
		t.Fatalf("%d leases before the test", n)
	}
	var lease int64
	for i := range 3 {
		a := testAlive("n1")
		a.State = []string{StateIdle, StateWaiting, StateHolding}[i]
		if err := e.c.PublishAlive(ctx, a, ttl); err != nil {
			t.Fatalf("PublishAlive #%d: %v", i, err)
		}
		kv := e.get(t, key).Kvs[0]
		if i == 0 {
			lease = kv.Lease
		}
		if kv.Lease == 0 || kv.Lease != lease {
			t.Fatalf("PublishAlive #%d: lease %x, want %x", i, kv.Lease, lease)
		}
		got, err := decodeAlive(key, "n1", kv.Value)
		if err != nil || got.State != a.State {
			t.Fatalf("stored alive %s: %v", kv.Value, err)
		}
	}
	if n := leaseCount(t, e); n != 1 {
		t.Fatalf("%d leases after 3 publishes, want 1", n)
	}

	// A longer TTL needs a new lease; the old one is left to expire.
	if err := e.c.PublishAlive(ctx, testAlive("n1"), time.Minute); err != nil {
		t.Fatal(err)
	}
	kv := e.get(t, key).Kvs[0]
	if kv.Lease == lease {
		t.Fatal("TTL changed from 2s to 1m but the lease was reused")
	}
	ttlResp, err := e.raw.TimeToLive(ctx, clientv3.LeaseID(kv.Lease))
	if err != nil || ttlResp.GrantedTTL != 60 {
		t.Fatalf("new lease: %+v, %v", ttlResp, err)
	}
	// And back to 2s, then let it expire.
	if err := e.c.PublishAlive(ctx, testAlive("n1"), ttl); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(ttl + 3*time.Second)
	for e.exists(t, key) {
		if time.Now().After(deadline) {
			t.Fatalf("%s still there %s after its last publish with ttl %s", key, ttl+3*time.Second, ttl)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Published again after expiry: a fresh lease.
	if err := e.c.PublishAlive(ctx, testAlive("n1"), ttl); err != nil {
		t.Fatal(err)
	}
	if !e.exists(t, key) {
		t.Fatal("not republished after expiry")
	}
}

func TestPublishAliveOnHint(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	const ttl = 30 * time.Second
	key := e.P + "/alive/n1"
	if err := e.c.PublishAlive(ctx, testAlive("n1"), ttl); err != nil {
		t.Fatal(err)
	}
	snap, err := e.c.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hint := snap.AliveLease("n1")
	if hint == 0 || hint != e.get(t, key).Kvs[0].Lease {
		t.Fatalf("snapshot lease hint %x, key has %x", hint, e.get(t, key).Kvs[0].Lease)
	}
	if snap.AliveLease("nobody") != 0 {
		t.Fatal("hint for a node without an alive record")
	}
	// A valid hint is refreshed and reused.
	if err := e.c.PublishAliveOn(ctx, testAlive("n1"), ttl, hint); err != nil {
		t.Fatal(err)
	}
	if got := e.get(t, key).Kvs[0].Lease; got != hint {
		t.Fatalf("lease %x after a valid hint, want %x", got, hint)
	}
	// A stale hint (revoked lease, the key went with it) gets a new grant.
	if _, err := e.raw.Revoke(ctx, clientv3.LeaseID(hint)); err != nil {
		t.Fatal(err)
	}
	if err := e.c.PublishAliveOn(ctx, testAlive("n1"), ttl, hint); err != nil {
		t.Fatalf("stale hint: %v", err)
	}
	kv := e.get(t, key).Kvs
	if len(kv) != 1 || kv[0].Lease == 0 || kv[0].Lease == hint {
		t.Fatalf("after a stale hint: %+v", kv)
	}
	ttlResp, err := e.raw.TimeToLive(ctx, clientv3.LeaseID(kv[0].Lease))
	if err != nil || ttlResp.TTL <= 0 {
		t.Fatalf("new lease not alive: %+v, %v", ttlResp, err)
	}
}

func TestPublishAliveValidates(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	for name, a := range map[string]Alive{
		"no node":   {State: StateIdle, MaxConcurrent: 1},
		"slash":     {Node: "a/b", State: StateIdle, MaxConcurrent: 1},
		"bad state": {Node: "n1", State: "sleeping", MaxConcurrent: 1},
		"max 0":     {Node: "n1", State: StateIdle},
	} {
		if err := e.c.PublishAlive(ctx, a, time.Minute); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if err := e.c.PublishAlive(ctx, testAlive("n1"), 0); !errors.Is(err, ErrInvalid) {
		t.Errorf("ttl 0: %v, want ErrInvalid", err)
	}
	// UpdatedAt defaults to now.
	a := testAlive("n1")
	a.UpdatedAt = time.Time{}
	if err := e.c.PublishAlive(ctx, a, time.Minute); err != nil {
		t.Fatal(err)
	}
	snap, err := e.c.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := snap.AliveOf("n1"); !ok || time.Since(got.UpdatedAt) > time.Minute {
		t.Fatalf("alive = %+v", got)
	}
	if n := leaseCount(t, e); n != 1 {
		t.Fatalf("%d leases, want 1 (invalid records must not grant any)", n)
	}
}

func TestPauseAndSettings(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	if existed, err := e.c.ClearPause(ctx); err != nil || existed {
		t.Fatalf("ClearPause without pause: %v, %v", existed, err)
	}
	if err := e.c.SetPause(ctx, Pause{Reason: "freeze", By: "bob"}); err != nil {
		t.Fatal(err)
	}
	snap, err := e.c.Snapshot(ctx)
	if err != nil || snap.Pause == nil || snap.Pause.Reason != "freeze" || snap.Pause.At.IsZero() {
		t.Fatalf("pause = %+v, %v", snap.Pause, err)
	}
	if existed, err := e.c.ClearPause(ctx); err != nil || !existed {
		t.Fatalf("ClearPause: %v, %v", existed, err)
	}
	if err := e.c.SetSettings(ctx, Settings{MaxConcurrent: 0}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("SetSettings(0): %v, want ErrInvalid", err)
	}
	if err := e.c.SetSettings(ctx, Settings{MaxConcurrent: 3}); err != nil {
		t.Fatal(err)
	}
	snap, err = e.c.Snapshot(ctx)
	if err != nil || snap.Pause != nil || snap.Settings == nil || snap.Settings.MaxConcurrent != 3 {
		t.Fatalf("snapshot = %+v, %v", snap, err)
	}
	if err := e.c.ClearSettings(ctx); err != nil {
		t.Fatal(err)
	}
	if e.exists(t, e.P+"/settings") {
		t.Fatal("settings survived ClearSettings")
	}
}
