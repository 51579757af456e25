package cluster

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestUpdateAndReleaseSlotGuarded(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	now := time.Now().UTC().Truncate(time.Millisecond)
	s := e.session(t, "n1", time.Minute)
	if err := s.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	slot, err := s.AcquireSlot(ctx, testSlot("n1", now), HistoryEvent{}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	healthy := slot
	healthy.HealthySince = now.Add(time.Minute)
	updated, err := e.c.UpdateSlot(ctx, healthy)
	if err != nil {
		t.Fatalf("UpdateSlot: %v", err)
	}
	if updated.ModRevision <= slot.ModRevision {
		t.Fatalf("ModRevision %d not after %d", updated.ModRevision, slot.ModRevision)
	}
	snap, err := e.c.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := snap.Slot("n1"); got != updated {
		t.Fatalf("stored slot %+v, want %+v", got, updated)
	}

	// The pre-update copy is stale now.
	if _, err := e.c.UpdateSlot(ctx, healthy); !errors.Is(err, ErrConflict) {
		t.Fatalf("UpdateSlot with a stale ModRevision: %v, want ErrConflict", err)
	}
	ev := HistoryEvent{Event: EventCompleted, DurationMS: 1234}
	if err := e.c.ReleaseSlot(ctx, slot, ev, time.Hour); !errors.Is(err, ErrConflict) {
		t.Fatalf("ReleaseSlot with a stale ModRevision: %v, want ErrConflict", err)
	}
	if !e.exists(t, e.P+"/slots/n1") {
		t.Fatal("stale ReleaseSlot deleted the slot")
	}

	// Invalid requests never reach etcd.
	noRev := updated
	noRev.ModRevision = 0
	if _, err := e.c.UpdateSlot(ctx, noRev); !errors.Is(err, ErrInvalid) {
		t.Fatalf("UpdateSlot without ModRevision: %v, want ErrInvalid", err)
	}
	if err := e.c.ReleaseSlot(ctx, noRev, ev, time.Hour); !errors.Is(err, ErrInvalid) {
		t.Fatalf("ReleaseSlot without ModRevision: %v, want ErrInvalid", err)
	}
	badEv := HistoryEvent{Event: "finished"}
	if err := e.c.ReleaseSlot(ctx, updated, badEv, time.Hour); !errors.Is(err, ErrInvalid) {
		t.Fatalf("ReleaseSlot with an unknown event: %v, want ErrInvalid", err)
	}
	badSlot := updated
	badSlot.Deadline = badSlot.AcquiredAt.Add(-time.Second)
	if _, err := e.c.UpdateSlot(ctx, badSlot); !errors.Is(err, ErrInvalid) {
		t.Fatalf("UpdateSlot with deadline before acquired_at: %v, want ErrInvalid", err)
	}
	for _, f := range []func() error{
		func() error { _, err := e.c.UpdateSlot(ctx, Slot{Node: "a/b"}); return err },
		func() error { return e.c.ReleaseSlot(ctx, Slot{}, ev, time.Hour) },
	} {
		if err := f(); !errors.Is(err, ErrInvalid) {
			t.Fatalf("bad node: %v, want ErrInvalid", err)
		}
	}

	if err := e.c.ReleaseSlot(ctx, updated, ev, time.Hour); err != nil {
		t.Fatalf("ReleaseSlot: %v", err)
	}
	if e.exists(t, e.P+"/slots/n1") {
		t.Fatal("slot survived ReleaseSlot")
	}
	hist, err := e.c.History(ctx, "n1", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 2 || hist[0].Event != EventSlotTaken || hist[1].Event != EventCompleted ||
		hist[1].Node != "n1" || hist[1].DurationMS != 1234 || hist[1].At.IsZero() {
		t.Fatalf("history = %+v", hist)
	}
	// Releasing again: the slot is gone, which is a conflict, not success.
	if err := e.c.ReleaseSlot(ctx, updated, ev, time.Hour); !errors.Is(err, ErrConflict) {
		t.Fatalf("second ReleaseSlot: %v, want ErrConflict", err)
	}
	if _, err := e.c.UpdateSlot(ctx, updated); !errors.Is(err, ErrConflict) {
		t.Fatalf("UpdateSlot of a released slot: %v, want ErrConflict", err)
	}
}

// A corrupt record can be huge; the error quoting it stays short.
func TestCorruptHugeNodeIsClipped(t *testing.T) {
	huge := strings.Repeat("n", 1<<20)
	_, err := decodeAlive("/clusterrebootd/c/alive/n1", "n1", []byte(`{"node":"`+huge+`"}`))
	if err == nil {
		t.Fatal("a record of another node decoded")
	}
	if len(err.Error()) > 1024 || !strings.Contains(err.Error(), "/clusterrebootd/c/alive/n1") {
		t.Fatalf("error of %d bytes (want < 1 KiB, naming the key): %.200s", len(err.Error()), err)
	}
}

func TestSnapshotRefusesImpossibleNodeKeys(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	for _, node := range []string{"a\nb", "-x", "a b", strings.Repeat("n", 64), "ü"} {
		key := e.P + "/members/" + node
		if _, err := e.raw.Put(ctx, key, `{"node":`+strconv.Quote(node)+`}`); err != nil {
			t.Fatal(err)
		}
		_, err := e.c.Snapshot(ctx)
		var ce *CorruptError
		if !errors.As(err, &ce) || ce.Key != key || strings.Contains(err.Error(), "\n") {
			t.Errorf("member key %q: %v", key, err)
		}
		if _, err := e.raw.Delete(ctx, key); err != nil {
			t.Fatal(err)
		}
	}
}
