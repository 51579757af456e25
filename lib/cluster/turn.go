package cluster

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// waitTurn waits until no key under the mutex prefix was created before
// ours (create revision myRev), the same wait concurrency.Mutex.Lock does,
// so that Mutex.Lock afterwards finds this session first in line and
// returns after its one Txn. The difference is the watch: Mutex.Lock
// watches the predecessor's key from the revision of its read, which etcd
// treats as a past ("unsynced") watcher and serves only at its next resync,
// up to 100 ms after the predecessor's unlock. Here the watch starts one
// revision after the read, so it is synced unless something was written in
// between (docs/performance.md, handover). FIFO order is unchanged: only
// keys with a smaller create revision are waited for, oldest last.
//
// Each read is bounded by the request timeout; the waits end with ctx.
func (s *Session) waitTurn(ctx context.Context, myRev int64) error {
	for {
		rctx, cancel := s.c.request(ctx)
		resp, err := s.c.cli.Get(rctx, s.mpfx, append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(myRev-1))...)
		cancel()
		if err != nil {
			return err
		}
		if len(resp.Kvs) == 0 {
			return nil // first in line
		}
		if err := s.waitDeleted(ctx, string(resp.Kvs[0].Key), resp.Header.Revision); err != nil {
			return err
		}
	}
}

// waitDeleted returns once key is deleted after revision rev (or rev+1 was
// compacted: the caller reads again).
func (s *Session) waitDeleted(ctx context.Context, key string, rev int64) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for wr := range s.c.cli.Watch(wctx, key, clientv3.WithRev(rev+1), clientv3.WithFilterPut()) {
		if wr.CompactRevision != 0 {
			return nil
		}
		if err := wr.Err(); err != nil {
			return err
		}
		for _, ev := range wr.Events {
			if ev.Type == clientv3.EventTypeDelete {
				return nil
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return fmt.Errorf("%w: watch %s closed", ErrUnavailable, key)
}
