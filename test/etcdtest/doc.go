// Package etcdtest runs a real, single-member etcd server for tests.
//
// The server is the etcd built from the go.etcd.io/etcd/server/v3 Go module
// (hack/etcd, a separate module so the product's go.mod stays lean); nothing
// is downloaded at test time. Binary returns its path: $CLUSTERREBOOTD_ETCD_BIN
// when set, otherwise <repo>/bin/etcd, built once under a file lock when
// missing (several test binaries run in parallel processes).
//
// Invariants:
//   - Start returns only once the member reports healthy (/health on its
//     metrics listener, which means it has a leader); otherwise the test fails
//     with the tail of the server's log.
//   - Every server listens on 127.0.0.1 only, keeps its data and log in a
//     directory of the test's t.TempDir(), and is stopped by t.Cleanup. The
//     process also gets SIGKILL if the test process dies (Pdeathsig).
//   - Stop and Kill keep the data directory and the ports, so Restart brings
//     the same member (same revisions, leases, keys) back on the same
//     endpoints.
//
// This package imports nothing from the etcd server: it only runs the binary.
package etcdtest
