// Package hostile is the bad-input suite of clusterrebootd: a table of
// hostile configuration files, command lines, health-script setups and etcd
// values, each run against the real binary (built once by TestMain) as a
// subprocess, as an operator or an attacker would.
//
// Invariants of the suite:
//   - Every subprocess runs under a context timeout in its own process group
//     (killed as a whole on timeout): a hang fails the case instead of the
//     suite.
//   - No output of any run may show a Go panic or goroutine dump.
//   - Exit codes are asserted exactly as DESIGN §6 defines them: 2 for a bad
//     configuration or command line, 3 for a refused health script, and a
//     non-zero code naming the key for a corrupt etcd value.
//   - Messages are asserted on the substrings a user needs: the file, the
//     line and the key of a configuration problem; the etcd key of a corrupt
//     value; the path and the reason of a refused script.
//   - Cases that need another user's files (chown) run only as root and are
//     skipped otherwise.
//   - Every case is a hard assertion: the product bugs this suite found
//     (hangs on FIFOs and devices, unbounded echoes, unnamed lock owners)
//     are fixed, and the cases guard against their return.
//
// The etcd cases share one real etcd (test/etcdtest; CLUSTERREBOOTD_ETCD_BIN
// names a prebuilt binary), each on a cluster prefix of its own.
package hostile
