package metrics

import (
	"math"
	"slices"
	"time"
)

// Health script phases (label phase of clusterrebootd_health_checks_total).
const (
	PhasePreLock   = "pre-lock"
	PhaseUnderLock = "under-lock"
	PhasePostBoot  = "post-boot"
)

// Health check outcomes (label status of clusterrebootd_health_checks_total).
const (
	StatusPass    = "pass"    // the script exited 0
	StatusFail    = "fail"    // the script exited non-zero: it said no
	StatusError   = "error"   // the script could not give an answer (missing, refused, killed, not startable)
	StatusTimeout = "timeout" // the script ran past health.timeout and was killed
)

// Reasons a check or holder run ended without a reboot (label reason of
// clusterrebootd_reboot_blocked_total).
const (
	ReasonKillSwitch = "kill_switch" // the kill-switch file exists
	ReasonPaused     = "paused"      // clusterrebootd pause
	ReasonWindow     = "window"      // outside the maintenance windows
	ReasonDetector   = "detector"    // a detector could not tell (exit 7)
	ReasonHealth     = "health"      // the health script or post-boot health said no (exit 3)
	ReasonPolicy     = "policy"      // a built-in cluster policy said no (exit 3)
	ReasonSlots      = "slots"       // all slots in use, or an overdue slot froze the cluster (exit 4)
	ReasonLoopGuard  = "loop_guard"  // the reboot-loop guard waits for clusterrebootd ack
	ReasonInhibitor  = "inhibitor"   // a logind block inhibitor
	ReasonEtcd       = "etcd"        // etcd unreachable or timed out (exit 6)
	ReasonLock       = "lock"        // the cluster lock was lost, or max_hold_wait passed waiting for it (exit 4)
	ReasonStopped    = "stopped"     // the holder was stopped before the reboot
	ReasonInternal   = "internal"    // an unexpected error (exit 1)
	ReasonOther      = "other"       // any other exit 5 (a gate this version does not name)
)

var (
	// Phases are the values of label phase, in output order.
	Phases = []string{PhasePreLock, PhaseUnderLock, PhasePostBoot}
	// Statuses are the values of label status, in output order.
	Statuses = []string{StatusPass, StatusFail, StatusError, StatusTimeout}
	// Reasons are the values of label reason, in output order.
	Reasons = []string{ReasonKillSwitch, ReasonPaused, ReasonWindow, ReasonDetector, ReasonHealth, ReasonPolicy,
		ReasonSlots, ReasonLoopGuard, ReasonInhibitor, ReasonEtcd, ReasonLock, ReasonStopped, ReasonInternal, ReasonOther}
	// Buckets are the upper bounds in seconds of
	// clusterrebootd_lock_acquire_seconds: from an idle cluster's
	// milliseconds to a wait behind other nodes' reboots (max_hold_wait
	// defaults to 6 h).
	Buckets = []float64{0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 1800, 3600, 7200, 21600}
)

// Snapshot is every metric of the node: what the text file shows and what is
// persisted between runs. Counters are cumulative since the snapshot was
// first stored; gauges are what the last run saw.
type Snapshot struct {
	Reboots uint64 `json:"reboots_total"`
	// HealthChecks counts health script runs by phase, then status.
	HealthChecks map[string]map[string]uint64 `json:"health_checks_total,omitempty"`
	// Blocked counts runs that ended without a reboot, by reason.
	Blocked     map[string]uint64 `json:"reboot_blocked_total,omitempty"`
	LockAcquire Histogram         `json:"lock_acquire_seconds"`

	RebootRequired bool      `json:"reboot_required"`
	SlotHeld       bool      `json:"slot_held"`
	SlotsOverdue   int       `json:"slots_overdue"`
	LastRun        time.Time `json:"last_run,omitzero"`
	LastExitCode   int       `json:"last_exit_code"`
	LastSuccess    time.Time `json:"last_success,omitzero"`
}

// Histogram is a Prometheus histogram: Counts[i] counts the observations in
// (Bounds[i-1], Bounds[i]]; the last element, one past Bounds, counts those
// above the largest bound. Sum is in seconds.
type Histogram struct {
	Bounds []float64 `json:"bounds"`
	Counts []uint64  `json:"counts"`
	Sum    float64   `json:"sum"`
	Count  uint64    `json:"count"`
}

