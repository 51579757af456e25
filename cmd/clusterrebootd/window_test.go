package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/cluster"
	co "github.com/clusterrebootd/clusterrebootd/lib/coordinator"
	"github.com/clusterrebootd/clusterrebootd/test/etcdtest"
)

// A holder that waited (for a busy slot) into a closed window must not
// reboot: the window is checked again under the lock. Real etcd, real
// schedule, a clock the test moves.
func TestWindowClosesWhileWaiting(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	opts := cluster.Options{Endpoints: srv.Endpoints(), DialTimeout: 2 * time.Second, RequestTimeout: 2 * time.Second, Cluster: "window"}
	admin, err := cluster.Dial(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()

	// Tuesday 22:30 UTC, inside "Tue 22:00-23:00".
	var now atomic.Int64
	now.Store(time.Date(2026, 12, 1, 22, 30, 0, 0, time.UTC).UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()).UTC() }

	// Another node holds the only slot.
	sess, err := admin.NewSession(ctx, 5*time.Second, cluster.LockInfo{Node: "other", PID: 1, BootID: "b"})
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	taken := clock()
	if _, err := sess.AcquireSlot(ctx, cluster.Slot{Node: "other", BootID: "b", Reason: "kernel", AcquiredAt: taken, Deadline: taken.Add(time.Hour)},
		cluster.HistoryEvent{Event: "slot-taken", Node: "other", At: taken}, time.Hour); err != nil {
		t.Fatal(err)
	}
	_ = sess.Unlock(ctx)
	_ = sess.Close(ctx)

	dir := t.TempDir()
	nd := &simNode{name: "n1", dir: dir, bootID: "boot-1"}
	if err := os.WriteFile(filepath.Join(dir, "reboot-required"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig("n1", "window", dir, 1)
	cfg.Windows.Allow = []string{"Tue 22:00-23:00"}
	client, err := cluster.Dial(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	w, err := assemble(&cfg, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.lazy.once.Do(func() { w.lazy.c = client })
	w.deps.Host = simHost{nd: nd, p: &simProc{}}
	rebooted := make(chan string, 1)
	w.deps.Rebooter = rebootFunc(func(reason string) error { rebooted <- reason; return nil })
	w.deps.Now = clock
	w.opts.MaxHoldWait = 3 * time.Second
	coord, err := co.New(w.opts, w.deps)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- coord.Hold(ctx) }()

	// Wait until the holder owns the mutex and waits for the slot.
	for {
		snap, err := admin.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if a, ok := snap.AliveOf("n1"); ok && a.State == "waiting" && len(snap.Queue) == 1 && snap.Queue[0].Node == "n1" &&
			a.Blocked != "" && a.Blocked != "queued for the cluster lock, position 1" {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("holder ended early: %v (snapshot %+v)", err, snap)
		default:
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The window closes, then the slot frees.
	now.Store(time.Date(2026, 12, 1, 23, 5, 0, 0, time.UTC).UnixNano())
	snap, err := admin.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slot, _ := snap.Slot("other")
	if err := admin.ReleaseSlot(ctx, slot, cluster.HistoryEvent{Event: "completed", Node: "other", At: time.Now()}, time.Hour); err != nil {
		t.Fatal(err)
	}
	err = <-done
	select {
	case r := <-rebooted:
		t.Fatalf("rebooted (%s) after the window closed", r)
	default:
	}
	var ce *co.Error
	if !errors.As(err, &ce) || ce.Code != co.CodeBlocked || ce.Gate != "window" {
		t.Fatalf("Hold = %v, want exit 5 from the window gate", err)
	}
	snap, err = admin.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Slots) != 0 || len(snap.Queue) != 0 {
		t.Fatalf("left behind: slots %v, queue %v", snap.Slots, snap.Queue)
	}
}

type rebootFunc func(reason string) error

func (f rebootFunc) Reboot(_ context.Context, reason string) error { return f(reason) }
