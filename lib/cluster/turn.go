package cluster

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// errEntryGone: our queue entry vanished while we waited for our turn.
var errEntryGone = errors.New("cluster: lock: our mutex key vanished")

// waitTurn waits until no key under the mutex prefix was created before
// ours (create revision myRev): then this session owns the mutex. It is the
// wait of concurrency.Mutex.Lock, without Mutex.Lock's own requests: each
// read of the queue is one Txn that also checks our key is still there with
// myRev (errEntryGone otherwise), which Mutex.Lock does with a Get after its
// wait. The difference is the watch: Mutex.Lock watches the predecessor's key
// from the revision of its read, which etcd treats as a past ("unsynced")
// watcher and serves only at its next resync, up to 100 ms after the
// predecessor's unlock. Here the watch starts one revision after the read, so
// it is synced unless something was written in between (docs/performance.md,
// handover). FIFO order and `etcdctl lock` compatibility are unchanged: only
// keys with a smaller create revision are waited for, newest first, and the
// oldest key owns the mutex.
//
// Each read is bounded by the request timeout; the waits end with ctx.
func (s *Session) waitTurn(ctx context.Context, myRev int64) error {
	for {
		rctx, cancel := s.c.request(ctx)
		resp, err := s.c.cli.Txn(rctx).Then(
			clientv3.OpGet(s.mpfx, append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(myRev-1), clientv3.WithKeysOnly())...),
			clientv3.OpGet(s.key, clientv3.WithKeysOnly()),
		).Commit()
		cancel()
		if err != nil {
			return err
		}
		if mine := resp.Responses[1].GetResponseRange().Kvs; len(mine) == 0 || mine[0].CreateRevision != myRev {
			return errEntryGone
		}
		ahead := resp.Responses[0].GetResponseRange().Kvs
		if len(ahead) == 0 {
			return nil // first in line: ours
		}
		if err := s.waitDeleted(ctx, string(ahead[0].Key), resp.Header.Revision); err != nil {
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
