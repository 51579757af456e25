package cluster

import (
	"context"
	"slices"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Snapshot is the whole cluster state except history, read at one revision.
type Snapshot struct {
	Revision int64 // etcd revision the snapshot was read at
	Members  []Member
	Alive    []Alive
	Slots    []Slot // with ModRevision set
	Pause    *Pause
	Settings *Settings
	Queue    []LockWaiter // mutex queue, ordered by CreateRevision; [0] owns the mutex

	aliveLease map[string]int64 // lease of each P/alive/<node> key
}

// AliveLease returns the lease the alive record of node was attached to at
// the snapshot's revision (0 when there is no record). It is a hint for
// PublishAliveOn: the lease may have expired since.
func (s Snapshot) AliveLease(node string) int64 { return s.aliveLease[node] }

// Slot returns the slot of node, if any.
func (s Snapshot) Slot(node string) (Slot, bool) {
	for _, sl := range s.Slots {
		if sl.Node == node {
			return sl, true
		}
	}
	return Slot{}, false
}

// AliveOf returns the alive record of node, if any.
func (s Snapshot) AliveOf(node string) (Alive, bool) {
	for _, a := range s.Alive {
		if a.Node == node {
			return a, true
		}
	}
	return Alive{}, false
}

// Owner returns the waiter that owns the mutex, if the queue is not empty.
func (s Snapshot) Owner() (LockWaiter, bool) {
	if len(s.Queue) == 0 {
		return LockWaiter{}, false
	}
	return s.Queue[0], true
}

// Snapshot reads every key under P except history in one Txn of two range
// reads, [P/, P/history/) and [P/history0, P0), so both see one revision:
// 1 etcd request. Any value that does not decode strictly, and any key under
// P that this version does not know, fails the whole snapshot with a
// *CorruptError naming the key (fail closed). Keys under P/lock/ never do:
// whoever queued there is a waiter, possibly anonymous.
func (c *Client) Snapshot(ctx context.Context) (Snapshot, error) {
	p := c.prefix
	return c.snapshot(ctx,
		clientv3.OpGet(p+"/", clientv3.WithRange(p+"/"+KeyHistory)),
		clientv3.OpGet(p+"/history0", clientv3.WithRange(p+"0")),
	)
}

// SnapshotWithoutQueue is Snapshot without the mutex queue (Queue is
// empty): what the gates need. With many holders queued the queue is most
// of the bytes (one annotated key each), and a holder reads the cluster
// under the lock on every handover. 1 etcd request.
func (c *Client) SnapshotWithoutQueue(ctx context.Context) (Snapshot, error) {
	p := c.prefix
	return c.snapshot(ctx,
		clientv3.OpGet(p+"/", clientv3.WithRange(p+"/"+KeyHistory)),
		clientv3.OpGet(p+"/history0", clientv3.WithRange(p+"/"+KeyLock+"/")),
		clientv3.OpGet(p+"/"+KeyLock+"0", clientv3.WithRange(p+"0")),
	)
}

// QueueSnapshot is the mutex queue alone (Queue; everything else empty): a
// holder's place in line without reading every member and alive record.
// 1 etcd request, O(queue) bytes.
func (c *Client) QueueSnapshot(ctx context.Context) (Snapshot, error) {
	return c.snapshot(ctx, clientv3.OpGet(c.key(KeyLock)+"/", clientv3.WithPrefix()))
}

// NodeSnapshot is the part of Snapshot an idle check needs, whatever the
// cluster's size: node's own member and alive records, every slot (at most
// max_concurrent), the pause and the settings; no other node's records and
// no queue. 1 etcd request. An idle tick on every node of a fleet thus
// costs etcd O(1) each instead of O(members).
func (c *Client) NodeSnapshot(ctx context.Context, node string) (Snapshot, error) {
	if err := checkNode(node); err != nil {
		return Snapshot{}, err
	}
	return c.snapshot(ctx,
		clientv3.OpGet(c.key(KeyMembers+node)),
		clientv3.OpGet(c.key(KeyAlive+node)),
		clientv3.OpGet(c.key(KeySlots), clientv3.WithPrefix()),
		clientv3.OpGet(c.key(KeyPause)),
		clientv3.OpGet(c.key(KeySettings)),
	)
}

func (c *Client) snapshot(ctx context.Context, ranges ...clientv3.Op) (Snapshot, error) {
	rctx, cancel := c.request(ctx)
	defer cancel()
	resp, err := c.cli.Txn(rctx).Then(ranges...).Commit()
	if err != nil {
		return Snapshot{}, classify(ctx, "snapshot", err)
	}
	snap := Snapshot{Revision: resp.Header.Revision}
	for _, r := range resp.Responses {
		for _, kv := range r.GetResponseRange().Kvs {
			if err := c.addToSnapshot(&snap, kv); err != nil {
				return Snapshot{}, err
			}
		}
	}
	slices.SortFunc(snap.Queue, func(a, b LockWaiter) int {
		return cmpInt64(a.CreateRevision, b.CreateRevision)
	})
	return snap, nil
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (c *Client) addToSnapshot(snap *Snapshot, kv *mvccpb.KeyValue) error {
	key := string(kv.Key)
	rel, ok := strings.CutPrefix(key, c.prefix+"/")
	if !ok {
		return corrupt(key, "key outside the cluster prefix")
	}
	switch {
	case rel == KeyPause:
		p, err := decodePause(key, kv.Value)
		if err != nil {
			return err
		}
		snap.Pause = &p
	case rel == KeySettings:
		s, err := decodeSettings(key, kv.Value)
		if err != nil {
			return err
		}
		snap.Settings = &s
	case strings.HasPrefix(rel, KeyLock+"/"):
		snap.Queue = append(snap.Queue, decodeLockWaiter(key, kv.CreateRevision, kv.Lease, kv.Value))
	default:
		dir, node, ok := strings.Cut(rel, "/")
		if !ok || node == "" || strings.Contains(node, "/") {
			return corrupt(key, "unknown key")
		}
		if err := checkNode(node); err != nil {
			return corrupt(key, "impossible node name in the key")
		}
		switch dir + "/" {
		case KeyMembers:
			m, err := decodeMember(key, node, kv.Value)
			if err != nil {
				return err
			}
			snap.Members = append(snap.Members, m)
		case KeyAlive:
			a, err := decodeAlive(key, node, kv.Value)
			if err != nil {
				return err
			}
			snap.Alive = append(snap.Alive, a)
			if snap.aliveLease == nil {
				snap.aliveLease = make(map[string]int64)
			}
			snap.aliveLease[node] = kv.Lease
		case KeySlots:
			s, err := decodeSlot(key, node, kv.Value, kv.ModRevision)
			if err != nil {
				return err
			}
			snap.Slots = append(snap.Slots, s)
		default:
			return corrupt(key, "unknown key")
		}
	}
	return nil
}
