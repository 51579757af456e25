package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// LockInfo annotates our mutex queue entry, so Snapshot.Queue shows who waits.
type LockInfo struct {
	Node   string
	PID    int
	BootID string
}

// Session is a holder's etcd session: one lease kept alive in the background,
// the cluster mutex on that lease, and the fenced slot write.
//
// The mutex is the concurrency.Mutex protocol on P/lock, so it is FIFO by
// create revision and interoperates with `etcdctl lock P/lock`: an operator
// holding that lock blocks every holder. Lock writes our annotation
// (LockInfo) at exactly the key a concurrency.Mutex of this session would
// use, P/lock/<lease in hex>, with the session lease; its create revision is
// our place in the queue, and the session owns the mutex once no key under
// the prefix was created before it (what Mutex.Lock waits for).
type Session struct {
	c     *Client
	cs    *concurrency.Session
	info  LockInfo
	ttl   time.Duration // as granted, whole seconds
	key   string        // our mutex key
	mpfx  string        // mutex prefix as given to NewMutex
	last  atomic.Int64  // unix nanos of the last successful keepalive
	stopc context.CancelFunc

	mu       sync.Mutex
	ownerRev int64 // create revision of key while this session owns the mutex, else 0
	locking  bool  // a Lock is waiting
	closed   bool
}

// errSessionDone is the cancel cause of a Lock whose session ended.
var errSessionDone = errors.New("session lease expired or no longer kept alive")

// NewSession grants a lease of ttl (whole seconds, rounded up) and keeps it
// alive until Close, the client's Close, or the lease is lost: 1 etcd request
// (Grant) plus the keepalive stream. info annotates the mutex queue entry.
func (c *Client) NewSession(ctx context.Context, ttl time.Duration, info LockInfo) (*Session, error) {
	if err := checkNode(info.Node); err != nil {
		return nil, err
	}
	if ttl <= 0 {
		return nil, fmt.Errorf("%w: session ttl %s", ErrInvalid, ttl)
	}
	ttlSec := ttlSeconds(ttl)
	lease, err := c.grant(ctx, ttlSec)
	if err != nil {
		return nil, classify(ctx, "new session", err)
	}
	cs, err := concurrency.NewSession(c.cli, concurrency.WithLease(lease), concurrency.WithTTL(int(ttlSec)))
	if err != nil {
		c.revoke(ctx, lease)
		return nil, classify(ctx, "new session", err)
	}
	mctx, stop := context.WithCancel(c.cli.Ctx())
	kac, err := c.cli.KeepAlive(mctx, lease)
	if err != nil {
		stop()
		cs.Orphan()
		c.revoke(ctx, lease)
		return nil, classify(ctx, "new session", err)
	}
	mpfx := c.key(KeyLock)
	s := &Session{
		c: c, cs: cs, info: info, ttl: time.Duration(ttlSec) * time.Second, stopc: stop,
		mpfx: mpfx, key: fmt.Sprintf("%s/%x", mpfx, cs.Lease()), // as concurrency.Mutex.tryAcquire
	}
	s.last.Store(time.Now().UnixNano()) // the grant just succeeded
	go func() {
		for resp := range kac {
			if resp != nil && resp.TTL > 0 {
				s.last.Store(time.Now().UnixNano())
			}
		}
	}()
	c.log.Debug("etcd session started", "lease_id", fmt.Sprintf("%x", int64(lease)), "ttl", s.ttl)
	return s, nil
}

// revoke revokes a lease, bounded, ignoring errors (cleanup only).
func (c *Client) revoke(ctx context.Context, lease clientv3.LeaseID) {
	rctx, cancel := c.request(context.WithoutCancel(ctx))
	defer cancel()
	_, _ = c.cli.Revoke(rctx, lease)
}

// LeaseID is the session's lease.
func (s *Session) LeaseID() int64 { return int64(s.cs.Lease()) }

// Key is the session's mutex key, P/lock/<lease in hex>.
func (s *Session) Key() string { return s.key }

// Done is closed when the lease is lost or no longer kept alive (expired,
// revoked, not refreshed within its TTL), and after Close.
func (s *Session) Done() <-chan struct{} { return s.cs.Done() }

// LastKeepAlive is when the lease was last confirmed alive by etcd.
func (s *Session) LastKeepAlive() time.Time { return time.Unix(0, s.last.Load()) }

// KeepAliveHealthy reports whether the lease keepalive succeeded within the
// last half TTL (the client refreshes every third of the TTL), and the
// session is not done. The holder pings the systemd watchdog only while this
// is true.
func (s *Session) KeepAliveHealthy() bool {
	select {
	case <-s.cs.Done():
		return false
	default:
	}
	return time.Since(s.LastKeepAlive()) < s.ttl/2
}

