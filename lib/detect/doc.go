// Package detect decides whether this node needs a reboot. Each configured
// detector (file, command, kernel, needrestart, auto) yields one of three
// outcomes: Needed, NotNeeded or Unknown.
//
// Invariants:
//   - Unknown is the zero value of Outcome: a Result that was not filled in
//     properly can never read as "not needed".
//   - A Result has Err != nil exactly when its Outcome is Unknown.
//   - Combination fails closed: any Unknown makes the Summary Unknown, even
//     when another detector reports Needed; otherwise any Needed makes it
//     Needed; only when every detector says NotNeeded is the Summary
//     NotNeeded.
//   - Every external program runs through lib/proc: argv executed directly
//     (never a shell), in its own process group, bounded by the detector's
//     timeout (the whole group is killed on expiry), output bounded. A
//     timeout, a signal, a start failure or an exit code that is not
//     declared is Unknown.
//   - Files read by detectors (os-release, <path>.pkgs) are read with a
//     size bound.
//   - New only validates; nothing is read or executed before Detect.
//
// detect is an adapter: it imports nothing from lib/ but lib/proc.
package detect
