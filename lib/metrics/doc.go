// Package metrics keeps clusterrebootd's Prometheus metrics for
// node_exporter's textfile collector (DESIGN §7): the node's counters and
// gauges as a Snapshot that is persisted across runs and reboots, the text
// exposition format (version 0.0.4) rendered from it, and a Sink that merges
// what a run observes into the stored snapshot and rewrites the text file.
//
// Metric families (every series carries the label cluster; node_exporter
// adds instance):
//
//	clusterrebootd_info{node,version}                 gauge, always 1
//	clusterrebootd_reboots_total                      counter
//	clusterrebootd_health_checks_total{phase,status}  counter
//	clusterrebootd_lock_acquire_seconds               histogram
//	clusterrebootd_reboot_blocked_total{reason}       counter
//	clusterrebootd_reboot_required                    gauge 0/1
//	clusterrebootd_slot_held                          gauge 0/1
//	clusterrebootd_slot_overdue                       gauge (slots)
//	clusterrebootd_last_run_timestamp_seconds         gauge
//	clusterrebootd_last_run_exit_code                 gauge
//	clusterrebootd_last_successful_run_timestamp_seconds gauge
//
// Invariants:
//   - The text file is written only through obs.WriteFileAtomic: the
//     collector reads the old file or the complete new one, never a mix.
//   - Every label value comes from a fixed set (Phases, Statuses, Reasons),
//     except cluster, node and version, which are escaped. Every series of
//     those sets is written from the first run on (zero until counted), so
//     rate() and increase() work without gaps.
//   - Counters never go down while the stored snapshot survives: a Sink only
//     adds to what it reads back from the Store under the Store's lock, and
//     it reads, adds, saves and writes the text file without releasing the
//     lock, so processes that run at the same time (check and holder) never
//     lose each other's counts and the file never shows an older state than
//     the store. A stored histogram whose buckets differ from Buckets starts
//     again from zero (a counter reset, which Prometheus handles).
//   - Recording never blocks and never fails: the Sink's methods only merge
//     into memory; a background goroutine stores and writes, and a failure
//     there is logged and retried on the next flush, never returned to the
//     run. A nil *Sink records nothing.
//
// metrics imports only lib/obs and the standard library.
package metrics
