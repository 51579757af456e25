// Package reboot performs the reboot action once the node holds its slot:
// systemd-logind over D-Bus (Logind, which also reports "block" shutdown
// inhibitors) or an operator-given command (Command).
//
// Invariants:
//   - Reboot returns nil only when the reboot was actually requested: the
//     command exited 0 or logind accepted the call. Anything else (bus
//     unreachable, D-Bus error reply, timeout) is an error, so the caller
//     releases the slot at once.
//   - Every call is bounded by a timeout; a command runs without a shell, in
//     its own process group, with bounded captured output.
//   - Inhibitors are reported, never overridden: Reboot asks logind with
//     interactive=false and no ignore-inhibitors flag.
package reboot
