package histcheck

import (
	"fmt"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/cluster"
)

// Kind is what an Event records.
type Kind string

// Event kinds. The etcd kinds carry Rev; the node kinds carry At.
const (
	SlotPut    Kind = "slot-put"    // etcd: P/slots/<Node> written (Slot)
	SlotDelete Kind = "slot-delete" // etcd: P/slots/<Node> deleted
	LockPut    Kind = "lock-put"    // etcd: mutex key Key created (CreateRev)
	LockDelete Kind = "lock-delete" // etcd: mutex key Key deleted
	Record     Kind = "history"     // etcd: P/history/ record (History)

	RebootAsked Kind = "reboot-asked" // node: the node asked for a reboot (journal, rebooter call); BootID = its boot
	Down        Kind = "down"         // node: the node went down for a reboot; BootID = the boot it left ("" = the last Up's)
	Up          Kind = "up"           // node: the node is up in boot BootID
)

func (k Kind) etcd() bool {
	return k == SlotPut || k == SlotDelete || k == LockPut || k == LockDelete || k == Record
}

// Event is one recorded fact.
type Event struct {
	Kind      Kind
	Node      string
	At        time.Time // when (zero: unknown; required for node kinds)
	Rev       int64     // etcd revision of the change (etcd kinds)
	BootID    string
	Key       string                // mutex key (LockPut, LockDelete)
	CreateRev int64                 // create revision of a mutex key (LockPut)
	Slot      *cluster.Slot         // SlotPut
	History   *cluster.HistoryEvent // Record
	Source    string                // who recorded it, for messages: "etcd", "supervisor", "journal", …
}

func (e Event) String() string {
	s := string(e.Kind)
	if e.Node != "" {
		s += " " + e.Node
	}
	if e.Rev > 0 {
		s += fmt.Sprintf(" rev %d", e.Rev)
	}
	if e.History != nil {
		s += " " + e.History.Event
	}
	if e.Source != "" {
		s += " (" + e.Source + ")"
	}
	return s
}

// Final is the state of the prefix at the end of a run.
type Final struct {
	Rev   int64
	Slots []string // nodes with a slot
	Locks []string // mutex keys
}

// Log is everything one run recorded.
type Log struct {
	MaxConcurrent int
	Events        []Event
	// Locks: the events include the mutex keys (LockPut/LockDelete), so
	// the fence of every created slot is checked.
	Locks bool
	// Final, when set, is checked for stale slot and mutex keys.
	Final *Final
}

// ViolationKind names a broken rule (see the package documentation).
type ViolationKind string

// Violation kinds.
const (
	TooManySlots      ViolationKind = "too-many-slots"
	UnfencedSlot      ViolationKind = "unfenced-slot"
	RebootWithoutSlot ViolationKind = "reboot-without-slot"
	SlotLost          ViolationKind = "slot-lost"
	TooManyInFlight   ViolationKind = "too-many-in-flight"
	TooManyDown       ViolationKind = "too-many-down"
	StaleKey          ViolationKind = "stale-key"
)

// Violation is one broken rule.
type Violation struct {
	Kind ViolationKind
	Node string    // "" when several
	Rev  int64     // etcd revision, 0 when not known
	At   time.Time // zero when not known
	Msg  string
}

func (v Violation) String() string {
	s := "SAFETY " + string(v.Kind)
	if v.Rev > 0 {
		s += fmt.Sprintf(" at revision %d", v.Rev)
	}
	if !v.At.IsZero() {
		s += " at " + v.At.Format("15:04:05.000000")
	}
	return s + ": " + v.Msg
}

// Report is the result of Check.
type Report struct {
	Violations   []Violation
	SlotsTaken   int // slots created
	Records      int // history records
	Reboots      int // Down events
	PeakSlots    int // most slots at one revision
	PeakInFlight int // most nodes between reboot requested and slot released
	PeakDown     int // most nodes down at once
}

// Count returns the number of violations of kind k.
func (r Report) Count(k ViolationKind) int {
	n := 0
	for _, v := range r.Violations {
		if v.Kind == k {
			n++
		}
	}
	return n
}

// Summary is one line for a test log.
func (r Report) Summary() string {
	return fmt.Sprintf("history checker: %d slots taken (peak %d at one revision), %d history records, %d reboots, peak %d in flight, peak %d down: %d violation(s)",
		r.SlotsTaken, r.PeakSlots, r.Records, r.Reboots, r.PeakInFlight, r.PeakDown, len(r.Violations))
}

// enders are the history events written in the same revision as a slot's
// deletion.
var enders = map[string]bool{
	cluster.EventCompleted: true, cluster.EventReleased: true, cluster.EventExpired: true,
	cluster.EventRebootFailed: true, cluster.EventDryRun: true, cluster.EventAborted: true,
}

// decided are the enders by which someone else decided the slot's fate while
// its node may be down: an operator's release, an expiry (slot_expiry =
// release).
var decided = map[string]bool{cluster.EventReleased: true, cluster.EventExpired: true}
