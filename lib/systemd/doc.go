// Package systemd talks to the host's systemd over D-Bus (go-systemd): the
// node's SystemState for the node-health test; the transient holder unit,
// timers and sd_notify arrive with the systemd integration.
//
// Invariants:
//   - Every D-Bus call is bounded by the caller's context and Manager.Timeout;
//     a connection is opened per call and always closed.
//   - An unreachable bus is an error, never a healthy answer.
package systemd
