// Package integration is the process-level integration suite of
// clusterrebootd: it runs the real binary (built once by TestMain) against a
// real etcd (test/etcdtest) with real subprocesses, as a user would.
//
// Every simulated node has its own directory with config.toml, boot id,
// reboot-required flag, run and state directories. Its reboot command is a
// small shell script that records "<node> <boot_id>" in the cluster's reboot
// log (and blocks while a flag file exists); the test "boots" a node by
// writing a new boot id, emptying its run directory, removing its
// reboot-required flag and running its post-boot `check --once`. The shared
// health script and node-health command obey per-node flag files, so a test
// can deny, block or make a node unhealthy phase by phase.
//
// Invariants of the suite:
//   - Every wait is bounded; no sleep asserts speed. A test that waits for
//     "nothing happens" waits a fixed multiple of lock.ttl and then checks
//     etcd and the reboot log.
//   - Every test uses its own cluster name (etcd prefix), so tests share one
//     etcd and run in parallel; tests that stop etcd start their own.
//   - Safety is checked from etcd's own history: a watch from the cluster's
//     start revision records every event, and the replay fails the test if
//     more than max_concurrent slots ever existed at once.
//   - Exit codes are asserted exactly as DESIGN §6 defines them.
//   - Under `go test -race` the product binary is built with -race too, and
//     any "DATA RACE" report in a subprocess fails the test.
package integration
