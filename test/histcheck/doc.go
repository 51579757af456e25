// Package histcheck is the history checker of the safety tests: it takes
// everything a run recorded — etcd's revision history of the cluster prefix
// (slot and mutex keys, P/history/ audit records), and the node side (when a
// node asked for a reboot, went down, came back with which boot_id: a
// supervisor's boot log, journals, a simulated host) — and reports every
// violation of the safety invariant of DESIGN §3:
//
//   - too-many-slots: more than max_concurrent slots at one etcd revision;
//   - unfenced-slot: a slot created without its slot-taken record in the
//     same revision, or while its writer's mutex key (fence_revision) was not
//     the head of the mutex queue;
//   - reboot-without-slot: a reboot (request record, node-side request, or the
//     node going down) while the node held no slot of the boot it left;
//   - slot-lost: a slot deleted without a release record in the same
//     revision, or the slot of a node that went down deleted before the node
//     came back and released it (an operator's release or an expiry record is
//     an explicit decision, not a loss);
//   - too-many-in-flight: more than max_concurrent nodes at once between
//     "reboot requested" and "slot released" (a lost slot does not end the
//     span: the node is in flight until it is back and released);
//   - too-many-down: more than max_concurrent nodes down at once (down until
//     the node is back, or until an operator released or expiry freed its
//     slot);
//   - stale-key: a slot or mutex key left at the end.
//
// Invariants of the package: Check is pure (no I/O, no clock); etcd events
// are ordered by revision, node events by time; all times come from one clock
// (the nodes of the e2e suite share the host's kernel, the in-process suite
// one process). Collect reads etcd with a watch from a start revision, so the
// store must not be compacted past it.
package histcheck
