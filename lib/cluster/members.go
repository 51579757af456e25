package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// checkNode rejects node names that cannot be a single key segment.
// checkNode accepts the node names a config can give (lib/config's
// NamePattern: a letter or digit, then letters, digits, '.', '_', '-'; at
// most 63 bytes), so no name read from or written to etcd can leave its key
// segment or forge a line of output.
func checkNode(node string) error {
	ok := node != "" && len(node) <= 63 && isAlnum(node[0])
	for i := 0; ok && i < len(node); i++ {
		c := node[i]
		ok = isAlnum(c) || c == '.' || c == '_' || c == '-'
	}
	if !ok {
		return fmt.Errorf("%w: node name %q", ErrInvalid, clip(node))
	}
	return nil
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// Register creates P/members/<node> unless it exists (Txn guarded by
// CreateRevision == 0): 1 etcd request. An existing registration is kept.
func (c *Client) Register(ctx context.Context, node string) error {
	if err := checkNode(node); err != nil {
		return err
	}
	val, err := encode(Member{Node: node, RegisteredAt: time.Now().UTC()})
	if err != nil {
		return err
	}
	key := c.key(KeyMembers + node)
	rctx, cancel := c.request(ctx)
	defer cancel()
	_, err = c.cli.Txn(rctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, val)).
		Commit()
	return classify(ctx, "register "+node, err)
}

// Forget deletes P/members/<node> and P/alive/<node> in one Txn guarded by
// the absence of P/slots/<node>: 1 etcd request. A node that holds a slot is
// refused with ErrSlotHeld: release the slot first.
func (c *Client) Forget(ctx context.Context, node string) error {
	if err := checkNode(node); err != nil {
		return err
	}
	slot := c.key(KeySlots + node)
	rctx, cancel := c.request(ctx)
	defer cancel()
	resp, err := c.cli.Txn(rctx).
		If(clientv3.Compare(clientv3.CreateRevision(slot), "=", 0)).
		Then(clientv3.OpDelete(c.key(KeyMembers+node)), clientv3.OpDelete(c.key(KeyAlive+node))).
		Commit()
	if err != nil {
		return classify(ctx, "forget "+node, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("%w: %s: release its slot before forgetting it", ErrSlotHeld, node)
	}
	return nil
}

// leaseSlack: a lease granted for less than this may come back longer (etcd
// raises short TTLs to its minimum), so such a difference does not force a
// new lease.
const leaseSlack = 5 // seconds

// PublishAlive writes a (validated) at P/alive/<a.Node> with a lease of ttl,
// reusing the lease the key already has. UpdatedAt defaults to now.
//
// etcd requests per call: 3 in 2 round trips — Get (the key's lease), then
// at the same time KeepAliveOnce of that lease and Put with it. When the key
// is absent, its lease is gone or its TTL differs from ttl: Grant and Put on
// the new lease (2 more). A lease abandoned because ttl changed expires on
// its own.
func (c *Client) PublishAlive(ctx context.Context, a Alive, ttl time.Duration) error {
	return c.PublishAliveOn(ctx, a, ttl, 0)
}

// PublishAliveOn is PublishAlive with a hint: lease is the one the key had in
// a recent Snapshot (Snapshot.AliveLease), so the Get is skipped and the call
// costs 2 requests in one round trip (KeepAliveOnce and Put, concurrently).
// A hint of 0 means "unknown" and costs the Get. A stale hint is harmless: a
// vanished lease fails the Put, and it is replaced by a new grant.
func (c *Client) PublishAliveOn(ctx context.Context, a Alive, ttl time.Duration, lease int64) error {
	if a.UpdatedAt.IsZero() {
		a.UpdatedAt = time.Now().UTC()
	}
	if err := checkNode(a.Node); err != nil {
		return err
	}
	if err := a.validate(a.Node); err != nil {
		return invalid("alive", err)
	}
	if ttl <= 0 {
		return fmt.Errorf("%w: alive ttl %s", ErrInvalid, ttl)
	}
	want := ttlSeconds(ttl)
	val, err := encode(a)
	if err != nil {
		return err
	}
	key := c.key(KeyAlive + a.Node)
	op := "publish alive " + a.Node

	id := clientv3.LeaseID(lease)
	if id == clientv3.NoLease {
		if id, err = c.leaseOf(ctx, key); err != nil {
			return classify(ctx, op, err)
		}
	}
	if id != clientv3.NoLease {
		// Refresh the lease and attach the record to it at the same time:
		// the Put fails if the lease is gone, and the refresh tells whether
		// the lease still has the TTL we want.
		refreshed := make(chan refreshResult, 1)
		go func() { ok, err := c.refreshLease(ctx, key, id, want); refreshed <- refreshResult{ok, err} }()
		perr := c.putOn(ctx, key, val, id)
		r := <-refreshed
		switch {
		case r.err != nil:
			return classify(ctx, op, r.err)
		case perr != nil && !errors.Is(perr, rpctypes.ErrLeaseNotFound):
			return classify(ctx, op, perr)
		case perr == nil && r.ok:
			return nil
		}
		// The lease is gone or has another TTL: a new one.
	}
	for attempt := 0; ; attempt++ {
		if id, err = c.grant(ctx, want); err != nil {
			return classify(ctx, op, err)
		}
		err = c.putOn(ctx, key, val, id)
		if errors.Is(err, rpctypes.ErrLeaseNotFound) && attempt == 0 {
			continue // expired between grant and put
		}
		return classify(ctx, op, err)
	}
}

type refreshResult struct {
	ok  bool
	err error
}

func (c *Client) putOn(ctx context.Context, key, val string, id clientv3.LeaseID) error {
	rctx, cancel := c.request(ctx)
	defer cancel()
	_, err := c.cli.Put(rctx, key, val, clientv3.WithLease(id))
	return err
}

// leaseOf returns the lease attached to key, or NoLease.
func (c *Client) leaseOf(ctx context.Context, key string) (clientv3.LeaseID, error) {
	rctx, cancel := c.request(ctx)
	defer cancel()
	// Not WithKeysOnly: etcd 3.7 answers keys-only ranges from its index,
	// without the Lease field. The value is small.
	resp, err := c.cli.Get(rctx, key)
	if err != nil {
		return clientv3.NoLease, err
	}
	if len(resp.Kvs) == 0 {
		return clientv3.NoLease, nil
	}
	return clientv3.LeaseID(resp.Kvs[0].Lease), nil
}

// refreshLease keeps lease id alive once and reports whether it is worth
// reusing: it exists and has the TTL we want (want seconds).
func (c *Client) refreshLease(ctx context.Context, key string, id clientv3.LeaseID, want int64) (bool, error) {
	rctx, cancel := c.request(ctx)
	defer cancel()
	ka, err := c.cli.KeepAliveOnce(rctx, id)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if ka.TTL < want || (ka.TTL > want && ka.TTL > leaseSlack) {
		c.log.Debug("alive ttl changed: new lease", "key", key, "old_ttl", ka.TTL, "ttl", want)
		return false, nil
	}
	return true, nil
}

func (c *Client) grant(ctx context.Context, ttl int64) (clientv3.LeaseID, error) {
	rctx, cancel := c.request(ctx)
	defer cancel()
	resp, err := c.cli.Grant(rctx, ttl)
	if err != nil {
		return clientv3.NoLease, err
	}
	return resp.ID, nil
}

// ttlSeconds rounds a TTL up to whole seconds, at least 1.
func ttlSeconds(d time.Duration) int64 {
	s := int64((d + time.Second - 1) / time.Second)
	return max(s, 1)
}
