package histcheck

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/clusterrebootd/clusterrebootd/lib/cluster"
	"github.com/clusterrebootd/clusterrebootd/test/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A real etcd, written through lib/cluster as the product writes it.
func TestCollectFromEtcd(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	raw, err := clientv3.New(clientv3.Config{Endpoints: srv.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	cl, err := cluster.Dial(ctx, cluster.Options{Endpoints: srv.Endpoints(), Cluster: "hc"})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	prefix := cl.Prefix()
	// Unrelated traffic before and after.
	if _, err := raw.Put(ctx, "/other", "x"); err != nil {
		t.Fatal(err)
	}
	start, err := raw.Get(ctx, "/other")
	if err != nil {
		t.Fatal(err)
	}
	from := start.Header.Revision + 1

	cycle := func(node, boot, newBoot string) (down, up time.Time) {
		s, err := cl.NewSession(ctx, 5*time.Second, cluster.LockInfo{Node: node, PID: 1, BootID: boot})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(ctx)
		if err := s.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC()
		slot, err := s.AcquireSlot(ctx, cluster.Slot{Node: node, BootID: boot, Reason: "test", AcquiredAt: now, Deadline: now.Add(time.Minute)},
			cluster.HistoryEvent{Event: cluster.EventSlotTaken, Node: node, BootID: boot}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := cl.AppendHistory(ctx, cluster.HistoryEvent{Event: cluster.EventRebootRequested, Node: node, BootID: boot}, time.Hour); err != nil {
			t.Fatal(err)
		}
		down = time.Now()
		up = down.Add(time.Millisecond)
		time.Sleep(5 * time.Millisecond)
		if err := cl.ReleaseSlot(ctx, slot, cluster.HistoryEvent{Event: cluster.EventCompleted, BootID: newBoot}, time.Hour); err != nil {
			t.Fatal(err)
		}
		return down, up
	}
	d1, u1 := cycle("n1", "a1", "b1")
	d2, u2 := cycle("n2", "a2", "b2")
	if _, err := raw.Put(ctx, "/other", "y"); err != nil {
		t.Fatal(err)
	}

	evs, fin, err := Collect(ctx, raw, prefix+"/", from)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[Kind]int{}
	for _, e := range evs {
		kinds[e.Kind]++
	}
	if kinds[SlotPut] != 2 || kinds[SlotDelete] != 2 || kinds[LockPut] != 2 || kinds[LockDelete] != 2 || kinds[Record] != 6 {
		t.Errorf("collected %v", kinds)
	}
	if len(fin.Slots) != 0 || len(fin.Locks) != 0 || fin.Rev <= from {
		t.Errorf("final %+v", fin)
	}
	node := []Event{
		{Kind: Up, Node: "n1", BootID: "a1", At: d1.Add(-time.Hour)}, {Kind: Up, Node: "n2", BootID: "a2", At: d1.Add(-time.Hour)},
		{Kind: Down, Node: "n1", At: d1}, {Kind: Up, Node: "n1", BootID: "b1", At: u1},
		{Kind: Down, Node: "n2", At: d2}, {Kind: Up, Node: "n2", BootID: "b2", At: u2},
	}
	r := Check(Log{MaxConcurrent: 1, Events: append(slices.Clone(evs), node...), Locks: true, Final: fin})
	if len(r.Violations) != 0 || r.SlotsTaken != 2 || r.Reboots != 2 {
		t.Fatalf("clean run: %s %v", r.Summary(), r.Violations)
	}

	// A slot that vanishes without a record, seen from a later start:
	// the snapshot carries the held slot, the deletion is a loss.
	s3, err := cl.NewSession(ctx, 5*time.Second, cluster.LockInfo{Node: "n3", PID: 1, BootID: "a3"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s3.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if _, err := s3.AcquireSlot(ctx, cluster.Slot{Node: "n3", BootID: "a3", Reason: "test", AcquiredAt: now, Deadline: now.Add(time.Minute)},
		cluster.HistoryEvent{Event: cluster.EventSlotTaken}, time.Hour); err != nil {
		t.Fatal(err)
	}
	// The fenced write released the mutex; queue again so that a mutex key
	// is still held at the end (a stale key for the checker, a lock for
	// Settle to wait on).
	if err := s3.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	mid, err := raw.Get(ctx, "/other")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Delete(ctx, prefix+"/slots/n3"); err != nil {
		t.Fatal(err)
	}
	evs, fin, err = Collect(ctx, raw, prefix, mid.Header.Revision+1)
	if err != nil {
		t.Fatal(err)
	}
	r = Check(Log{MaxConcurrent: 1, Events: evs, Locks: true, Final: fin})
	if r.Count(SlotLost) != 1 || r.Count(StaleKey) != 1 || r.Count(UnfencedSlot) != 0 || len(r.Violations) != 2 {
		t.Errorf("lost slot, lock still held: %v", r.Violations)
	}

	// Settle: the held mutex key stays until its session ends.
	f, err := Settle(ctx, raw, prefix, 300*time.Millisecond)
	if err != nil || len(f.Locks) != 1 {
		t.Errorf("settle with a held lock: %+v %v", f, err)
	}
	if err := s3.Close(ctx); err != nil {
		t.Fatal(err)
	}
	f, err = Settle(ctx, raw, prefix, 10*time.Second)
	if err != nil || len(f.Locks) != 0 || len(f.Slots) != 0 {
		t.Errorf("settle after the session ended: %+v %v", f, err)
	}

	// The whole store from revision 1 (nothing before it).
	evs, _, err = Collect(ctx, raw, prefix, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(evs); n < 16 {
		t.Errorf("from revision 1: %d events", n)
	}
	// A start revision past the end: only the state now, as a snapshot
	// (nothing is held).
	evs, _, err = Collect(ctx, raw, prefix, fin.Rev+1000)
	if err != nil || len(evs) != 0 {
		t.Errorf("past the end: %v %v", evs, err)
	}

	// Errors are wrapped.
	cctx, ccancel := context.WithCancel(ctx)
	ccancel()
	if _, _, err := Collect(cctx, raw, prefix, 1); !errors.Is(err, ErrCollect) {
		t.Errorf("cancelled collect: %v", err)
	}
	if _, err := Settle(cctx, raw, prefix, 0); err == nil {
		t.Error("cancelled settle: no error")
	}
}
