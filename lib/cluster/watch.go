package cluster

import (
	"context"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// WaitChange blocks until key (or, with prefix, any key under it) changes
// after revision afterRev, typically a Snapshot's Revision: it watches from
// afterRev+1 (from now when afterRev <= 0), so a change that happened after
// the read is never missed. key is relative to the cluster prefix (KeySlots,
// KeyPause, KeySettings, ...); a full key under the prefix is accepted too.
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
	if afterRev > 0 {
		opts = append(opts, clientv3.WithRev(afterRev+1))
	}
	if prefix {
		opts = append(opts, clientv3.WithPrefix())
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for wr := range c.cli.Watch(wctx, full, opts...) {
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
