package cluster

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

func withPrefix() clientv3.OpOption { return clientv3.WithPrefix() }

// waitQueue waits until the mutex queue has n entries and returns it.
func waitQueue(t *testing.T, e *env, n int) []LockWaiter {
	t.Helper()
	ctx := ctxT(t)
	for {
		snap, err := e.c.Snapshot(ctx)
		if err != nil {
			t.Fatalf("Snapshot: %v", err)
		}
		if len(snap.Queue) == n {
			return snap.Queue
		}
		select {
		case <-ctx.Done():
			t.Fatalf("queue never reached %d entries: %+v", n, snap.Queue)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// queueBehind gives n1 the mutex and queues n2 behind it: n2's Lock runs
// in the background and its result arrives on done. It returns once both
// entries are in the queue, with the queue then.
func queueBehind(t *testing.T, e *env) (s1, s2 *Session, done <-chan error, q []LockWaiter) {
	t.Helper()
	ctx := ctxT(t)
	s1, s2 = e.session(t, "n1", time.Minute), e.session(t, "n2", time.Minute)
	if err := s1.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	ch := make(chan error, 1)
	go func() { ch <- s2.Lock(ctx) }()
	return s1, s2, ch, waitQueue(t, e, 2)
}

func TestMutexFIFO(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	s1, s2, s3 := e.session(t, "n1", time.Minute), e.session(t, "n2", time.Minute), e.session(t, "n3", time.Minute)
	if err := s1.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s1.Lock(ctx); err != nil { // already owned: no-op
		t.Fatalf("second Lock: %v", err)
	}
	acquired := make(chan string, 3)
	lock := func(s *Session, name string) {
		if err := s.Lock(ctx); err != nil {
			acquired <- "error " + err.Error()
			return
		}
		acquired <- name
	}
	go lock(s2, "n2")
	waitQueue(t, e, 2) // n2 is queued before n3 calls Lock
	go lock(s3, "n3")
	q := waitQueue(t, e, 3)
	for i, want := range []string{"n1", "n2", "n3"} {
		if q[i].Node != want || q[i].BootID != "boot-"+want || q[i].PID != 4242 {
			t.Fatalf("Queue[%d] = %+v, want node %s", i, q[i], want)
		}
	}
	if q[0].Key != s1.Key() || q[1].Key != s2.Key() || q[2].Key != s3.Key() {
		t.Fatalf("queue keys %+v differ from the session keys", q)
	}
	select {
	case got := <-acquired:
		t.Fatalf("%s acquired while n1 holds the mutex", got)
	default:
	}
	if err := s1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if got := <-acquired; got != "n2" {
		t.Fatalf("after n1 unlocked: %s acquired, want n2", got)
	}
	if err := s2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if got := <-acquired; got != "n3" {
		t.Fatalf("after n2 unlocked: %s acquired, want n3", got)
	}
	if err := s3.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s3.Unlock(ctx); err != nil { // not locked: no-op
		t.Fatalf("second Unlock: %v", err)
	}
	waitQueue(t, e, 0)
}

func TestEtcdctlLockBlocksAndStillDecodes(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	// What `etcdctl lock /clusterrebootd/test/lock` does.
	ps, err := concurrency.NewSession(e.raw, concurrency.WithTTL(60))
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	pm := concurrency.NewMutex(ps, e.P+"/lock")
	if err := pm.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	// A foreign, non-JSON value in the queue is anonymous too.
	lease, err := e.raw.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	foreign := fmt.Sprintf("%s/lock/%x", e.P, lease.ID)
	e.put(t, foreign, "operator was here", clientv3.WithLease(lease.ID))

	s := e.session(t, "n1", time.Minute)
	short, cancel := context.WithTimeout(ctx, time.Second)
	err = s.Lock(short)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrUnavailable) {
		t.Fatalf("Lock while etcdctl holds the lock: %v, want the context's deadline", err)
	}
	q := waitQueue(t, e, 2) // our entry was removed after the failed Lock
	if q[0].Key != pm.Key() || q[0].Node != "" || q[1].Key != foreign || q[1].Node != "" {
		t.Fatalf("Queue = %+v, want the anonymous etcdctl owner then the foreign waiter", q)
	}

	done := make(chan error, 1)
	go func() { done <- s.Lock(ctx) }()
	q = waitQueue(t, e, 3)
	if q[2].Node != "n1" {
		t.Fatalf("Queue[2] = %+v, want n1", q[2])
	}
	if err := pm.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("Lock returned (%v) while the foreign waiter is ahead", err)
	case <-time.After(200 * time.Millisecond):
	}
	if _, err := e.raw.Revoke(ctx, lease.ID); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Lock after the etcdctl lock was released: %v", err)
	}
}

