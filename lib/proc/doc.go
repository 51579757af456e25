// Package proc runs external programs (detectors, health scripts, reboot
// commands) the way a root-run coordinator must: argv executed directly,
// never through a shell; each run in its own process group; a hard timeout
// that kills the whole group; bounded captured output.
//
// Invariants:
//   - Run never returns before the process (and, on timeout or cancellation,
//     its whole process group) has been signalled and reaped.
//   - A timeout or cancelled context is always an error (ErrTimeout or the
//     context's error); a non-zero exit status is not an error but a Result.
//   - At most Cmd.MaxOutput bytes of output are kept, however much the program
//     writes.
//
// proc is a leaf: it imports nothing from lib/, so every adapter may use it.
package proc
