// Package reboot performs the reboot action once the node holds its slot:
// systemd-logind over D-Bus (added with the systemd integration) or an
// operator-given command.
//
// Invariants:
//   - Reboot returns nil only when the reboot was actually requested: the
//     command exited 0 (or logind accepted the call). Anything else is an
//     error, so the caller releases the slot at once.
//   - Every call is bounded by a timeout; a command runs without a shell, in
//     its own process group, with bounded captured output.
package reboot