// Lock queues on the cluster mutex and waits until this session owns it, ctx
// ends (ctx's error), the session ends (ErrLockLost) or the connection to
// etcd breaks while waiting (ErrUnavailable). The wait has no
// request timeout; each request before it has. Requests: 1 Txn for the
// annotation (our queue entry), then 1 Txn per read of the queue and a watch
// per waiter ahead; with nobody ahead, 2 requests in all.
// On failure our queue entry is deleted (best effort): retry Lock or Close.
// Locking a session that already owns the mutex is a no-op; a session that
// has ended (Done) gets ErrLockLost.
func (s *Session) Lock(ctx context.Context) error {
	select {
	case <-s.cs.Done():
		return fmt.Errorf("%w: lock: %w", ErrLockLost, errSessionDone)
	default:
	}
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		return fmt.Errorf("%w: session closed", ErrLockLost)
	case s.ownerRev != 0:
		s.mu.Unlock()
		return nil
	case s.locking:
		s.mu.Unlock()
		return errors.New("cluster: lock: another Lock of this session is in progress")
	}
	s.locking = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.locking = false
		s.mu.Unlock()
	}()

	lctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(s.cs.Ctx(), func() { cancel(errSessionDone) })
	defer stop()
	var rev int64
	for {
		var err error
		if rev, err = s.annotate(ctx, lctx); err != nil {
			if !errors.Is(err, ErrLockLost) {
				s.dropEntry(ctx) // the write may have happened before the error
			}
			return err
		}
		err = s.waitTurn(lctx, rev)
		if errors.Is(err, errEntryGone) {
			// Our key was deleted while we waited (by an operator, say):
			// queue again at the end, as concurrency.Mutex would.
			s.c.log.Debug("mutex key vanished while waiting; queueing again", "key", s.key, "create_revision", rev)
			continue
		}
		if err != nil {
			return s.lockFailed(ctx, lctx, err)
		}
		break
	}
	s.mu.Lock()
	closed := s.closed
	if !closed {
		s.ownerRev = rev
	}
	s.mu.Unlock()
	if closed {
		return fmt.Errorf("%w: lock: session closed", ErrLockLost)
	}
	s.c.log.Debug("cluster mutex acquired", "key", s.key, "create_revision", rev)
	return nil
}

// annotate puts our LockInfo at the mutex key unless it exists, and returns
// the key's create revision (our place in the queue).
func (s *Session) annotate(ctx, lctx context.Context) (int64, error) {
	val, err := encode(lockAnnotation{Node: s.info.Node, PID: s.info.PID, BootID: s.info.BootID, QueuedAt: time.Now().UTC()})
	if err != nil {
		return 0, err
	}
	rctx, cancel := s.c.request(lctx)
	defer cancel()
	resp, err := s.c.cli.Txn(rctx).
		If(clientv3.Compare(clientv3.CreateRevision(s.key), "=", 0)).
		Then(clientv3.OpPut(s.key, val, clientv3.WithLease(s.cs.Lease()))).
		Else(clientv3.OpGet(s.key)).
		Commit()
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound) || errors.Is(context.Cause(lctx), errSessionDone):
		return 0, fmt.Errorf("%w: lock: %w", ErrLockLost, errSessionDone)
	case err != nil && ctx.Err() != nil: // the caller's wait ended: not etcd's fault
		return 0, fmt.Errorf("cluster: lock: %w", ctx.Err())
	case err != nil:
		return 0, classify(ctx, "lock", err)
	}
	if resp.Succeeded {
		return resp.Header.Revision, nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 { // deleted between compare and get: impossible in one Txn
		return 0, fmt.Errorf("%w: lock: mutex key %s vanished", ErrLockLost, s.key)
	}
	return kvs[0].CreateRevision, nil
}

// dropEntry deletes our queue entry, bounded, ignoring errors: left behind,
// at the head of the queue it would own the mutex for nobody until the
// session ends.
func (s *Session) dropEntry(ctx context.Context) {
	rctx, cancel := s.c.request(context.WithoutCancel(ctx))
	defer cancel()
	_, _ = s.c.cli.Delete(rctx, s.key)
}

func (s *Session) lockFailed(ctx, lctx context.Context, err error) error {
	sessionDone := errors.Is(context.Cause(lctx), errSessionDone)
	if !sessionDone {
		s.dropEntry(ctx)
	}
	switch {
	case sessionDone || errors.Is(err, ErrLockLost) || errors.Is(err, rpctypes.ErrLeaseNotFound):
		return fmt.Errorf("%w: lock: %w", ErrLockLost, errSessionDone)
	case ctx.Err() != nil:
		return fmt.Errorf("cluster: lock: %w", ctx.Err())
	}
	return classify(ctx, "lock", err)
}

// Unlock releases the mutex (deletes our key): 1 etcd request. Unlocking a
// session that does not own the mutex (any more: AcquireSlot releases it) is
// a no-op.
func (s *Session) Unlock(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ownerRev == 0 {
		return nil
	}
	rctx, cancel := s.c.request(ctx)
	defer cancel()
	if _, err := s.c.cli.Delete(rctx, s.key); err != nil {
		return classify(ctx, "unlock", err)
	}
	s.ownerRev = 0
	return nil
}

