// Package coordinator holds the two state machines of clusterrebootd: Check
// (the short run fired by the timer) and Hold (the lock holder), plus the
// read-only Simulate and the operator actions that change cluster state.
//
// The package sees the world only through the small interfaces declared in
// ports.go; cmd/clusterrebootd wires the adapters (lib/cluster, lib/detect,
// lib/gate, lib/systemd, lib/reboot, lib/obs) into them. It imports no other
// lib/ package.
//
// Invariants:
//   - Fail closed: every error, timeout or doubt (etcd, detector, health
//     script, corrupt state) ends the run without a reboot, with an *Error
//     whose Code is the exit code of DESIGN §6 and a reason that says why.
//   - A node reboots only after its fenced slot write succeeded (the slot is
//     written under the mutex, guarded by the mutex key's create revision),
//     and only after the reboot-requested marker was written and the
//     unlock, the state file, the "rebooting" record and the
//     reboot-requested history record were done or attempted (they run
//     concurrently, prepare.go); a marker that cannot be written gives the
//     slot back without a reboot.
//   - The mutex is released (and the session lease revoked) on every path out
//     of Hold, including cancellation; the durable slot is the only claim that
//     outlives the holder, and it is deleted at once when the reboot call fails.
//   - Gates are evaluated in the order of DESIGN §3, pre-lock in Check and
//     again under the lock in Hold; Simulate runs the same list read-only.
//   - The node's own slot is released only after a boot_id change and passing
//     post-boot health for post_boot_soak, or when the reboot demonstrably
//     never happened (same boot_id, no holder, no reboot-requested marker).
package coordinator