// valid reports whether h has the layout of bounds and consistent totals.
func (h Histogram) valid(bounds []float64) bool {
	if !slices.Equal(h.Bounds, bounds) || len(h.Counts) != len(bounds)+1 {
		return false
	}
	var n uint64
	for _, c := range h.Counts {
		n += c
	}
	return n == h.Count && h.Sum >= 0 && !math.IsInf(h.Sum, 0) && !math.IsNaN(h.Sum)
}

func (h *Histogram) observe(seconds float64) {
	i, _ := slices.BinarySearch(h.Bounds, seconds) // first bound >= seconds: le is inclusive
	h.Counts[i]++
	h.Count++
	h.Sum += seconds
}

// Normalize makes s complete and consistent: maps exist, a histogram with
// other buckets than Buckets (an older version's, or a damaged one) starts
// again from zero, and label values outside the fixed sets are dropped.
func (s *Snapshot) Normalize() {
	if !s.LockAcquire.valid(Buckets) {
		s.LockAcquire = Histogram{Bounds: slices.Clone(Buckets), Counts: make([]uint64, len(Buckets)+1)}
	}
	hc := make(map[string]map[string]uint64, len(Phases))
	for _, p := range Phases {
		hc[p] = make(map[string]uint64, len(Statuses))
		for _, st := range Statuses {
			hc[p][st] = s.HealthChecks[p][st]
		}
	}
	s.HealthChecks = hc
	bl := make(map[string]uint64, len(Reasons))
	for _, r := range Reasons {
		bl[r] = s.Blocked[r]
	}
	s.Blocked = bl
	if s.SlotsOverdue < 0 {
		s.SlotsOverdue = 0
	}
}

// Delta is what one run adds to the snapshot. The zero Delta changes
// nothing.
type Delta struct {
	Reboots      uint64
	HealthChecks map[[2]string]uint64 // {phase, status}
	Blocked      map[string]uint64
	LockWaits    []float64 // seconds

	Observed *Observation // the last observation of the run, if any
	RunEnded *RunEnd      // the run's outcome, if it ended
}

// Observation is what a run saw of the node and the cluster.
type Observation struct {
	RebootRequired bool
	SlotHeld       bool
	SlotsOverdue   int
}

// RunEnd is the outcome of a check or holder run.
type RunEnd struct {
	At       time.Time
	ExitCode int
	// Success: the run did its job, including a run blocked by a gate
	// (exit 3, 4 or 5: SuccessExitStatus of the check unit).
	Success bool
}

func (d *Delta) empty() bool {
	return d.Reboots == 0 && len(d.HealthChecks) == 0 && len(d.Blocked) == 0 && len(d.LockWaits) == 0 &&
		d.Observed == nil && d.RunEnded == nil
}

// merge adds o to d; o's gauges win.
func (d *Delta) merge(o Delta) {
	d.Reboots += o.Reboots
	for k, v := range o.HealthChecks {
		if d.HealthChecks == nil {
			d.HealthChecks = map[[2]string]uint64{}
		}
		d.HealthChecks[k] += v
	}
	for k, v := range o.Blocked {
		if d.Blocked == nil {
			d.Blocked = map[string]uint64{}
		}
		d.Blocked[k] += v
	}
	d.LockWaits = append(d.LockWaits, o.LockWaits...)
	if o.Observed != nil {
		d.Observed = o.Observed
	}
	if o.RunEnded != nil {
		d.RunEnded = o.RunEnded
	}
}

// Apply adds d to s (normalising s first). Health checks and reasons outside
// the fixed label sets are ignored; a negative or non-finite lock wait
// counts as 0.
func (s *Snapshot) Apply(d Delta) {
	s.Normalize()
	s.Reboots += d.Reboots
	for k, v := range d.HealthChecks {
		if byStatus, ok := s.HealthChecks[k[0]]; ok {
			if _, ok := byStatus[k[1]]; ok {
				byStatus[k[1]] += v
			}
		}
	}
	for r, v := range d.Blocked {
		if _, ok := s.Blocked[r]; ok {
			s.Blocked[r] += v
		}
	}
	for _, w := range d.LockWaits {
		if !(w >= 0) || math.IsInf(w, 1) { // also NaN
			w = 0
		}
		s.LockAcquire.observe(w)
	}
	if o := d.Observed; o != nil {
		s.RebootRequired, s.SlotHeld, s.SlotsOverdue = o.RebootRequired, o.SlotHeld, max(o.SlotsOverdue, 0)
	}
	if r := d.RunEnded; r != nil {
		s.LastRun, s.LastExitCode = r.At, r.ExitCode
		if r.Success {
			s.LastSuccess = r.At
		}
	}
}
