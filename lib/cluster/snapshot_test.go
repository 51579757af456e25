package cluster

import (
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"
)

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

func TestSnapshotDecodesEveryKind(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	now := time.Now().UTC().Truncate(time.Millisecond)

	for _, n := range []string{"n1", "n2"} {
		if err := e.c.Register(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	a := testAlive("n1")
	a.State, a.Reason, a.Blocked, a.RebootRequired = StateWaiting, "kernel 6.2", "window closed", true
	if err := e.c.PublishAlive(ctx, a, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := e.c.SetPause(ctx, Pause{Reason: "maintenance", By: "alice", At: now}); err != nil {
		t.Fatal(err)
	}
	if err := e.c.SetSettings(ctx, Settings{MaxConcurrent: 2}); err != nil {
		t.Fatal(err)
	}
	s := e.session(t, "n2", time.Minute)
	if err := s.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	fence := e.get(t, s.Key()).Kvs[0].CreateRevision
	slot, err := s.AcquireSlot(ctx, testSlot("n2", now), HistoryEvent{}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if slot.FenceRevision != fence {
		t.Fatalf("fence revision %d, want the mutex key's create revision %d", slot.FenceRevision, fence)
	}
	// The fenced write released the mutex; queue again, to see the queue.
	if err := s.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	// A history record must not be part of the snapshot, even a corrupt one.
	e.put(t, e.P+"/history/garbage", "{not json")

	snap, err := e.c.Snapshot(ctx)
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	if snap.Revision < slot.ModRevision {
		t.Errorf("Revision %d < slot ModRevision %d", snap.Revision, slot.ModRevision)
	}
	if len(snap.Members) != 2 || snap.Members[0].Node != "n1" || snap.Members[1].Node != "n2" || snap.Members[0].RegisteredAt.IsZero() {
		t.Errorf("Members = %+v", snap.Members)
	}
	if got, ok := snap.AliveOf("n1"); !ok || !reflect.DeepEqual(got, a) {
		t.Errorf("Alive = %+v, want %+v", snap.Alive, a)
	}
	if _, ok := snap.AliveOf("n2"); ok {
		t.Error("AliveOf(n2) found a record that was never published")
	}
	if got, ok := snap.Slot("n2"); !ok || !reflect.DeepEqual(got, slot) {
		t.Errorf("Slot(n2) = %+v, want %+v", got, slot)
	}
	if _, ok := snap.Slot("n1"); ok {
		t.Error("Slot(n1) found a slot that does not exist")
	}
	if snap.Pause == nil || *snap.Pause != (Pause{Reason: "maintenance", By: "alice", At: now}) {
		t.Errorf("Pause = %+v", snap.Pause)
	}
	if snap.Settings == nil || snap.Settings.MaxConcurrent != 2 {
		t.Errorf("Settings = %+v", snap.Settings)
	}
	owner, ok := snap.Owner()
	if !ok || len(snap.Queue) != 1 || owner.Node != "n2" || owner.Key != s.Key() ||
		owner.CreateRevision <= slot.ModRevision || owner.Lease != s.LeaseID() ||
		owner.PID != 4242 || owner.BootID != "boot-n2" || owner.QueuedAt.IsZero() {
		t.Errorf("Queue = %+v (session key %s, fence %d)", snap.Queue, s.Key(), slot.FenceRevision)
	}

	// Without the queue: everything else identical, at one revision.
	nq, err := e.c.SnapshotWithoutQueue(ctx)
	if err != nil {
		t.Fatalf("SnapshotWithoutQueue: %v", err)
	}
	if len(nq.Queue) != 0 {
		t.Errorf("SnapshotWithoutQueue has a queue: %+v", nq.Queue)
	}
	nq.Queue, snap.Queue = nil, nil
	if !reflect.DeepEqual(nq, snap) {
		t.Errorf("SnapshotWithoutQueue = %+v\nwant %+v", nq, snap)
	}
	// The queue alone: the same waiters, nothing else.
	q, err := e.c.QueueSnapshot(ctx)
	if err != nil {
		t.Fatalf("QueueSnapshot: %v", err)
	}
	full, err := e.c.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(q.Queue, full.Queue) || len(q.Queue) != 1 || q.Revision != full.Revision ||
		len(q.Members)+len(q.Alive)+len(q.Slots) != 0 || q.Pause != nil || q.Settings != nil {
		t.Errorf("QueueSnapshot = %+v\nwant the queue of %+v alone", q, full)
	}
	// Keys beside the lock prefix are still read (and refused when unknown).
	e.put(t, e.P+"/lockx", "x")
	if _, err := e.c.QueueSnapshot(ctx); err != nil {
		t.Errorf("QueueSnapshot read %s/lockx, beside the lock prefix: %v", e.P, err)
	}
	if _, err := e.c.SnapshotWithoutQueue(ctx); !errors.Is(err, ErrCorrupt) {
		t.Errorf("SnapshotWithoutQueue with an unknown key %s/lockx: %v", e.P, err)
	}
}

func TestSnapshotEmpty(t *testing.T) {
	e := newEnv(t)
	// Keys of other clusters sharing the prefix string are not ours.
	e.put(t, "/clusterrebootd/test2/pause", "garbage")
	e.put(t, "/clusterrebootd/testx", "garbage")
	e.put(t, "/clusterrebootd/test", "garbage")
	snap, err := e.c.Snapshot(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if snap.Revision == 0 || snap.Members != nil || snap.Alive != nil || snap.Slots != nil ||
		snap.Pause != nil || snap.Settings != nil || snap.Queue != nil {
		t.Fatalf("snapshot of an empty cluster = %+v", snap)
	}
	if _, ok := snap.Owner(); ok {
		t.Fatal("Owner() of an empty queue")
	}
}

func TestSnapshotCorrupt(t *testing.T) {
	e := newEnv(t)
	P := e.P
	ts := `"2026-01-02T03:04:05Z"`
	slotJSON := func(node, extra string) string {
		return `{"node":"` + node + `","boot_id":"b","reason":"r","fence_revision":5,"acquired_at":` + ts +
			`,"deadline":"2026-01-02T04:04:05Z"` + extra + `}`
	}
	cases := []struct {
		name, key, val string
	}{
		{"garbage member", P + "/members/n1", "garbage"},
		{"member wrong node", P + "/members/n1", `{"node":"n2","registered_at":` + ts + `}`},
		{"member no time", P + "/members/n1", `{"node":"n1"}`},
		{"member unknown field", P + "/members/n1", `{"node":"n1","registered_at":` + ts + `,"x":1}`},
		{"member empty segment", P + "/members/", `{"node":"","registered_at":` + ts + `}`},
		{"member nested key", P + "/members/a/b", `{"node":"a/b","registered_at":` + ts + `}`},
		{"alive bad state", P + "/alive/n1", `{"node":"n1","state":"dancing","max_concurrent":1,"updated_at":` + ts + `}`},
		{"alive zero max", P + "/alive/n1", `{"node":"n1","state":"idle","max_concurrent":0,"updated_at":` + ts + `}`},
		{"alive wrong type", P + "/alive/n1", `{"node":"n1","state":"idle","max_concurrent":"1","updated_at":` + ts + `}`},
		{"alive empty value", P + "/alive/n1", ``},
		{"slot garbage", P + "/slots/n1", "\x00\x01"},
		{"slot wrong node", P + "/slots/n1", slotJSON("n2", "")},
		{"slot unknown field", P + "/slots/n1", slotJSON("n1", `,"lease":7`)},
		{"slot trailing data", P + "/slots/n1", slotJSON("n1", "") + `{}`},
		{"slot null", P + "/slots/n1", `null`},
		{"slot no boot id", P + "/slots/n1", `{"node":"n1","fence_revision":5,"acquired_at":` + ts + `,"deadline":` + ts + `}`},
		{"slot no fence", P + "/slots/n1", `{"node":"n1","boot_id":"b","acquired_at":` + ts + `,"deadline":` + ts + `}`},
		{"slot no deadline", P + "/slots/n1", `{"node":"n1","boot_id":"b","fence_revision":5,"acquired_at":` + ts + `}`},
		{"slot no acquired", P + "/slots/n1", `{"node":"n1","boot_id":"b","fence_revision":5,"deadline":` + ts + `}`},
		{"slot deadline first", P + "/slots/n1", `{"node":"n1","boot_id":"b","fence_revision":5,"acquired_at":"2026-01-02T05:00:00Z","deadline":` + ts + `}`},
		{"pause garbage", P + "/pause", "yes"},
		{"pause no time", P + "/pause", `{"reason":"x","by":"y"}`},
		{"settings zero", P + "/settings", `{"max_concurrent":0}`},
		{"settings negative", P + "/settings", `{"max_concurrent":-1}`},
		{"settings unknown field", P + "/settings", `{"max_concurrent":1,"min":1}`},
		{"settings array", P + "/settings", `[1]`},
		{"unknown key", P + "/foo", "x"},
		{"unknown dir", P + "/nodes/n1", "{}"},
		{"history lookalike", P + "/historyX", "x"},
		{"bare history", P + "/history", "x"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := e.raw.Delete(ctxT(t), P+"/", withPrefix()); err != nil {
				t.Fatal(err)
			}
			e.put(t, tc.key, tc.val)
			_, err := e.c.Snapshot(ctxT(t))
			mustCorrupt(t, err, tc.key)
			if !strings.Contains(err.Error(), tc.key) {
				t.Fatalf("message %q does not name the key", err)
			}
		})
	}
}

func TestSlotOverdue(t *testing.T) {
	now := time.Now()
	s := testSlot("n1", now)
	if s.Overdue(now) || s.Overdue(s.Deadline) {
		t.Fatal("overdue before or at its deadline")
	}
	if !s.Overdue(s.Deadline.Add(time.Nanosecond)) {
		t.Fatal("not overdue after its deadline")
	}
}

// NodeSnapshot reads this node's records, every slot, pause and settings,
// and nothing of the other nodes: its size does not grow with the cluster.
func TestNodeSnapshot(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	now := time.Now().UTC().Truncate(time.Millisecond)
	for _, n := range []string{"n1", "n2", "n3"} {
		if err := e.c.Register(ctx, n); err != nil {
			t.Fatal(err)
		}
		if err := e.c.PublishAlive(ctx, testAlive(n), time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.c.SetPause(ctx, Pause{Reason: "r", By: "b", At: now}); err != nil {
		t.Fatal(err)
	}
	s := e.session(t, "n3", time.Minute)
	if err := s.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcquireSlot(ctx, testSlot("n3", now), HistoryEvent{}, time.Hour); err != nil {
		t.Fatal(err)
	}
	snap, err := e.c.NodeSnapshot(ctx, "n1")
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Members) != 1 || snap.Members[0].Node != "n1" || len(snap.Alive) != 1 || snap.Alive[0].Node != "n1" {
		t.Errorf("members %+v, alive %+v: want only n1's", snap.Members, snap.Alive)
	}
	if snap.AliveLease("n1") == 0 {
		t.Error("no lease hint for n1's alive record")
	}
	if _, ok := snap.Slot("n3"); !ok || len(snap.Slots) != 1 {
		t.Errorf("slots %+v, want n3's", snap.Slots)
	}
	if snap.Pause == nil || len(snap.Queue) != 0 {
		t.Errorf("pause %+v, queue %+v", snap.Pause, snap.Queue)
	}
	if _, err := e.c.NodeSnapshot(ctx, "../x"); !errors.Is(err, ErrInvalid) {
		t.Errorf("NodeSnapshot of an impossible name: %v", err)
	}
	// A corrupt own record still blocks.
	e.put(t, e.P+"/alive/n1", "{garbage")
	if _, err := e.c.NodeSnapshot(ctx, "n1"); !errors.Is(err, ErrCorrupt) {
		t.Errorf("NodeSnapshot with a corrupt own alive record: %v", err)
	}
}
