package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// UpdateSlot rewrites an existing slot (for example to record HealthySince),
// guarded by s.ModRevision: 1 etcd request (Txn If ModRevision == s.ModRevision
// Then Put). It returns the slot with its new ModRevision, or ErrConflict when
// the slot changed or vanished since it was read.
func (c *Client) UpdateSlot(ctx context.Context, s Slot) (Slot, error) {
	if err := checkNode(s.Node); err != nil {
		return Slot{}, err
	}
	if err := s.validate(s.Node); err != nil {
		return Slot{}, invalid("slot", err)
	}
	if s.ModRevision <= 0 {
		return Slot{}, fmt.Errorf("%w: slot of %s has no ModRevision: read it first", ErrInvalid, s.Node)
	}
	val, err := encode(s)
	if err != nil {
		return Slot{}, err
	}
	key := c.key(KeySlots + s.Node)
	rctx, cancel := c.request(ctx)
	defer cancel()
	resp, err := c.cli.Txn(rctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", s.ModRevision)).
		Then(clientv3.OpPut(key, val)).
		Commit()
	if err != nil {
		return Slot{}, classify(ctx, "update slot "+s.Node, err)
	}
	if !resp.Succeeded {
		return Slot{}, fmt.Errorf("%w: slot of %s changed since revision %d", ErrConflict, s.Node, s.ModRevision)
	}
	s.ModRevision = resp.Header.Revision
	return s, nil
}

// ReleaseSlot deletes the slot and writes ev in one Txn guarded by
// s.ModRevision (only s.Node and s.ModRevision are used): 1 etcd request (3
// for the first history record of a bucket). ErrConflict when the slot
// changed or vanished since it was read. ev.Node defaults to s.Node and ev.At
// to now.
func (c *Client) ReleaseSlot(ctx context.Context, s Slot, ev HistoryEvent, historyTTL time.Duration) error {
	if err := checkNode(s.Node); err != nil {
		return err
	}
	if s.ModRevision <= 0 {
		return fmt.Errorf("%w: slot of %s has no ModRevision: read it first", ErrInvalid, s.Node)
	}
	if ev.Node == "" {
		ev.Node = s.Node
	}
	hist, l, err := c.historyOp(ev, historyTTL)
	if err != nil {
		return err
	}
	key := c.key(KeySlots + s.Node)
	resp, err := c.commitWithHistory(ctx, hist, l, func(t clientv3.Txn) clientv3.Txn {
		return t.If(clientv3.Compare(clientv3.ModRevision(key), "=", s.ModRevision)).
			Then(clientv3.OpDelete(key), hist)
	})
	if err != nil {
		return classify(ctx, "release slot "+s.Node, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("%w: slot of %s changed since revision %d", ErrConflict, s.Node, s.ModRevision)
	}
	return nil
}

// errNotLocked is wrapped in ErrLockLost when a fenced write is attempted
// without holding the mutex.
var errNotLocked = errors.New("the session does not hold the mutex")
