package coordinator

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// Status is the cluster view an operator reads (`clusterrebootd status`).
type Status struct {
	Cluster       string       `json:"cluster"`
	Revision      int64        `json:"revision"`
	Now           time.Time    `json:"now"`
	Paused        *Pause       `json:"paused,omitempty"`
	MaxConcurrent int          `json:"max_concurrent"` // effective for this node
	SlotsUsed     int          `json:"slots_used"`
	Frozen        bool         `json:"frozen"` // an overdue slot freezes the cluster
	Nodes         []NodeStatus `json:"nodes"`
	Warnings      []string     `json:"warnings,omitempty"`
	// NextCheck is when this node's check timer fires next (zero when the
	// timer is unknown, e.g. without systemd); filled by the caller.
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
	Why            string      `json:"why"` // the single most important reason it is not rebooting
}

// SlotStatus describes a held slot.
type SlotStatus struct {
	Since    time.Time     `json:"since"`
	Age      time.Duration `json:"age_ns"`
	Deadline time.Time     `json:"deadline"`
	Overdue  bool          `json:"overdue"`
	Reason   string        `json:"reason"`
}

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
	return BuildStatus(c.opt.Cluster, view, hist, c.opt.MaxConcurrent, now), nil
}

// BuildStatus is the pure part of Status.
func BuildStatus(cluster string, v View, hist []HistoryEvent, configuredMax int, now time.Time) Status {
	st := Status{Cluster: cluster, Revision: v.Revision, Now: now, Paused: v.Pause,
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
			if a.MaxConcurrent > 0 {
				limits[a.MaxConcurrent] = append(limits[a.MaxConcurrent], name)
			}
		}
		if s, ok := v.SlotOf(name); ok {
			ns.Slot = &SlotStatus{Since: s.AcquiredAt, Age: now.Sub(s.AcquiredAt), Deadline: s.Deadline, Overdue: s.Overdue(now), Reason: s.Reason}
			if ns.Slot.Overdue {
				st.Frozen = true
			}
		}
		ns.Why = why(ns, a, v, now)
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
	for _, ns := range st.Nodes {
		if ns.Slot != nil && ns.Slot.Overdue {
			st.Warnings = append(st.Warnings, fmt.Sprintf(
				"slot of %s is OVERDUE (deadline %s): the cluster is frozen until 'clusterrebootd release --node %s'",
				ns.Node, ns.Slot.Deadline.Format(time.RFC3339), ns.Node))
		}
	}
	return st
}

// why picks the single most important reason a node is not rebooting now.
func why(ns NodeStatus, a Alive, v View, now time.Time) string {
	switch {
	case ns.Slot != nil && ns.Slot.Overdue:
		return fmt.Sprintf("slot overdue by %s: operator must check the node and 'clusterrebootd release --node %s'",
			now.Sub(ns.Slot.Deadline).Round(time.Second), ns.Node)
	case ns.Slot != nil:
		s := fmt.Sprintf("holds a reboot slot for %s", ns.Slot.Age.Round(time.Second))
		if ns.Alive && a.Blocked != "" {
			s += ": " + a.Blocked
		}
		return s
	case !ns.Alive:
		return "no alive record: node down or not checking (expired after alive_ttl)"
	case a.State == StateError:
		return a.Blocked
	case !ns.RebootRequired:
		return "no reboot needed"
	case v.Pause != nil:
		return fmt.Sprintf("cluster paused by %s: %s", v.Pause.By, v.Pause.Reason)
	case ns.QueuePosition == 1 && a.Blocked != "":
		return "holds the lock: " + a.Blocked
	case ns.QueuePosition == 1:
		return "holds the lock, deciding"
	case ns.QueuePosition > 1:
		return fmt.Sprintf("queued for the lock, position %d", ns.QueuePosition)
	case a.Blocked != "":
		return a.Blocked
	}
	return "reboot needed; waiting for the next check"
}
