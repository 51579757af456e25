package cluster

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestWaitChangeWakesOnDelete(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	e.put(t, e.P+"/slots/n1", "x")
	e.put(t, e.P+"/slots/n2", "x")
	resp := e.get(t, e.P+"/slots/n1")
	rev := resp.Header.Revision

	done := make(chan error, 1)
	go func() { done <- e.c.WaitChange(ctx, KeySlots, true, rev) }()
	select {
	case err := <-done:
		t.Fatalf("WaitChange returned (%v) before any change", err)
	case <-time.After(300 * time.Millisecond):
	}
	if _, err := e.raw.Delete(ctx, e.P+"/slots/n2"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("WaitChange: %v", err)
	}

	// A change between the read (rev) and the call is not missed.
	e.put(t, e.P+"/pause", "x")
	if err := e.c.WaitChange(ctx, KeyPause, false, rev); err != nil {
		t.Fatalf("WaitChange for a past change: %v", err)
	}
	// Full keys are accepted too.
	if err := e.c.WaitChange(ctx, e.P+"/slots/", true, rev); err != nil {
		t.Fatalf("WaitChange with a full key: %v", err)
	}
}

func TestWaitChangeRespectsContext(t *testing.T) {
	e := newEnv(t)
	e.put(t, e.P+"/settings", "x")
	rev := e.get(t, e.P+"/settings").Header.Revision
	// A change elsewhere after rev does not wake a watch on settings.
	e.put(t, e.P+"/pause", "x")
	e.put(t, e.P+"/settings2", "x")
	short, cancel := context.WithTimeout(ctxT(t), 300*time.Millisecond)
	defer cancel()
	err := e.c.WaitChange(short, KeySettings, false, rev)
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrUnavailable) {
		t.Fatalf("WaitChange at ctx deadline: %v, want the context's deadline", err)
	}
	cctx, ccancel := context.WithCancel(ctxT(t))
	ccancel()
	if err := e.c.WaitChange(cctx, KeySettings, false, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitChange with a cancelled ctx: %v", err)
	}
}

func TestWaitChangeCompacted(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	e.put(t, e.P+"/settings", "1")
	old := e.get(t, e.P+"/settings").Header.Revision
	e.put(t, e.P+"/other", "2")
	e.put(t, e.P+"/other", "3")
	now := e.get(t, e.P+"/other").Header.Revision
	if _, err := e.raw.Compact(ctx, now); err != nil {
		t.Fatal(err)
	}
	// old+1 is compacted: return so the caller re-reads.
	if err := e.c.WaitChange(ctx, KeySettings, false, old); err != nil {
		t.Fatalf("WaitChange from a compacted revision: %v", err)
	}
}

// Changes between the read and the watch (the gap) are seen by the gap
// check, whatever they are; writes elsewhere are not changes.
func TestWaitChangeGap(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	e.put(t, e.P+"/slots/n1", "x")
	e.put(t, e.P+"/slots/n2", "x")
	rev := e.get(t, e.P+"/slots/n1").Header.Revision
	e.put(t, e.P+"/pause", "x") // elsewhere: not a change of slots

	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err := e.c.WaitChange(short, KeySlots, true, rev)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitChange after a write elsewhere: %v, want to keep waiting", err)
	}
	// A delete in the gap (fewer keys than at rev).
	if _, err := e.raw.Delete(ctx, e.P+"/slots/n2"); err != nil {
		t.Fatal(err)
	}
	if err := e.c.WaitChange(ctx, KeySlots, true, rev); err != nil {
		t.Fatalf("WaitChange after a delete in the gap: %v", err)
	}
	// A delete and a new key: same count, but a key newer than rev.
	rev2 := e.get(t, e.P+"/slots/n1").Header.Revision
	if _, err := e.raw.Delete(ctx, e.P+"/slots/n1"); err != nil {
		t.Fatal(err)
	}
	e.put(t, e.P+"/slots/n3", "x")
	if err := e.c.WaitChange(ctx, KeySlots, true, rev2); err != nil {
		t.Fatalf("WaitChange after a swap in the gap: %v", err)
	}
}
