package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// History records share leases: all records written in one time bucket
// (history_ttl/30, between 1 s and 24 h wide) are attached to one lease whose
// ID is derived from the prefix, the TTL and the bucket number, and whose TTL
// is history_ttl + the bucket width. So every record lives at least
// history_ttl and at most one bucket longer, a cluster has about 30 live
// history leases whatever it writes, and nobody needs to look a lease up: a
// record is written in the same Txn as the state change it documents, and
// only the first write of a bucket pays for granting the lease (the Txn fails
// with "lease not found", the lease is granted with its fixed ID, the Txn is
// sent again).
type historyLease struct {
	id  clientv3.LeaseID
	ttl int64 // seconds
}

const maxBucket = 24 * 60 * 60 // seconds

func (c *Client) historyLease(now time.Time, ttl time.Duration) historyLease {
	ttlSec := ttlSeconds(ttl)
	width := min(max(ttlSec/30, 1), maxBucket)
	bucket := now.Unix() / width
	h := fnv.New64a()
	fmt.Fprintf(h, "%s\x00%d\x00%d", c.prefix, ttlSec, bucket)
	id := int64(h.Sum64() >> 1) // positive
	if id == 0 {
		id = 1
	}
	return historyLease{id: clientv3.LeaseID(id), ttl: ttlSec + width}
}

// ensureLease grants l with its fixed ID; an existing lease is fine.
func (c *Client) ensureLease(ctx context.Context, l historyLease) error {
	rctx, cancel := c.request(ctx)
	defer cancel()
	_, err := clientv3.RetryLeaseClient(c.cli).LeaseGrant(rctx, &pb.LeaseGrantRequest{ID: int64(l.id), TTL: l.ttl})
	err = rpctypes.Error(err)
	if err == nil || errors.Is(err, rpctypes.ErrLeaseExist) {
		return nil
	}
	return err
}

// historyOp validates ev (At defaults to now) and returns its Put.
func (c *Client) historyOp(ev HistoryEvent, ttl time.Duration) (clientv3.Op, historyLease, error) {
	if ev.At.IsZero() {
		ev.At = time.Now().UTC()
	}
	if err := ev.validate(); err != nil {
		return clientv3.Op{}, historyLease{}, invalid("history", err)
	}
	if ttl <= 0 {
		return clientv3.Op{}, historyLease{}, fmt.Errorf("%w: history ttl %s", ErrInvalid, ttl)
	}
	val, err := encode(ev)
	if err != nil {
		return clientv3.Op{}, historyLease{}, err
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:]) // never fails (crypto/rand)
	key := c.key(fmt.Sprintf("%s%020d-%s", KeyHistory, max(ev.At.UnixNano(), 0), hex.EncodeToString(rnd[:])))
	l := c.historyLease(time.Now(), ttl)
	return clientv3.OpPut(key, val, clientv3.WithLease(l.id)), l, nil
}

// commitWithHistory sends the Txn built by txn, which must include hist;
// when the history lease does not exist yet it grants it and sends the Txn
// once more. Errors are not classified.
func (c *Client) commitWithHistory(ctx context.Context, hist clientv3.Op, l historyLease,
	txn func(clientv3.Txn) clientv3.Txn) (*clientv3.TxnResponse, error) {
	for attempt := 0; ; attempt++ {
		rctx, cancel := c.request(ctx)
		resp, err := txn(c.cli.Txn(rctx)).Commit()
		cancel()
		if attempt == 0 && errors.Is(err, rpctypes.ErrLeaseNotFound) {
			if err := c.ensureLease(ctx, l); err != nil {
				return nil, err
			}
			continue
		}
		return resp, err
	}
}

// AppendHistory writes one history record leased for at least ttl.
// At defaults to now. etcd requests: 1 (3 for the first record of a bucket).
func (c *Client) AppendHistory(ctx context.Context, ev HistoryEvent, ttl time.Duration) error {
	hist, l, err := c.historyOp(ev, ttl)
	if err != nil {
		return err
	}
	_, err = c.commitWithHistory(ctx, hist, l, func(t clientv3.Txn) clientv3.Txn { return t.Then(hist) })
	return classify(ctx, "append history", err)
}

// History returns the records of node ("" for all) whose time is not before
// since, ordered by etcd revision: 1 etcd request (a range read starting at
// since, as keys begin with the record's time). A record that does not decode
// strictly fails the call with a *CorruptError.
func (c *Client) History(ctx context.Context, node string, since time.Time) ([]HistoryEvent, error) {
	start := c.key(KeyHistory)
	if !since.IsZero() {
		start = c.key(fmt.Sprintf("%s%020d", KeyHistory, max(since.UnixNano(), 0)))
	}
	rctx, cancel := c.request(ctx)
	defer cancel()
	resp, err := c.cli.Get(rctx, start, clientv3.WithRange(c.prefix+"/history0"))
	if err != nil {
		return nil, classify(ctx, "history", err)
	}
	var out []HistoryEvent
	for _, kv := range resp.Kvs {
		ev, err := decodeHistory(string(kv.Key), kv.Value, kv.CreateRevision)
		if err != nil {
			return nil, err
		}
		if (node == "" || ev.Node == node) && !ev.At.Before(since) {
			out = append(out, ev)
		}
	}
	slices.SortFunc(out, func(a, b HistoryEvent) int { return cmpInt64(a.Revision, b.Revision) })
	return out, nil
}