func TestAcquireSlotFenced(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	now := time.Now().UTC().Truncate(time.Millisecond)
	// A short TTL: the client learns of the revoked lease at its next
	// keepalive, a third of the TTL later.
	s := e.session(t, "n1", 3*time.Second)

	if _, err := s.AcquireSlot(ctx, testSlot("n1", now), HistoryEvent{}, time.Hour); !errors.Is(err, ErrLockLost) {
		t.Fatalf("AcquireSlot without the lock: %v, want ErrLockLost", err)
	}
	if err := s.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcquireSlot(ctx, testSlot("n2", now), HistoryEvent{}, time.Hour); !errors.Is(err, ErrInvalid) {
		t.Fatalf("AcquireSlot for another node: %v, want ErrInvalid", err)
	}
	bad := testSlot("n1", now)
	bad.BootID = ""
	if _, err := s.AcquireSlot(ctx, bad, HistoryEvent{}, time.Hour); !errors.Is(err, ErrInvalid) {
		t.Fatalf("AcquireSlot without boot id: %v, want ErrInvalid", err)
	}
	if _, err := s.AcquireSlot(ctx, testSlot("n1", now), HistoryEvent{}, 0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("AcquireSlot without history ttl: %v, want ErrInvalid", err)
	}

	in := testSlot("", now)
	owner := waitQueue(t, e, 1)[0]
	got, err := s.AcquireSlot(ctx, in, HistoryEvent{}, time.Hour)
	if err != nil {
		t.Fatalf("AcquireSlot: %v", err)
	}
	if got.Node != "n1" || got.FenceRevision != owner.CreateRevision || got.ModRevision <= got.FenceRevision {
		t.Fatalf("slot = %+v, owner %+v", got, owner)
	}
	kv := e.get(t, e.P+"/slots/n1").Kvs
	if len(kv) != 1 || kv[0].ModRevision != got.ModRevision || kv[0].Lease != 0 {
		t.Fatalf("stored slot %+v: want ModRevision %d and no lease", kv, got.ModRevision)
	}
	hist, err := e.c.History(ctx, "n1", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	want := HistoryEvent{Event: EventSlotTaken, Node: "n1", Reason: in.Reason, BootID: in.BootID, At: now, Revision: got.ModRevision}
	if len(hist) != 1 || hist[0] != want {
		t.Fatalf("history = %+v, want [%+v]", hist, want)
	}

	// The Txn released the mutex: our key is gone, Unlock is a no-op, and
	// a second fenced write needs the lock again.
	if e.exists(t, s.Key()) {
		t.Fatal("the mutex key survived the fenced write")
	}
	if _, err := s.AcquireSlot(ctx, testSlot("n1", now), HistoryEvent{}, time.Hour); !errors.Is(err, ErrLockLost) {
		t.Fatalf("AcquireSlot after the fenced write released the lock: %v, want ErrLockLost", err)
	}
	if err := s.Unlock(ctx); err != nil {
		t.Fatalf("Unlock after the fenced write: %v", err)
	}
	if err := s.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcquireSlot(ctx, testSlot("n1", now), HistoryEvent{}, time.Hour); !errors.Is(err, ErrConflict) {
		t.Fatalf("AcquireSlot with an existing slot: %v, want ErrConflict", err)
	}
	if !e.exists(t, s.Key()) {
		t.Fatal("a failed fenced write released the mutex")
	}
	if _, err := e.raw.Delete(ctx, e.P+"/slots/n1"); err != nil {
		t.Fatal(err)
	}

	// Another client revokes the session's lease: the mutex key vanishes.
	if _, err := e.raw.Revoke(ctx, clientv3.LeaseID(s.LeaseID())); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcquireSlot(ctx, testSlot("n1", now), HistoryEvent{}, time.Hour); !errors.Is(err, ErrLockLost) {
		t.Fatalf("AcquireSlot after the lease was revoked: %v, want ErrLockLost", err)
	}
	if e.exists(t, e.P+"/slots/n1") {
		t.Fatal("a slot was written without the lock")
	}
	select {
	case <-s.Done():
	case <-ctx.Done():
		t.Fatal("session not done after its lease was revoked")
	}
	if s.KeepAliveHealthy() {
		t.Fatal("KeepAliveHealthy after the lease was revoked")
	}
	if err := s.Lock(ctx); !errors.Is(err, ErrLockLost) {
		t.Fatalf("Lock on a dead session: %v, want ErrLockLost", err)
	}
}

func TestAcquireSlotLostToNewerOwner(t *testing.T) {
	// The mutex key was deleted (say by an operator) and another session
	// took the lock: the old owner's fenced write must fail.
	e := newEnv(t)
	ctx := ctxT(t)
	now := time.Now().UTC()
	s1, s2 := e.session(t, "n1", time.Minute), e.session(t, "n2", time.Minute)
	if err := s1.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.raw.Delete(ctx, s1.Key()); err != nil {
		t.Fatal(err)
	}
	if err := s2.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s1.AcquireSlot(ctx, testSlot("n1", now), HistoryEvent{}, time.Hour); !errors.Is(err, ErrLockLost) {
		t.Fatalf("old owner: %v, want ErrLockLost", err)
	}
	if _, err := s2.AcquireSlot(ctx, testSlot("n2", now), HistoryEvent{Event: EventDryRun, Reason: "dry"}, time.Hour); err != nil {
		t.Fatalf("new owner: %v", err)
	}
	hist, err := e.c.History(ctx, "", time.Time{})
	if err != nil || len(hist) != 1 || hist[0].Event != EventDryRun || hist[0].Reason != "dry" {
		t.Fatalf("history = %+v, %v", hist, err)
	}
}

func TestSessionLifecycle(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	if _, err := e.c.NewSession(ctx, time.Minute, LockInfo{}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("NewSession without node: %v", err)
	}
	if _, err := e.c.NewSession(ctx, 0, LockInfo{Node: "n1"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("NewSession with ttl 0: %v", err)
	}
	s, err := e.c.NewSession(ctx, 2500*time.Millisecond, LockInfo{Node: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%s/lock/%x", e.P, s.LeaseID()); s.Key() != want {
		t.Fatalf("Key() = %s, want %s", s.Key(), want)
	}
	if !s.KeepAliveHealthy() {
		t.Fatal("new session not healthy")
	}
	// Kept alive well past its TTL (3 s after rounding).
	time.Sleep(4 * time.Second)
	ttl, err := e.raw.TimeToLive(ctx, clientv3.LeaseID(s.LeaseID()))
	if err != nil || ttl.TTL <= 0 {
		t.Fatalf("lease after 1.5 TTL: %+v, %v", ttl, err)
	}
	if !s.KeepAliveHealthy() || time.Since(s.LastKeepAlive()) > 3*time.Second {
		t.Fatalf("keepalive not healthy: last %s", s.LastKeepAlive())
	}
	if err := s.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	<-s.Done()
	if s.KeepAliveHealthy() {
		t.Fatal("healthy after Close")
	}
	if e.exists(t, s.Key()) {
		t.Fatal("mutex key survived Close")
	}
	if ttl, err := e.raw.TimeToLive(ctx, clientv3.LeaseID(s.LeaseID())); err != nil || ttl.TTL != -1 {
		t.Fatalf("lease after Close: %+v, %v", ttl, err)
	}
	if err := s.Lock(ctx); !errors.Is(err, ErrLockLost) {
		t.Fatalf("Lock after Close: %v, want ErrLockLost", err)
	}
}

func TestLockEndsWhenSessionDies(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	_, s2, done, _ := queueBehind(t, e)
	if _, err := e.raw.Revoke(ctx, clientv3.LeaseID(s2.LeaseID())); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrLockLost) {
		t.Fatalf("Lock of a session whose lease was revoked: %v, want ErrLockLost", err)
	}
	// Closing a session whose lease is gone is fine.
	if err := s2.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func TestCloseEndsLockWait(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	_, s2, done, _ := queueBehind(t, e)
	if err := s2.Lock(ctx); err == nil || errors.Is(err, ErrLockLost) {
		t.Fatalf("concurrent Lock on one session: %v, want an in-progress error", err)
	}
	if err := s2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrLockLost) {
		t.Fatalf("Lock after Close: %v, want ErrLockLost", err)
	}
	waitQueue(t, e, 1)
}

func TestLockReusesExistingQueueEntry(t *testing.T) {
	// An entry left by an earlier attempt of this session (same lease):
	// Lock keeps its place and its create revision fences the slot.
	e := newEnv(t)
	ctx := ctxT(t)
	s := e.session(t, "n1", time.Minute)
	e.put(t, s.Key(), "", clientv3.WithLease(clientv3.LeaseID(s.LeaseID())))
	created := e.get(t, s.Key()).Kvs[0].CreateRevision
	if err := s.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	slot, err := s.AcquireSlot(ctx, testSlot("n1", time.Now()), HistoryEvent{}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if slot.FenceRevision != created {
		t.Fatalf("FenceRevision %d, want the existing entry's %d", slot.FenceRevision, created)
	}
}

func TestLockRightAfterLeaseRevoked(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	s := e.session(t, "n1", time.Minute)
	if _, err := e.raw.Revoke(ctx, clientv3.LeaseID(s.LeaseID())); err != nil {
		t.Fatal(err)
	}
	// The keepalive has not noticed yet (Done is open): the annotation
	// write finds no lease.
	if err := s.Lock(ctx); !errors.Is(err, ErrLockLost) {
		t.Fatalf("Lock with a revoked lease: %v, want ErrLockLost", err)
	}
	if e.exists(t, s.Key()) {
		t.Fatal("queue entry written with a revoked lease")
	}
	if got := e.c.Prefix(); got != e.P {
		t.Fatalf("Prefix() = %q, want %q", got, e.P)
	}
}

func TestLockRequeuesWhenEntryVanishes(t *testing.T) {
	// n2's queue entry is deleted while it waits behind n1 (an operator
	// cleaning up, say): n2 queues again instead of owning the mutex
	// without a key, and its fenced write uses the new entry.
	e := newEnv(t)
	ctx := ctxT(t)
	s1, s2, done, before := queueBehind(t, e)
	first := before[1]
	if _, err := e.raw.Delete(ctx, s2.Key()); err != nil {
		t.Fatal(err)
	}
	if err := s1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Lock after the entry vanished: %v", err)
	}
	q := waitQueue(t, e, 1)
	if q[0].Key != s2.Key() || q[0].CreateRevision <= first.CreateRevision || q[0].Node != "n2" {
		t.Fatalf("queue %+v, want n2 queued again after revision %d", q, first.CreateRevision)
	}
	slot, err := s2.AcquireSlot(ctx, testSlot("n2", time.Now()), HistoryEvent{}, time.Hour)
	if err != nil || slot.FenceRevision != q[0].CreateRevision {
		t.Fatalf("AcquireSlot = %+v, %v; want fence %d", slot, err, q[0].CreateRevision)
	}
}
