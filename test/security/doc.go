// Package security is the security suite of clusterrebootd: the real binary
// (built once by TestMain) against a real etcd that requires TLS client
// certificates (--client-cert-auth) and has authentication and RBAC enabled
// with the role layout of hack/etcd-rbac.sh.
//
// Invariants of the suite:
//   - Certificates are generated per test with crypto/x509 (a CA, a second
//     unrelated CA, server and client leaves, an expired leaf); nothing is read
//     from the host.
//   - Every misconfiguration must end the run with the exit code of
//     DESIGN §6 and a message that names the cause (unknown authority,
//     expired certificate, permission denied, wrong password), and must never
//     request a reboot.
//   - secrets_test.go collects everything the product emits or stores (logs,
//     stdout, stderr, etcd values under the prefix, state and run files) and
//     fails on any trace of the etcd password or of the TLS key material; its
//     scanner is itself tested against deliberately leaking input.
//   - hack/etcd-rbac.sh is run against the same etcd through its gRPC gateway
//     (curl), and through etcdctl when one is found, and must produce the same
//     role layout as the Go fixture.
//
// Environment: CLUSTERREBOOTD_ETCD_BIN (etcd, as test/etcdtest),
// CLUSTERREBOOTD_ETCDCTL_BIN (etcdctl for the script's etcdctl backend; that
// test is skipped without one), CLUSTERREBOOTD_BIN (a prebuilt product
// binary instead of building one).
package security