// Close stops the keepalive and revokes the lease, which deletes our mutex
// key: 1 etcd request, bounded by the request timeout. If the revoke fails
// the lease expires on its own within its TTL. Close is idempotent.
func (s *Session) Close(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.ownerRev = 0
	s.stopc()
	s.cs.Orphan()
	rctx, cancel := s.c.request(ctx)
	defer cancel()
	_, err := s.c.cli.Revoke(rctx, s.cs.Lease())
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return nil
	}
	return classify(ctx, "close session", err)
}

// AcquireSlot is the fenced write, and it releases the mutex: one Txn
//
//	If   CreateRevision(our mutex key) == our queue revision
//	 and CreateRevision(P/slots/<node>) == 0
//	Then Put P/slots/<node> (durable), Put the history record (history lease),
//	     Delete our mutex key (unlock: the slot protects the cluster now)
//	Else Get both
//
// The unlock in the same Txn saves the next holder in the queue one round
// trip of the serialised part of a wave (docs/performance.md); after a
// success the session no longer owns the mutex and Unlock is a no-op. After
// a failure nothing was written and the session is as before.
// 1 etcd request (3 for the first history record of a bucket). It fails with
// ErrLockLost when this session does not own the mutex any more (or never
// did), and ErrConflict when the node already has a slot. slot.Node defaults
// to the session's node and must equal it; FenceRevision is set to the mutex
// key's create revision. ev defaults: Event slot-taken, Node, BootID and
// Reason from the slot, At = slot.AcquiredAt. It returns the slot as written,
// with ModRevision.
func (s *Session) AcquireSlot(ctx context.Context, slot Slot, ev HistoryEvent, historyTTL time.Duration) (Slot, error) {
	s.mu.Lock()
	rev := s.ownerRev
	s.mu.Unlock()
	if rev == 0 {
		return Slot{}, fmt.Errorf("%w: acquire slot: %w", ErrLockLost, errNotLocked)
	}
	if slot.Node == "" {
		slot.Node = s.info.Node
	}
	if slot.Node != s.info.Node {
		return Slot{}, fmt.Errorf("%w: slot for %q from the session of %q", ErrInvalid, slot.Node, s.info.Node)
	}
	slot.FenceRevision = rev
	if err := slot.validate(s.info.Node); err != nil {
		return Slot{}, invalid("slot", err)
	}
	ev = slotEvent(slot, ev)
	val, err := encode(slot)
	if err != nil {
		return Slot{}, err
	}
	hist, l, err := s.c.historyOp(ev, historyTTL)
	if err != nil {
		return Slot{}, err
	}
	slotKey := s.c.key(KeySlots + slot.Node)
	resp, err := s.c.commitWithHistory(ctx, hist, l, func(t clientv3.Txn) clientv3.Txn {
		return t.If(
			clientv3.Compare(clientv3.CreateRevision(s.key), "=", rev),
			clientv3.Compare(clientv3.CreateRevision(slotKey), "=", 0),
		).Then(
			clientv3.OpPut(slotKey, val), hist, clientv3.OpDelete(s.key),
		).Else(
			clientv3.OpGet(s.key, clientv3.WithKeysOnly()), clientv3.OpGet(slotKey, clientv3.WithKeysOnly()),
		)
	})
	if err != nil {
		return Slot{}, classify(ctx, "acquire slot "+slot.Node, err)
	}
	if !resp.Succeeded {
		mine := resp.Responses[0].GetResponseRange().Kvs
		if len(mine) == 0 || mine[0].CreateRevision != rev {
			return Slot{}, fmt.Errorf("%w: acquire slot %s: mutex key %s (revision %d) is gone", ErrLockLost, slot.Node, s.key, rev)
		}
		return Slot{}, fmt.Errorf("%w: acquire slot %s: the node already has a slot", ErrConflict, slot.Node)
	}
	slot.ModRevision = resp.Header.Revision
	s.mu.Lock()
	if s.ownerRev == rev {
		s.ownerRev = 0 // released by the Txn
	}
	s.mu.Unlock()
	s.c.log.Debug("slot acquired", "node", slot.Node, "fence_revision", rev, "revision", slot.ModRevision)
	return slot, nil
}

func slotEvent(slot Slot, ev HistoryEvent) HistoryEvent {
	if ev.Event == "" {
		ev.Event = EventSlotTaken
	}
	if ev.Node == "" {
		ev.Node = slot.Node
	}
	if ev.BootID == "" {
		ev.BootID = slot.BootID
	}
	if ev.Reason == "" {
		ev.Reason = slot.Reason
	}
	if ev.At.IsZero() {
		ev.At = slot.AcquiredAt
	}
	return ev
}
