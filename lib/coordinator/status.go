package coordinator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// StatusSchema is the version of the JSON shape of Status (`status
// --json`). Fields are only ever added within one version; a field that
// changes meaning or goes away bumps it.
const StatusSchema = 1

// Status is the cluster view an operator reads (`clusterrebootd status`).
type Status struct {
	Schema        int          `json:"schema"`
	Cluster       string       `json:"cluster"`
	Self          string       `json:"self,omitempty"` // the node that ran status
	Revision      int64        `json:"revision"`
	Now           time.Time    `json:"now"`
	Paused        *Pause       `json:"paused,omitempty"`
	MaxConcurrent int          `json:"max_concurrent"` // effective for this node
	SlotsUsed     int          `json:"slots_used"`
	Frozen        bool         `json:"frozen"` // an overdue slot freezes the cluster
	Nodes         []NodeStatus `json:"nodes"`
	Warnings      []string     `json:"warnings,omitempty"`
	// NextCheck is when this node's check timer fires next (zero when the
	// timer is unknown, e.g. without systemd); set by SetNextCheck.
	NextCheck time.Time `json:"next_check,omitzero"`
}

// NodeStatus is one row of the status table.
type NodeStatus struct {
	Node           string      `json:"node"`
	Alive          bool        `json:"alive"`
	Healthy        bool        `json:"healthy"`
	RebootRequired bool        `json:"reboot_required"`
	State          string      `json:"state"`
	Slot           *SlotStatus `json:"slot,omitempty"`
	QueuePosition  int         `json:"queue_position,omitempty"`
	LastReboot     time.Time   `json:"last_reboot,omitzero"`
	Version        string      `json:"version,omitempty"`
	// Blocked is what the node itself last published as its reason (its
	// alive record), verbatim.
	Blocked   string    `json:"blocked,omitempty"`
	UpdatedAt time.Time `json:"updated_at,omitzero"` // of the alive record
	// Why is the single most important reason the node is not rebooting,
	// for humans; WhyCode classifies it for scripts (the Why* constants).
	Why     string `json:"why"`
	WhyCode string `json:"why_code"`
}

// SlotStatus describes a held slot.
type SlotStatus struct {
	Since    time.Time     `json:"since"`
	Age      time.Duration `json:"age_ns"`
	Deadline time.Time     `json:"deadline"`
	Overdue  bool          `json:"overdue"`
	Reason   string        `json:"reason"`
	// Back: the node is up again with a boot id other than the slot's (its
	// post-boot check decides the release).
	Back         bool      `json:"back"`
	HealthySince time.Time `json:"healthy_since,omitzero"`
}

// Values of NodeStatus.WhyCode, in the order of their priority.
const (
	WhySlotOverdue = "slot-overdue" // own slot past its deadline: an operator must release it
	WhyVerifying   = "verifying"    // back from the reboot, post-boot health decides the release
	WhyRebooting   = "rebooting"    // holds a slot, not back yet
	WhyDown        = "down"         // no alive record
	WhyError       = "error"        // the node's last run failed (detector, holder)
	WhyNotNeeded   = "not-needed"   // no reboot needed
	WhyPaused      = "paused"       // clusterrebootd pause
	WhyFrozen      = "frozen"       // another node's overdue slot freezes the cluster
	WhyWaitingSlot = "waiting-slot" // owns the lock, all slots taken by rebooting nodes
	WhyHoldingLock = "holding-lock" // owns the lock, deciding (or blocked under it)
	WhyQueued      = "queued"       // waiting in the lock queue
	WhyWindow      = "window"       // outside the maintenance windows
	WhyHealth      = "health"       // the health script said no
	WhyPolicy      = "policy"       // a built-in cluster policy said no
	WhyLoopGuard   = "loop-guard"   // reboot-loop guard: clusterrebootd ack
	WhyInhibitor   = "inhibitor"    // a logind block inhibitor
	WhyKillSwitch  = "kill-switch"  // the kill-switch file
	WhySlots       = "slots"        // slots in use (published before queueing)
	WhyBlocked     = "blocked"      // another reason the node published
	WhyWaitCheck   = "waiting-check"
)

// Status reads the cluster and the recent history and explains it.
func (c *Coordinator) Status(ctx context.Context, historySince time.Duration) (Status, error) {
	view, err := c.Cluster.View(ctx)
	if err != nil {
		return Status{}, failure("etcd", err)
	}
	now := c.Now()
	hist, err := c.Cluster.History(ctx, "", now.Add(-historySince))
	if err != nil {
		return Status{}, failure("etcd", err)
	}
	st := BuildStatus(c.opt.Cluster, view, hist, c.opt.MaxConcurrent, now)
	st.Self = c.opt.Node
	return st, nil
}

