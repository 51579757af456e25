package coordinator

import (
	"slices"
	"time"
)

// View is one consistent read of the cluster's state.
type View struct {
	Revision      int64
	Members       []string
	Alive         []Alive
	Slots         []Slot
	Pause         *Pause
	MaxConcurrent int // from P/settings; 0 when unset
	Queue         []Waiter
}

// Alive is a node's published liveness and state (P/alive/<node>).
type Alive struct {
	Node, BootID, Kernel, Version, State, Detector, Reason, Blocked string
	Healthy, RebootRequired                                         bool
	MaxConcurrent                                                   int
	UpdatedAt                                                       time.Time
}

// Node states published in Alive.State.
const (
	StateIdle      = "idle"
	StateWaiting   = "waiting"
	StateHolding   = "holding"
	StateRebooting = "rebooting"
	StateVerifying = "verifying"
	StateBlocked   = "blocked"
	StateError     = "error"
)

// Slot is a durable reboot slot (P/slots/<node>).
type Slot struct {
	Node, BootID, Reason string
	FenceRevision        int64
	AcquiredAt, Deadline time.Time
	HealthySince         time.Time
	ModRevision          int64
}

// Overdue reports whether the slot is past its deadline.
func (s Slot) Overdue(now time.Time) bool { return now.After(s.Deadline) }

// Pause is the cluster-wide pause (P/pause).
type Pause struct {
	Reason, By string
	At         time.Time
}

// Waiter is one entry of the mutex queue; Queue[0] owns the mutex.
type Waiter struct {
	Node     string
	PID      int
	QueuedAt time.Time
	Key      string // the mutex key: names a waiter without an annotation
}

// LockInfo annotates this holder's mutex key.
type LockInfo struct {
	Node   string
	PID    int
	BootID string
}

// HistoryEvent is one audit record (P/history/…).
type HistoryEvent struct {
	Event, Node, Reason, By, BootID string
	At                              time.Time
	DurationMS                      int64
}

// History event names.
const (
	EventSlotTaken       = "slot-taken"
	EventRebootRequested = "reboot-requested"
	EventCompleted       = "completed"
	EventReleased        = "released"
	EventExpired         = "expired"
	EventAborted         = "aborted"
	EventDryRun          = "dry-run"
	EventRebootFailed    = "reboot-failed"
)

// SlotOf returns node's slot, if any.
func (v View) SlotOf(node string) (Slot, bool) {
	i := slices.IndexFunc(v.Slots, func(s Slot) bool { return s.Node == node })
	if i < 0 {
		return Slot{}, false
	}
	return v.Slots[i], true
}

// AliveOf returns node's alive record, if any.
func (v View) AliveOf(node string) (Alive, bool) {
	i := slices.IndexFunc(v.Alive, func(a Alive) bool { return a.Node == node })
	if i < 0 {
		return Alive{}, false
	}
	return v.Alive[i], true
}

// QueuePosition returns node's 1-based place in the mutex queue (1 = owner)
// or 0 when it is not queued.
func (v View) QueuePosition(node string) int {
	i := slices.IndexFunc(v.Queue, func(w Waiter) bool { return w.Node == node })
	return i + 1
}

// EffectiveMax is the smaller of the node's configured limit and the
// cluster-wide setting.
func (v View) EffectiveMax(configured int) int {
	if v.MaxConcurrent > 0 && v.MaxConcurrent < configured {
		return v.MaxConcurrent
	}
	return configured
}

// NodeNames returns every node the view knows of (members, alive, slots),
// sorted.
func (v View) NodeNames() []string {
	var names []string
	names = append(names, v.Members...)
	for _, a := range v.Alive {
		names = append(names, a.Node)
	}
	for _, s := range v.Slots {
		names = append(names, s.Node)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// Rebooting lists the nodes holding a slot.
func (v View) Rebooting() []string {
	out := make([]string, 0, len(v.Slots))
	for _, s := range v.Slots {
		out = append(out, s.Node)
	}
	return out
}
