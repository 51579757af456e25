package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// WaitChange blocks until key (or, with prefix, any key under it) changes
// after revision afterRev, typically a Snapshot's Revision, so a change that
// happened after the read is never missed. key is relative to the cluster
// prefix (KeySlots, KeyPause, KeySettings, ...); a full key under the prefix
// is accepted too.
//
// The watch starts from now, which etcd serves at once (a "synced"
// watcher); a watch from a past revision is "unsynced" and hears of events
// only at etcd's next resync, up to 100 ms later (docs/performance.md,
// handover). The gap between afterRev and the watch's start is closed by
// one read: if the keys differ from what they were at afterRev, the change
// already happened and WaitChange returns.
//
// It returns nil on the first event, and also when afterRev has been
// compacted away (the caller re-reads). The wait itself has no request
// timeout: ctx ends it, with ctx's error. A watch cancelled because the
// member lost its leader returns ErrUnavailable. No polling.
func (c *Client) WaitChange(ctx context.Context, key string, prefix bool, afterRev int64) error {
	full := key
	if !strings.HasPrefix(key, c.prefix+"/") {
		full = c.key(key)
	}
	var opts []clientv3.OpOption
	if prefix {
		opts = append(opts, clientv3.WithPrefix())
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for wr := range c.cli.Watch(wctx, full, append(opts, clientv3.WithCreatedNotify())...) {
		if err := wr.Err(); err != nil {
			return classify(ctx, "watch "+full, err)
		}
		if wr.Created {
			if afterRev <= 0 || wr.Header.Revision <= afterRev {
				continue // nothing written since afterRev
			}
			changed, err := c.changedSince(ctx, full, prefix, afterRev)
			if err != nil {
				return err
			}
			if changed {
				return nil
			}
			continue
		}
		if len(wr.Events) > 0 {
			return nil
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("cluster: watch %s: %w", full, err)
	}
	return fmt.Errorf("%w: watch %s closed", ErrUnavailable, full)
}

// changedSince tells whether key (or the keys under it) differ now from
// what they were at rev: one Txn of two range reads, the count at rev and
// the keys now. A key written after rev, or fewer of the keys that existed
// at rev, is a change. A compacted rev counts as a change (re-read).
func (c *Client) changedSince(ctx context.Context, full string, prefix bool, rev int64) (bool, error) {
	var opts []clientv3.OpOption
	if prefix {
		opts = append(opts, clientv3.WithPrefix())
	}
	rctx, cancel := c.request(ctx)
	defer cancel()
	resp, err := c.cli.Txn(rctx).Then(
		clientv3.OpGet(full, append(opts, clientv3.WithRev(rev), clientv3.WithCountOnly())...),
		clientv3.OpGet(full, opts...),
	).Commit()
	if errors.Is(err, rpctypes.ErrCompacted) {
		return true, nil
	}
	if err != nil {
		return false, classify(ctx, "watch "+full, err)
	}
	before := resp.Responses[0].GetResponseRange().Count
	var kept int64
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		if kv.ModRevision > rev {
			return true, nil
		}
		kept++
	}
	return kept != before, nil
}