// BuildStatus is the pure part of Status.
func BuildStatus(cluster string, v View, hist []HistoryEvent, configuredMax int, now time.Time) Status {
	st := Status{Schema: StatusSchema, Cluster: cluster, Revision: v.Revision, Now: now, Paused: v.Pause,
		MaxConcurrent: v.EffectiveMax(configuredMax), SlotsUsed: len(v.Slots)}
	last := map[string]time.Time{}
	for _, h := range hist {
		if h.Event == EventCompleted && h.At.After(last[h.Node]) {
			last[h.Node] = h.At
		}
	}
	limits := map[int][]string{}
	for _, name := range v.NodeNames() {
		ns := NodeStatus{Node: name, LastReboot: last[name], QueuePosition: v.QueuePosition(name)}
		a, alive := v.AliveOf(name)
		if alive {
			ns.Alive, ns.Healthy, ns.RebootRequired, ns.State, ns.Version = true, a.Healthy, a.RebootRequired, a.State, a.Version
			ns.Blocked, ns.UpdatedAt = a.Blocked, a.UpdatedAt
			if a.MaxConcurrent > 0 {
				limits[a.MaxConcurrent] = append(limits[a.MaxConcurrent], name)
			}
		}
		if s, ok := v.SlotOf(name); ok {
			ns.Slot = &SlotStatus{Since: s.AcquiredAt, Age: now.Sub(s.AcquiredAt), Deadline: s.Deadline, Overdue: s.Overdue(now),
				Reason: s.Reason, Back: alive && a.BootID != "" && a.BootID != s.BootID, HealthySince: s.HealthySince}
			if ns.Slot.Overdue {
				st.Frozen = true
			}
		}
		ns.WhyCode, ns.Why = why(ns, a, v, st.MaxConcurrent, now)
		ns.Why = shorten(ns.Why, maxWhy)
		st.Nodes = append(st.Nodes, ns)
	}
	if len(limits) > 1 {
		keys := make([]int, 0, len(limits))
		for k := range limits {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		msg := "nodes disagree on max_concurrent:"
		for _, k := range keys {
			msg += fmt.Sprintf(" %d (%v)", k, limits[k])
		}
		st.Warnings = append(st.Warnings, msg)
	}
	if v.MaxConcurrent > 0 {
		st.Warnings = append(st.Warnings, fmt.Sprintf("cluster-wide max_concurrent set to %d (clusterrebootd set-max)", v.MaxConcurrent))
	}
	if len(v.Queue) > 0 && v.Queue[0].Node == "" {
		st.Warnings = append(st.Warnings, fmt.Sprintf(
			"the cluster lock is held by %s: every reboot waits until it is released", waiterName(v.Queue[0])))
	}
	for _, ns := range st.Nodes {
		if ns.Slot != nil && ns.Slot.Overdue {
			st.Warnings = append(st.Warnings, fmt.Sprintf(
				"slot of %s is OVERDUE (deadline %s): the cluster is frozen until 'clusterrebootd release --node %s'",
				ns.Node, ns.Slot.Deadline.Format(time.RFC3339), ns.Node))
		}
	}
	return st
}

// SetNextCheck records when self's check timer fires next and, when self
// only waits for that check, says so in its row.
func (st *Status) SetNextCheck(self string, next time.Time) {
	st.NextCheck = next
	if next.IsZero() {
		return
	}
	for i := range st.Nodes {
		if n := &st.Nodes[i]; n.Node == self && n.WhyCode == WhyWaitCheck {
			n.Why = fmt.Sprintf("reboot needed; next check in %s (%s)", roundDur(next.Sub(st.Now)), next.Format("2006-01-02 15:04:05 MST"))
		}
	}
}

// why picks the single most important reason a node is not rebooting now
// and its code. Own slot first (an overdue one needs an operator), then
// liveness and the node's own state, then what stops the whole cluster
// (pause, a frozen slot table), then the lock queue, then what the node
// published.
func why(ns NodeStatus, a Alive, v View, maxConcurrent int, now time.Time) (code, text string) {
	switch s := ns.Slot; {
	case s != nil && s.Overdue:
		return WhySlotOverdue, fmt.Sprintf("overdue slot (deadline passed %s ago): check the node, then run `clusterrebootd release --node %s`",
			roundDur(now.Sub(s.Deadline)), ns.Node)
	case s != nil && s.Back:
		text := fmt.Sprintf("back from reboot, slot held %s: ", roundDur(s.Age))
		if a.Blocked != "" {
			return WhyVerifying, text + a.Blocked
		}
		return WhyVerifying, text + "the next check verifies health and releases the slot"
	case s != nil:
		return WhyRebooting, fmt.Sprintf("rebooting: slot held %s (deadline in %s)", roundDur(s.Age), roundDur(s.Deadline.Sub(now)))
	case !ns.Alive:
		return WhyDown, "no alive record: node down or not checking (expired after alive_ttl)"
	case a.State == StateError:
		return WhyError, a.Blocked
	case !ns.RebootRequired:
		return WhyNotNeeded, "no reboot needed"
	case v.Pause != nil:
		text := "paused by " + v.Pause.By
		if !v.Pause.At.IsZero() {
			text += " " + roundDur(now.Sub(v.Pause.At)) + " ago"
		}
		return WhyPaused, text + ": " + v.Pause.Reason + " (clusterrebootd resume)"
	}
	if s, ok := firstOverdue(v, ns.Node, now); ok {
		return WhyFrozen, fmt.Sprintf("cluster frozen by %s's overdue slot (deadline passed %s ago): run `clusterrebootd release --node %s` after checking it",
			s.Node, roundDur(now.Sub(s.Deadline)), s.Node)
	}
	switch {
	case ns.QueuePosition == 1 && len(v.Slots) >= maxConcurrent && len(v.Slots) > 0:
		return WhyWaitingSlot, "holds the lock, waiting for " + slotHolders(v, now)
	case ns.QueuePosition == 1 && a.Blocked != "":
		return WhyHoldingLock, "holds the lock: " + a.Blocked
	case ns.QueuePosition == 1:
		return WhyHoldingLock, "holds the lock, deciding"
	case ns.QueuePosition > 1:
		return WhyQueued, fmt.Sprintf("queued for the lock, position %d (behind %s)", ns.QueuePosition, waiterName(v.Queue[ns.QueuePosition-2]))
	case a.Blocked != "" && blockedCode(a.Blocked) == WhyPaused:
		// The pause is gone (checked above); the record predates the resume.
		return WhyWaitCheck, "reboot needed; the cluster was resumed since the last check: waiting for the next check"
	case a.Blocked != "" && blockedCode(a.Blocked) == WhySlots && len(v.Slots) > 0:
		return WhyWaitingSlot, "waiting for " + slotHolders(v, now)
	case a.Blocked != "":
		return blockedCode(a.Blocked), a.Blocked
	}
	return WhyWaitCheck, "reboot needed; waiting for the next check"
}

// firstOverdue returns the first overdue slot of another node.
func firstOverdue(v View, self string, now time.Time) (Slot, bool) {
	for _, s := range v.Slots {
		if s.Node != self && s.Overdue(now) {
			return s, true
		}
	}
	return Slot{}, false
}

// slotHolders says what the nodes holding the slots are doing.
func slotHolders(v View, now time.Time) string {
	parts := make([]string, 0, len(v.Slots))
	for _, s := range v.Slots {
		a, alive := v.AliveOf(s.Node)
		age := roundDur(now.Sub(s.AcquiredAt))
		if alive && a.BootID != "" && a.BootID != s.BootID {
			parts = append(parts, fmt.Sprintf("%s's post-boot health (slot held %s)", s.Node, age))
		} else {
			parts = append(parts, fmt.Sprintf("%s to come back from its reboot (slot held %s)", s.Node, age))
		}
	}
	return strings.Join(parts, "; ")
}

func waiterName(w Waiter) string {
	if w.Node == "" && w.Key != "" {
		return fmt.Sprintf("a lock without a node name at %s, e.g. `etcdctl lock`", w.Key)
	}
	if w.Node == "" {
		return "a lock without a node name, e.g. `etcdctl lock`"
	}
	return w.Node
}

// blockedCode classifies the reason a node published (Alive.Blocked): the
// texts of the gates (gates.go, lib/gate) start in known ways.
func blockedCode(b string) string {
	for _, c := range []struct{ code, match string }{
		{WhyPaused, "^cluster paused by"},
		{WhyWindow, "^window closed"},
		{WhyHealth, "^health script"},
		{WhyLoopGuard, "^reboot-loop guard"},
		{WhyInhibitor, "inhibitor"},
		{WhyKillSwitch, "kill switch"},
		{WhyFrozen, "^overdue slot of"},
		{WhyPolicy, "min_healthy"},
		{WhyPolicy, "fallback node"},
		{WhyQueued, "^queued for the cluster lock"},
		{WhySlots, "slots in use"},
	} {
		if m, ok := strings.CutPrefix(c.match, "^"); ok {
			if strings.HasPrefix(b, m) {
				return c.code
			}
		} else if strings.Contains(b, c.match) {
			return c.code
		}
	}
	return WhyBlocked
}

// maxWhy caps NodeStatus.Why in runes: it quotes what the node published
// (a health script's first output line, say), which has no length limit of
// its own; Blocked keeps it whole.
const maxWhy = 300

// shorten cuts s to at most n runes, ending it with "…" when cut.
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// roundDur rounds for humans: seconds under ten minutes, minutes above.
func roundDur(d time.Duration) string {
	if d < 0 {
		d = -d
	}
	unit := time.Second
	if d >= 10*time.Minute {
		unit = time.Minute
	}
	s := d.Round(unit).String() // 12m0s → 12m, 2h0m0s → 2h
	if t, ok := strings.CutSuffix(s, "m0s"); ok {
		s = t + "m"
	}
	if t, ok := strings.CutSuffix(s, "h0m"); ok {
		s = t + "h"
	}
	return s
}
