// Package e2e is the end-to-end suite: clusterrebootd on nodes that run real
// systemd as PID 1 (systemd-nspawn containers booted from a Debian 12 root
// file system), with a real system bus and systemd-logind, against a real
// 3-member etcd cluster, with real reboots.
//
// The tests carry the build tag e2e, so `go test ./...` skips them. They
// need root, and skip otherwise:
//
//	go test -tags e2e -count=1 -v -timeout 15m ./test/e2e/
//
// What one run sets up, and always tears down again (also what a previous,
// killed run left behind, found by the fixed names below):
//   - the node root file system, built once by hack/e2e/rootfs.sh and cached
//     under /var/cache/clusterrebootd-e2e; every node boots an overlay of it;
//   - the bridge crbe2e0 (10.231.0.1/24 for the test itself), three network
//     namespaces cre2e-etcd1..3 with one etcd member each (10.231.0.11..13)
//     on veths cre2e-e1..3, the etcd binary built from hack/ at its pinned
//     version (CLUSTERREBOOTD_ETCD_BIN overrides);
//   - per scenario, nodes node-1..N (10.231.0.21..) booted with
//     `systemd-nspawn -b --network-bridge=crbe2e0` under a supervisor that
//     starts a node again when nspawn exits 133 (a reboot inside the node: new
//     boot_id), each in its own cgroup cre2e-<node>, the clusterrebootd
//     binary (CLUSTERREBOOTD_BIN overrides the build), the shipped units from
//     units/ with a timer drop-in that ticks every few seconds, a
//     configuration and a steerable health gate script.
//
// Every scenario asserts from three independent records: the supervisor's
// boot log (when each node went down and came back), etcd (a watch on the
// slot keys and the P/history/ audit trail) and the nodes' journals; and
// prints a timeline of all three. The safety invariant checked after every
// scenario: at no instant more than max_concurrent slots, no reboot outside a
// slot of the rebooting node, no two nodes between "reboot requested" and
// "slot released" at once, and no two nodes down at once.
//
// The checker is test/histcheck, shared with the in-process randomized
// suite (cmd/clusterrebootd/safety_test.go).
//
// TestChaos (E2E_CHAOS_RUNS=N, E2E_CHAOS_SEED=S; skipped otherwise) is the
// fault matrix: randomized runs combining an etcd fault with a node fault,
// each judged by the same checker (chaos_test.go).
//
// Traffic goes only to the bridge and namespaces the suite creates.
package e2e
