package coordinator

import (
	"context"
	"time"
)

// The interfaces below are everything the coordinator needs from the world.
// Adapters live in other packages; cmd/clusterrebootd wires them.

// Cluster is the shared state in etcd (DESIGN §3). Errors wrap ErrUnavailable,
// ErrCorrupt, ErrConflict or ErrLockLost where those apply.
type Cluster interface {
	View(ctx context.Context) (View, error)
	// GateView is View without the mutex queue (Queue empty): what the
	// holder's gates read under the lock, cheaper with a long queue.
	GateView(ctx context.Context) (View, error)
	// NodeView is what an idle check needs, at a cost independent of the
	// cluster's size: node's own member and alive records, every slot, the
	// pause and the settings; no other node's records, no queue.
	NodeView(ctx context.Context, node string) (View, error)
	// QueueView is the mutex queue alone (Queue; nothing else): a
	// holder's place in line at a cost independent of the members.
	QueueView(ctx context.Context) (View, error)
	Register(ctx context.Context, node string) error
	PublishAlive(ctx context.Context, a Alive) error
	UpdateSlot(ctx context.Context, s Slot) (Slot, error)
	ReleaseSlot(ctx context.Context, s Slot, ev HistoryEvent) error
	AppendHistory(ctx context.Context, ev HistoryEvent) error
	History(ctx context.Context, node string, since time.Time) ([]HistoryEvent, error)
	// WaitChange returns when anything under the watched keys changed after
	// revision afterRev, or when ctx ends.
	WaitChange(ctx context.Context, w Watch, afterRev int64) error
	NewSession(ctx context.Context, info LockInfo) (Session, error)
	SetPause(ctx context.Context, p Pause) error
	ClearPause(ctx context.Context) (bool, error)
	SetMaxConcurrent(ctx context.Context, n int) error
	Forget(ctx context.Context, node string) error
}

// Watch names a part of the key space to wait on.
type Watch int

const (
	WatchSlots Watch = iota // P/slots/
	WatchPause              // P/pause
)

// Session is one holder's etcd session: a lease kept alive and the mutex.
type Session interface {
	Lock(ctx context.Context) error
	Unlock(ctx context.Context) error
	// AcquireSlot is the fenced write: it fails with ErrLockLost when the
	// session no longer owns the mutex.
	AcquireSlot(ctx context.Context, s Slot, ev HistoryEvent) (Slot, error)
	Done() <-chan struct{}
	LeaseID() int64
	// KeepAliveHealthy reports whether the lease keepalive succeeded
	// recently; the watchdog is fed only while it does.
	KeepAliveHealthy() bool
	Close(ctx context.Context) error
}

// Notifier tells the service manager about the holder (sd_notify): READY
// once the session exists, a human STATUS line per state, and a watchdog
// that is fed only while healthy() holds. Optional: nil means no manager.
type Notifier interface {
	Ready()
	Status(line string)
	Watchdog(ctx context.Context, healthy func() bool)
}

// Need is a detector outcome.
type Need int

const (
	NeedUnknown Need = iota // error, timeout, unexpected exit code: fail closed
	NeedNo
	NeedYes
)

// Detection is the combined result of all configured detectors.
type Detection struct {
	Need     Need
	Detector string // which detector(s) decided
	Reason   string // why a reboot is needed, or the error text when unknown
}

// Detector answers "does this node need a reboot?".
type Detector interface {
	Detect(ctx context.Context) Detection
}

// ScriptVerdict is the health script's answer. An error from Run means the
// script could not give one (missing, refused, timed out): fail closed.
type ScriptVerdict struct {
	Allowed   bool
	ExitCode  int
	FirstLine string
}

// HealthScript runs the operator's cluster gate in a phase: "pre-lock",
// "under-lock" or "post-boot"; the view gives the script its cluster context.
type HealthScript interface {
	Run(ctx context.Context, phase string, v View) (ScriptVerdict, error)
}

// WindowVerdict says whether a reboot may start now.
type WindowVerdict struct {
	Open     bool
	Reason   string
	NextOpen time.Time
}

// Windows evaluates the maintenance windows.
type Windows interface {
	Check(now time.Time) WindowVerdict
}

// PolicyVerdict is a built-in cluster policy's answer.
type PolicyVerdict struct {
	Allowed bool
	Rule    string
	Reason  string
}

// Policies are the built-in cluster policies, pure functions over a view.
// maxConcurrent is the effective limit (config and P/settings combined).
type Policies interface {
	SlotLimit(self string, v View, maxConcurrent int, now time.Time) PolicyVerdict
	// ClusterHealth judges the cluster after self goes down. With
	// assumeSlotsReturn, nodes in a slot count as healthy (pre-lock: a node
	// may queue while another one reboots).
	ClusterHealth(self string, v View, assumeSlotsReturn bool, now time.Time) PolicyVerdict
}

