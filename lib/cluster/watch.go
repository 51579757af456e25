package cluster

import (
	"context"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// WaitChange blocks until key (or, with prefix, any key under it) changes
// after revision afterRev, typically a Snapshot's Revision, so a change that
// happened after the read is never missed. key is relative to the cluster
// prefix (KeySlots, KeyPause, KeySettings, ...); a full key under the prefix
// is accepted too.
//
// Two watches share the wait: one from now, which etcd serves at once (its
// "synced" watchers), and, only when something was written since afterRev, a
// catch-up watch from afterRev+1 for that gap. A watch whose start revision
// is in the past is "unsynced" in etcd and hears of new events only at its
// next resync, up to 100 ms later; the watch from now keeps that delay off
// the common case, a change that comes after the wait began
// (docs/performance.md, handover).
//
// It returns nil on the first event, and also when afterRev+1 has been
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
	now := c.cli.Watch(wctx, full, append(opts, clientv3.WithCreatedNotify())...)
	var catchUp clientv3.WatchChan // nil until needed: never ready
	for {
		var wr clientv3.WatchResponse
		var ok bool
		select {
		case wr, ok = <-now:
		case wr, ok = <-catchUp:
		}
		if !ok {
			break
		}
		if wr.Created {
			if afterRev > 0 && wr.Header.Revision > afterRev {
				catchUp = c.cli.Watch(wctx, full, append(opts, clientv3.WithRev(afterRev+1))...)
			}
			continue
		}
		if wr.CompactRevision != 0 {
			c.log.Debug("watch start revision compacted: re-read", "key", full, "after", afterRev,
				"compact_revision", wr.CompactRevision)
			return nil
		}
		if err := wr.Err(); err != nil {
			return classify(ctx, "watch "+full, err)
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
