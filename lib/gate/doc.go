// Package gate holds the decisions that stand between "a reboot is needed"
// and "a reboot may start": the operator's health script (script.go,
// scriptpath.go), the maintenance windows (window.go: syntax; schedule.go:
// evaluation) and the built-in cluster policies (policy.go).
//
// Invariants:
//
//   - Fail closed. Anything the package cannot decide with certainty is an
//     error or a blocking verdict, never "allowed": a missing, unsafe or
//     hanging health script, an unknown phase, a timeout, a signal, an
//     invalid policy value.
//   - The health script is executed directly (argv = [script, phase], no
//     shell) through lib/proc: its own process group, a hard timeout that
//     kills the whole group, at most 64 KiB of output kept. Its environment
//     is exactly the documented variables plus a safe PATH; nothing is
//     inherited from the caller. Exit 0 allows; any other exit status is a
//     verdict (ScriptResult.Allowed false, nil error).
//   - Before every run the script's path is walked component by component,
//     symlinks included: every element must be owned by root (or by
//     Script.UID when it is >= 0), no directory on the way may be writable by
//     group or others unless it has the sticky bit (like /tmp: then nobody
//     but the owner of an entry may replace it, and every entry is checked to
//     be owned by a trusted user), and the final target must be a regular,
//     executable file that is not group- or world-writable. The resolved
//     target is what gets executed. Symlink mode bits mean nothing on Linux;
//     a symlink is safe when its owner is trusted and its directory is safe.
//   - Windows and policies are pure: no I/O, no clock reads (the caller
//     passes now), deterministic for equal inputs.
//
// Window semantics (window.go, schedule.go):
//
//   - "DAYS HH:MM-HH:MM": DAYS is "*" (every day) or a comma-separated list
//     of days and day ranges ("Mon,Wed", "Tue-Thu", "Sat-Mon" wraps). For
//     each listed day D the window is the interval [D start, D end). When
//     the end is before the start ("* 23:00-06:00", "Mon,Wed 22:00-02:00")
//     the interval starts on the listed day and ends on the next day: "Mon
//     22:00-02:00" is Monday 22:00 to Tuesday 02:00, not Sunday night.
//     "24:00" is allowed as the end and means midnight at the end of the day.
//   - "DAY HH:MM-DAY HH:MM" ("Fri 18:00-Mon 08:00"): one interval per week
//     from the first day-time to the next occurrence of the second; it may
//     wrap across the end of the week.
//   - Start equal to end is an error (an empty or ambiguous whole-day/week
//     window); write "* 00:00-24:00" for always.
//   - Day names are Mon..Sun or Monday..Sunday, case-insensitive.
//   - Intervals are half-open: a window "22:00-23:00" contains 22:00 and not
//     23:00, and a reboot of 10m may start at 22:50 at the latest.
//   - Deny wins over allow; an empty allow list means always, minus deny.
//     Overlapping or touching allow windows form one stretch ("Sat-Sun
//     00:00-24:00" is one 48-hour stretch). A reboot may start at t only
//     when [t, t+expected reboot duration) is allowed throughout; durations
//     are real time, not wall-clock time.
//   - Schedule.Check is bounded: it expands the windows day by day over
//     SearchHorizon (8 days) plus the reboot duration, with a week of
//     look-back for windows that began earlier.
//
// Time zones and daylight saving time: windows are wall-clock times in the
// schedule's zone, evaluated day by day. A boundary "HH:MM" on date D is the
// first instant at which a clock in that zone shows D HH:MM or later. So:
//
//   - Spring forward (a wall-clock hour is skipped): a boundary inside the
//     gap moves to the end of the gap. "02:30-03:30" in Europe/Berlin on
//     2026-03-29 is 03:00-03:30 CEST (30 minutes); "02:00-02:30" is empty
//     that day.
//   - Fall back (a wall-clock hour repeats): a boundary inside the repeated
//     hour is its first occurrence, and the window runs from there to the
//     first occurrence of the end. "02:30-03:30" in Europe/Berlin on
//     2026-10-25 is 02:30 CEST to 03:30 CET (two real hours, the repeated
//     hour included once); "01:00-02:30" ends at 02:30 CEST.
//
// This rule is the same in every zone (time.Date alone picks either
// occurrence depending on the zone's offset sign) and keeps adjacent windows
// adjacent: "24:00" of one day is "00:00" of the next.
//
// Policy semantics (policy.go): see SlotLimit and ClusterHealth. A node
// counts as healthy only when it is a member, has a live record (Alive),
// reports healthy, holds no reboot slot and is not the node asking (Self,
// which is about to go down). With Policy.AssumeSlotsReturn (pre-lock only)
// nodes holding a slot that is not overdue count as healthy: they are
// expected back, so a node may queue while another reboots; under the lock
// the flag must be false.
package gate
