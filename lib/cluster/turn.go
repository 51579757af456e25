package cluster

import (
	"context"
	"errors"

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
// predecessor's unlock. Here the wait is WaitChange's: a watch from now
// (always synced) and, when anything was written since the read, one read
// that closes the gap (docs/performance.md, handover and rollout start-up).
// FIFO order and `etcdctl lock` compatibility are unchanged: only
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
		// Any change of the key ahead (its deletion, or a new entry of
		// the same session) ends the wait; the next read decides.
		if err := s.c.WaitChange(ctx, string(ahead[0].Key), false, resp.Header.Revision); err != nil {
			return err
		}
	}
}