// NodeHealth is the local health test (systemd SystemState, optional
// command). An error means unhealthy.
type NodeHealth interface {
	Healthy(ctx context.Context) (bool, string, error)
}

// Inhibitors reports logind "block" shutdown inhibitors. blockedBy is empty
// when nothing blocks.
type Inhibitors interface {
	Blocking(ctx context.Context) (blockedBy string, err error)
}

// Rebooter performs the reboot action; it returns nil once the reboot was
// requested (the process may be killed by the shutdown any time after), an
// error wrapping ErrRebootRefused when it definitely was not, and any other
// error when it cannot tell (no answer): then the slot must stay.
type Rebooter interface {
	Reboot(ctx context.Context, reason string) error
}

// Holder starts the lock holder (a transient unit, or in-process) and tells
// whether one is active on this node.
type Holder interface {
	Active(ctx context.Context) (bool, error)
	Start(ctx context.Context) error
}

// Host is the local machine: boot id, kill switch and the markers in the
// run directory.
type Host interface {
	BootID() (string, error)
	// KillSwitch reports whether the kill-switch file exists; an error
	// (other than not-exist) means "cannot tell": fail closed.
	KillSwitch() (bool, error)
	// MarkRebootRequested records (in tmpfs, so a reboot clears it) that a
	// reboot was requested in this boot.
	MarkRebootRequested(bootID string) error
	RebootRequested(bootID string) (bool, error)
	ClearRebootRequested() error
	// MarkRebooted writes the post-boot marker after the slot was released.
	MarkRebooted(at time.Time) error
}

// StateStore persists the node-local state (reboot-loop guard).
type StateStore interface {
	Load() (State, error)
	Save(State) error
}

// State is the node-local persistent state.
type State struct {
	// RebootsForReason counts completed coordinated reboots (new boot_id,
	// slot released) per reason; cleared when detection says "not needed"
	// and by an operator's ack.
	RebootsForReason map[string]int `json:"reboots_for_reason,omitempty"`
	LastRebootAt     time.Time      `json:"last_reboot_at,omitzero"`
	LastRebootReason string         `json:"last_reboot_reason,omitempty"`
	// SlotBootID is the boot in which this node's holder asked for a
	// coordinated reboot; the post-boot release clears it. A check stopped
	// by the kill switch still releases the slot of a finished reboot when
	// it is set, so a local kill switch never freezes the cluster.
	SlotBootID string `json:"slot_boot_id,omitempty"`
	// CountedSlot names the slot (boot id @ acquired_at) whose reboot the
	// loop guard counted last, so a release retried after an etcd error
	// does not count it twice.
	CountedSlot string `json:"counted_slot,omitempty"`
}

// Recorder is told what a run did, for the node's metrics (DESIGN §7). Its
// methods must return at once and cannot fail the run. Optional: a nil
// Deps.Recorder records nothing. How a run ended (blocked by which gate,
// exit code) is its returned error; the caller records that.
type Recorder interface {
	// LockAcquired: the holder owns the cluster mutex after waiting wait.
	LockAcquired(wait time.Duration)
	// RebootCompleted: this node is back from its coordinated reboot (a
	// new boot_id) and its slot was released.
	RebootCompleted()
	// Observed is what a check run saw, on its way out (each time it
	// publishes the node's alive record).
	Observed(o Observation)
}

// Observation is what a check run saw of this node and the cluster.
type Observation struct {
	RebootRequired bool // the detectors said "needed"
	SlotHeld       bool // this node holds a reboot slot
	OverdueSlots   int  // slots in the cluster past their deadline
}

// observe derives a check run's Observation from its alive record and view.
func observe(a Alive, v View, node string, now time.Time) Observation {
	o := Observation{RebootRequired: a.RebootRequired}
	// A released slot may still be in the view (the run ended before
	// reading it again); the release always leaves the record idle.
	_, inView := v.SlotOf(node)
	o.SlotHeld = inView && a.State != StateIdle
	for _, s := range v.Slots {
		if s.Overdue(now) {
			o.OverdueSlots++
		}
	}
	return o
}

// recorder returns Deps.Recorder, or one that records nothing.
func (c *Coordinator) recorder() Recorder {
	if c.Recorder == nil {
		return noRecorder{}
	}
	return c.Recorder
}

type noRecorder struct{}

func (noRecorder) LockAcquired(time.Duration) {}
func (noRecorder) RebootCompleted()           {}
func (noRecorder) Observed(Observation)       {}
