package metrics

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Metric family names.
const (
	NameInfo           = "clusterrebootd_info"
	NameReboots        = "clusterrebootd_reboots_total"
	NameHealthChecks   = "clusterrebootd_health_checks_total"
	NameLockAcquire    = "clusterrebootd_lock_acquire_seconds"
	NameBlocked        = "clusterrebootd_reboot_blocked_total"
	NameRebootRequired = "clusterrebootd_reboot_required"
	NameSlotHeld       = "clusterrebootd_slot_held"
	NameSlotOverdue    = "clusterrebootd_slot_overdue"
	NameLastRun        = "clusterrebootd_last_run_timestamp_seconds"
	NameLastExitCode   = "clusterrebootd_last_run_exit_code"
	NameLastSuccess    = "clusterrebootd_last_successful_run_timestamp_seconds"
)

// Labels identify the node in the text file.
type Labels struct {
	Cluster string // on every series
	Node    string // on clusterrebootd_info only (node_exporter adds instance)
	Version string // on clusterrebootd_info only
}

// Render returns s (normalised) in the Prometheus text exposition format
// 0.0.4, without timestamps (the textfile collector refuses them).
func Render(s Snapshot, l Labels) []byte {
	s.Normalize()
	w := &textWriter{cluster: `cluster="` + escapeLabel(l.Cluster) + `"`}

	w.family(NameInfo, "gauge", "Information about clusterrebootd on this node; always 1.")
	w.sampleRaw(NameInfo, w.cluster+`,node="`+escapeLabel(l.Node)+`",version="`+escapeLabel(l.Version)+`"`, 1)

	w.family(NameReboots, "counter", "Coordinated reboots of this node that completed: back with a new boot id, healthy, slot released.")
	w.sample(NameReboots, "", float64(s.Reboots))

	w.family(NameHealthChecks, "counter", "Health script runs by phase (pre-lock, under-lock, post-boot) and status (pass, fail, error, timeout).")
	for _, p := range Phases {
		for _, st := range Statuses {
			w.sample(NameHealthChecks, `phase="`+p+`",status="`+st+`"`, float64(s.HealthChecks[p][st]))
		}
	}

	w.family(NameLockAcquire, "histogram", "Time the lock holder waited for the cluster lock, in seconds.")
	h := s.LockAcquire
	var cum uint64
	for i, b := range h.Bounds {
		cum += h.Counts[i]
		w.sample(NameLockAcquire+"_bucket", `le="`+formatFloat(b)+`"`, float64(cum))
	}
	w.sample(NameLockAcquire+"_bucket", `le="+Inf"`, float64(h.Count))
	w.sample(NameLockAcquire+"_sum", "", h.Sum)
	w.sample(NameLockAcquire+"_count", "", float64(h.Count))

	w.family(NameBlocked, "counter", "Check and holder runs that ended without a reboot, by reason.")
	for _, r := range Reasons {
		w.sample(NameBlocked, `reason="`+r+`"`, float64(s.Blocked[r]))
	}

	w.family(NameRebootRequired, "gauge", "1 when the last check found that this node needs a reboot.")
	w.sample(NameRebootRequired, "", bool01(s.RebootRequired))
	w.family(NameSlotHeld, "gauge", "1 when this node held a reboot slot at the last check.")
	w.sample(NameSlotHeld, "", bool01(s.SlotHeld))
	w.family(NameSlotOverdue, "gauge", "Reboot slots in the cluster past their deadline at the last check (the cluster is frozen while > 0).")
	w.sample(NameSlotOverdue, "", float64(s.SlotsOverdue))
	w.family(NameLastRun, "gauge", "Unix time the last check or holder run on this node ended.")
	w.sample(NameLastRun, "", unixSeconds(s.LastRun))
	w.family(NameLastExitCode, "gauge", "Exit code of the last check or holder run on this node.")
	w.sample(NameLastExitCode, "", float64(s.LastExitCode))
	w.family(NameLastSuccess, "gauge", "Unix time of the last check or holder run that did its job (exit 0, or blocked with 3, 4 or 5).")
	w.sample(NameLastSuccess, "", unixSeconds(s.LastSuccess))
	return w.buf.Bytes()
}

type textWriter struct {
	buf     bytes.Buffer
	cluster string // the cluster label pair
}

func (w *textWriter) family(name, typ, help string) {
	fmt.Fprintf(&w.buf, "# HELP %s %s\n# TYPE %s %s\n", name, escapeHelp(help), name, typ)
}

// sample writes name{cluster="…",labels} value.
func (w *textWriter) sample(name, labels string, v float64) {
	if labels != "" {
		labels = w.cluster + "," + labels
	} else {
		labels = w.cluster
	}
	w.sampleRaw(name, labels, v)
}

func (w *textWriter) sampleRaw(name, labels string, v float64) {
	fmt.Fprintf(&w.buf, "%s{%s} %s\n", name, labels, formatFloat(v))
}

func bool01(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func unixSeconds(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixMilli()) / 1000
}

func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

var (
	labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
)

func escapeLabel(s string) string { return labelEscaper.Replace(strings.ToValidUTF8(s, "\uFFFD")) }
func escapeHelp(s string) string  { return helpEscaper.Replace(strings.ToValidUTF8(s, "\uFFFD")) }
