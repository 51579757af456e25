// Package systemd talks to the host's systemd: over D-Bus (go-systemd) for
// the node's SystemState, the lock holder as the transient unit
// clusterrebootd-hold.service (TransientHolder) and a timer's next elapse;
// over the sd_notify socket for the holder's READY/STATUS/WATCHDOG
// messages (Notifier).
//
// Invariants:
//   - Every D-Bus call, the dial and the wait for a start job are bounded by
//     the caller's context and the Timeout option (0 → 10s); a connection is
//     opened per operation and always closed.
//   - An unreachable bus, a D-Bus error or an unknown answer is an error,
//     never a healthy state and never "no holder running": the caller fails
//     closed.
//   - At most one holder unit: Start never replaces a running unit (mode
//     "fail"; an existing running unit counts as started).
//   - The watchdog is fed only while the caller's health function says so.
//   - No environment is read here except by go-systemd itself
//     (NOTIFY_SOCKET, DBUS_SYSTEM_BUS_ADDRESS); the watchdog interval is
//     passed in.
package systemd
