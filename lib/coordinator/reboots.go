package coordinator

import (
	"context"
	"slices"
	"time"
)

// Results of a Reboot.
const (
	ResultRebooted     = "rebooted"      // back with a new boot id, healthy, slot released
	ResultReleased     = "released"      // an operator released the slot (clusterrebootd release)
	ResultExpired      = "expired"       // the slot passed its deadline and was freed (slot_expiry = release)
	ResultAborted      = "aborted"       // no reboot after all (same boot id, marker failure, deadline before the call)
	ResultDryRun       = "dry-run"       // dry run: slot taken and given back
	ResultRebootFailed = "reboot-failed" // the reboot call was refused; slot given back
	ResultInProgress   = "in-progress"   // no end recorded yet
	ResultUnknown      = "unknown"       // a later slot of the node began before an end was recorded
)

// Reboot is one coordinated reboot of a node, assembled from its history
// records (P/history/). Times are zero where the record is missing (expired
// from the history, or before the queried range).
type Reboot struct {
	Node        string    `json:"node"`
	Reason      string    `json:"reason,omitempty"`
	BootID      string    `json:"boot_id,omitempty"` // the boot before the reboot
	SlotTakenAt time.Time `json:"slot_taken_at,omitzero"`
	RequestedAt time.Time `json:"requested_at,omitzero"`
	EndedAt     time.Time `json:"ended_at,omitzero"`
	// DurationMS is how long the node was down: from the reboot request
	// (else the slot) to the end (back healthy, or the slot released). 0
	// while in progress or when no start is known.
	DurationMS int64  `json:"duration_ms"`
	Result     string `json:"result"`           // one of the Result* constants
	By         string `json:"by,omitempty"`     // who ended it: the operator (released) or the node that expired the slot
	Detail     string `json:"detail,omitempty"` // the ending record's reason
}

// RebootHistory reads node's history ("" for every node) since the given
// time and assembles it into reboots.
func (c *Coordinator) RebootHistory(ctx context.Context, node string, since time.Time) ([]Reboot, error) {
	hist, err := c.Cluster.History(ctx, node, since)
	if err != nil {
		return nil, failure("etcd", err)
	}
	return GroupReboots(hist), nil
}

var endResults = map[string]string{
	EventCompleted: ResultRebooted, EventReleased: ResultReleased, EventExpired: ResultExpired,
	EventAborted: ResultAborted, EventDryRun: ResultDryRun, EventRebootFailed: ResultRebootFailed,
}

// GroupReboots assembles history records (in the order they were written)
// into reboots, ordered by their first known time. A slot-taken record opens
// a node's reboot, reboot-requested joins it and an ending record (completed,
// released, expired, aborted, dry-run, reboot-failed) closes it; records
// whose opening fell out of the range still make a reboot of their own.
func GroupReboots(events []HistoryEvent) []Reboot {
	var out []Reboot
	open := map[string]int{} // node → index in out of its open reboot
	startNew := func(ev HistoryEvent) int {
		if i, ok := open[ev.Node]; ok {
			out[i].Result = ResultUnknown
		}
		out = append(out, Reboot{Node: ev.Node, Reason: ev.Reason, BootID: ev.BootID, Result: ResultInProgress})
		open[ev.Node] = len(out) - 1
		return len(out) - 1
	}
	for _, ev := range events {
		i, isOpen := open[ev.Node]
		switch ev.Event {
		case EventSlotTaken:
			i = startNew(ev)
			out[i].SlotTakenAt = ev.At
		case EventRebootRequested:
			if !isOpen || !out[i].RequestedAt.IsZero() {
				i = startNew(ev)
			}
			out[i].RequestedAt = ev.At
		default:
			res, ok := endResults[ev.Event]
			if !ok {
				continue
			}
			if !isOpen {
				out = append(out, Reboot{Node: ev.Node, Reason: ev.Reason, BootID: ev.BootID})
				i = len(out) - 1
			}
			delete(open, ev.Node)
			r := &out[i]
			r.EndedAt, r.Result, r.By, r.Detail = ev.At, res, ev.By, ev.Reason
			switch {
			case !r.RequestedAt.IsZero():
				r.DurationMS = ev.At.Sub(r.RequestedAt).Milliseconds()
			case !r.SlotTakenAt.IsZero():
				r.DurationMS = ev.At.Sub(r.SlotTakenAt).Milliseconds()
			default:
				r.DurationMS = ev.DurationMS // completed records carry slot → release
			}
			r.DurationMS = max(r.DurationMS, 0)
		}
	}
	slices.SortStableFunc(out, func(a, b Reboot) int { return a.start().Compare(b.start()) })
	return out
}

// start is the reboot's first known time.
func (r Reboot) start() time.Time {
	for _, t := range []time.Time{r.SlotTakenAt, r.RequestedAt, r.EndedAt} {
		if !t.IsZero() {
			return t
		}
	}
	return time.Time{}
}
