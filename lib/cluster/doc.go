// Package cluster is everything clusterrebootd keeps in etcd: members, alive
// records, the cluster mutex, fenced reboot slots, pause, settings and
// history, under the prefix P = /clusterrebootd/<cluster> (DESIGN §3). It is
// the only package that imports the etcd client.
//
// Invariants:
//   - Every unary request is bounded by Options.RequestTimeout (a child
//     context per request); waits (Lock, WaitChange) are bounded by the
//     caller's ctx and end when the session ends.
//   - Errors are classified: ErrUnavailable (timeouts, refused connections,
//     no leader), ErrAuth (etcd authentication or permission), ErrLockLost
//     (the fenced write or the lock wait found the session no longer owning
//     the mutex), ErrConflict (a guarded Txn lost against another writer),
//     *CorruptError/ErrCorrupt (a value that does not decode strictly; its
//     message names the key). The cause's text is kept; the password never
//     appears in errors or logs.
//   - Decoding is strict (unknown fields, trailing data, missing required
//     fields, a node that does not match its key are all corrupt; a fast
//     path for json.Marshal's own form of the per-node records accepts only
//     a subset of what the strict decoder accepts, with the same result,
//     and leaves everything else to it), and a
//     corrupt value or an unknown key under P fails the whole Snapshot: it is
//     never read as "free" or "absent". Only mutex queue entries are lenient:
//     whoever queued under P/lock/ (etcdctl lock, a plain concurrency.Mutex)
//     is a waiter, anonymous if its value is not our annotation.
//   - Every write is validated by the same rules as reads, so nothing this
//     package writes can make the cluster state unreadable.
//   - A slot is only created by AcquireSlot, whose single Txn is fenced by
//     the create revision of the session's mutex key and releases the mutex
//     (deletes that key) in the same Txn; slots are durable (no lease) and
//     are changed or deleted only by Txns guarded by their ModRevision.
//   - The mutex is the concurrency.Mutex protocol on P/lock: FIFO by create
//     revision, and interoperable with `etcdctl lock P/lock`.
//
// etcd requests per call: Snapshot 1; PublishAlive 3 in 2 round trips (Get,
// then KeepAliveOnce and Put at once; Grant and Put when the lease is gone);
// Lock 2 with nobody ahead; AcquireSlot 1; ReleaseSlot 1; AppendHistory 1 — the last three
// take 2 more (Grant of the shared history lease and a resend) for the first
// history record of a time bucket (see history.go).
package cluster
