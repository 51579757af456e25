package histcheck

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/cluster"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// logBuilder writes synthetic logs the way the product writes etcd: one
// revision per Txn, the record in the same revision as the slot change.
type logBuilder struct {
	max    int
	rev    int64
	evs    []Event
	final  *Final
	locks  bool
	fences map[string]int64 // node → create revision of its mutex key
}

func newLog(max int) *logBuilder {
	return &logBuilder{max: max, rev: 1, locks: true, fences: map[string]int64{}}
}

func (b *logBuilder) next() int64 { b.rev++; return b.rev }

func (b *logBuilder) up(node, boot string, s float64) *logBuilder {
	b.evs = append(b.evs, Event{Kind: Up, Node: node, BootID: boot, At: at(s), Source: "supervisor"})
	return b
}

func (b *logBuilder) down(node string, s float64) *logBuilder {
	b.evs = append(b.evs, Event{Kind: Down, Node: node, At: at(s), Source: "supervisor"})
	return b
}

func (b *logBuilder) asked(node, boot string, s float64) *logBuilder {
	b.evs = append(b.evs, Event{Kind: RebootAsked, Node: node, BootID: boot, At: at(s), Source: "journal"})
	return b
}

func (b *logBuilder) lock(node string) *logBuilder {
	r := b.next()
	b.fences[node] = r
	b.evs = append(b.evs, Event{Kind: LockPut, Node: node, Key: "P/lock/" + node, CreateRev: r, Rev: r})
	return b
}

func (b *logBuilder) unlock(node string) *logBuilder {
	b.evs = append(b.evs, Event{Kind: LockDelete, Node: node, Key: "P/lock/" + node, Rev: b.next()})
	return b
}

func (b *logBuilder) record(rev int64, ev, node, boot string, s float64) {
	b.evs = append(b.evs, Event{Kind: Record, Node: node, Rev: rev, History: &cluster.HistoryEvent{Event: ev, Node: node, BootID: boot, At: at(s), Revision: rev}})
}

// take writes the fenced slot and its slot-taken record.
func (b *logBuilder) take(node, boot string, s float64) *logBuilder {
	r := b.next()
	b.evs = append(b.evs, Event{Kind: SlotPut, Node: node, Rev: r, BootID: boot,
		Slot: &cluster.Slot{Node: node, BootID: boot, FenceRevision: b.fences[node], AcquiredAt: at(s)}})
	b.record(r, cluster.EventSlotTaken, node, boot, s)
	return b
}

// put writes a slot without a record (an unfenced write).
func (b *logBuilder) put(node, boot string, fence int64, s float64) *logBuilder {
	b.evs = append(b.evs, Event{Kind: SlotPut, Node: node, Rev: b.next(), BootID: boot,
		Slot: &cluster.Slot{Node: node, BootID: boot, FenceRevision: fence, AcquiredAt: at(s)}})
	return b
}

func (b *logBuilder) requested(node, boot string, s float64) *logBuilder {
	b.record(b.next(), cluster.EventRebootRequested, node, boot, s)
	return b
}

// release deletes the slot with its record (ev "" : without a record).
func (b *logBuilder) release(node, ev, boot string, s float64) *logBuilder {
	r := b.next()
	b.evs = append(b.evs, Event{Kind: SlotDelete, Node: node, Rev: r})
	if ev != "" {
		b.record(r, ev, node, boot, s)
	}
	return b
}

// cycle is one node's whole coordinated reboot from s on.
func (b *logBuilder) cycle(node string, boot, newBoot string, s float64) *logBuilder {
	return b.lock(node).take(node, boot, s).unlock(node).requested(node, boot, s+0.1).asked(node, boot, s+0.1).
		down(node, s+0.2).up(node, newBoot, s+1).release(node, cluster.EventCompleted, newBoot, s+1.2)
}

func (b *logBuilder) end(slots []string, locks []string) *logBuilder {
	b.final = &Final{Rev: b.rev, Slots: slots, Locks: locks}
	return b
}

func (b *logBuilder) log() Log {
	return Log{MaxConcurrent: b.max, Events: slices.Clone(b.evs), Locks: b.locks, Final: b.final}
}

func booted(b *logBuilder, nodes ...string) *logBuilder {
	for _, n := range nodes {
		b.up(n, n+"-a", 0)
	}
	return b
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name  string
		log   Log
		want  []ViolationKind
		check func(t *testing.T, r Report)
	}{
		{
			name: "clean, one at a time",
			log:  booted(newLog(1), "n1", "n2", "n3").cycle("n1", "n1-a", "n1-b", 1).cycle("n2", "n2-a", "n2-b", 3).cycle("n3", "n3-a", "n3-b", 5).end(nil, nil).log(),
			check: func(t *testing.T, r Report) {
				if r.SlotsTaken != 3 || r.Reboots != 3 || r.PeakSlots != 1 || r.PeakInFlight != 1 || r.PeakDown != 1 || r.Records != 9 {
					t.Errorf("report %+v", r)
				}
			},
		},
		{
			name: "clean, two at a time with max_concurrent 2",
			log: booted(newLog(2), "n1", "n2", "n3").
				lock("n1").take("n1", "n1-a", 1).unlock("n1").lock("n2").take("n2", "n2-a", 1.1).unlock("n2").
				requested("n1", "n1-a", 1.2).requested("n2", "n2-a", 1.2).down("n1", 1.3).down("n2", 1.3).
				up("n1", "n1-b", 2).up("n2", "n2-b", 2).release("n1", cluster.EventCompleted, "n1-b", 2.1).
				release("n2", cluster.EventCompleted, "n2-b", 2.1).cycle("n3", "n3-a", "n3-b", 3).end(nil, nil).log(),
			check: func(t *testing.T, r Report) {
				if r.PeakSlots != 2 || r.PeakDown != 2 || r.PeakInFlight != 2 {
					t.Errorf("report %+v", r)
				}
			},
		},
		{
			name: "clean: a failed reboot call gives the slot back, no reboot",
			log: booted(newLog(1), "n1", "n2").lock("n1").take("n1", "n1-a", 1).unlock("n1").requested("n1", "n1-a", 1.1).
				release("n1", cluster.EventRebootFailed, "n1-a", 1.2).cycle("n2", "n2-a", "n2-b", 2).end(nil, nil).log(),
		},
		{
			name: "clean: a node powered off while rebooting, the operator releases its slot",
			log: booted(newLog(1), "n1", "n2").lock("n1").take("n1", "n1-a", 1).unlock("n1").requested("n1", "n1-a", 1.1).
				down("n1", 1.2).release("n1", cluster.EventReleased, "n1-a", 30).cycle("n2", "n2-a", "n2-b", 31).end(nil, nil).log(),
		},
		{
			name: "clean: the holder died after the slot write, slot_expiry = release freed it",
			log: booted(newLog(1), "n1", "n2").lock("n1").take("n1", "n1-a", 1).release("n1", cluster.EventExpired, "n1-a", 5).
				unlock("n1").cycle("n2", "n2-a", "n2-b", 6).end(nil, nil).log(),
		},
		{
			name: "clean: without the mutex keys (Locks false)",
			log: func() Log {
				l := booted(newLog(1), "n1", "n2").cycle("n1", "n1-a", "n1-b", 1).cycle("n2", "n2-a", "n2-b", 3).log()
				l.Locks = false
				l.Events = slices.DeleteFunc(l.Events, func(e Event) bool { return e.Kind == LockPut || e.Kind == LockDelete })
				return l
			}(),
		},
		{
			name: "two slots at one revision",
			log: booted(newLog(1), "n1", "n2").lock("n1").take("n1", "n1-a", 1).unlock("n1").lock("n2").take("n2", "n2-a", 1.1).unlock("n2").
				release("n1", cluster.EventAborted, "n1-a", 1.2).release("n2", cluster.EventAborted, "n2-a", 1.3).log(),
			want: []ViolationKind{TooManySlots},
		},
		{
			name: "slot written while another holder heads the mutex queue",
			log: booted(newLog(1), "n1", "n2").lock("n1").lock("n2").take("n2", "n2-a", 1).unlock("n1").unlock("n2").
				release("n2", cluster.EventAborted, "n2-a", 1.3).log(),
			want: []ViolationKind{UnfencedSlot},
		},
		{
			name: "slot written with a fence revision of no mutex key",
			log:  booted(newLog(1), "n1").put("n1", "n1-a", 999, 1).log(),
			want: []ViolationKind{UnfencedSlot},
		},
		{
			name: "slot written without its slot-taken record",
			log: func() Log {
				b := booted(newLog(1), "n1").lock("n1")
				return b.put("n1", "n1-a", b.fences["n1"], 1).unlock("n1").release("n1", cluster.EventAborted, "n1-a", 2).log()
			}(),
			want: []ViolationKind{UnfencedSlot},
		},
		{
			name: "node goes down without a slot",
			log:  booted(newLog(1), "n1", "n2").cycle("n1", "n1-a", "n1-b", 1).down("n2", 5).up("n2", "n2-b", 6).log(),
			want: []ViolationKind{RebootWithoutSlot},
		},
		{
			name: "node goes down after its slot was given back",
			log: booted(newLog(1), "n1").lock("n1").take("n1", "n1-a", 1).unlock("n1").release("n1", cluster.EventRebootFailed, "n1-a", 1.2).
				down("n1", 1.5).up("n1", "n1-b", 2).log(),
			want: []ViolationKind{RebootWithoutSlot},
		},
		{
			name: "node goes down holding a slot of another boot",
			log: booted(newLog(1), "n1").lock("n1").take("n1", "old-boot", 1).unlock("n1").down("n1", 1.5).up("n1", "n1-b", 2).
				release("n1", cluster.EventCompleted, "n1-b", 3).log(),
			want: []ViolationKind{RebootWithoutSlot},
		},
		{
			name: "reboot-requested record without a slot",
			log:  booted(newLog(1), "n1").requested("n1", "n1-a", 1).log(),
			want: []ViolationKind{RebootWithoutSlot},
		},
		{
			name: "node asks for a reboot without a slot (journal)",
			log:  booted(newLog(1), "n1").asked("n1", "n1-a", 1).log(),
			want: []ViolationKind{RebootWithoutSlot},
		},
		{
			name: "slot deleted without a record",
			log:  booted(newLog(1), "n1").lock("n1").take("n1", "n1-a", 1).unlock("n1").release("n1", "", "", 0).log(),
			want: []ViolationKind{SlotLost},
		},
		{
			name: "slot of a rebooting node released before it came back",
			log: booted(newLog(1), "n1").lock("n1").take("n1", "n1-a", 1).unlock("n1").requested("n1", "n1-a", 1.1).down("n1", 1.2).
				release("n1", cluster.EventAborted, "n1-a", 1.5).up("n1", "n1-b", 3).log(),
			want: []ViolationKind{SlotLost},
		},
		{
			name: "slot lost while down, the next node reboots meanwhile",
			log: booted(newLog(1), "n1", "n2").lock("n1").take("n1", "n1-a", 1).unlock("n1").requested("n1", "n1-a", 1.1).down("n1", 1.2).
				release("n1", "", "", 0).cycle("n2", "n2-a", "n2-b", 2).up("n1", "n1-b", 10).log(),
			want: []ViolationKind{SlotLost, TooManyInFlight, TooManyDown},
		},
		{
			name: "released after boot, but a second node in flight meanwhile (history only)",
			log: func() Log {
				b := booted(newLog(1), "n1", "n2").cycle("n1", "n1-a", "n1-b", 1)
				// n2 records a reboot request inside its slot, but the
				// journal shows n1 asking again while n2 is in flight.
				b.lock("n2").take("n2", "n2-a", 4).unlock("n2").requested("n2", "n2-a", 4.1)
				b.asked("n1", "n1-b", 4.2)
				return b.down("n2", 4.3).up("n2", "n2-b", 5).release("n2", cluster.EventCompleted, "n2-b", 5.2).log()
			}(),
			want: []ViolationKind{RebootWithoutSlot, TooManyInFlight},
		},
		{
			name: "slot and mutex key left at the end",
			log:  booted(newLog(1), "n1").lock("n1").take("n1", "n1-a", 1).end([]string{"n1"}, []string{"P/lock/n1"}).log(),
			want: []ViolationKind{StaleKey},
			check: func(t *testing.T, r Report) {
				if r.Count(StaleKey) != 2 {
					t.Errorf("%d stale keys, want 2", r.Count(StaleKey))
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Check(tt.log)
			got := map[ViolationKind]bool{}
			for _, v := range r.Violations {
				got[v.Kind] = true
			}
			want := map[ViolationKind]bool{}
			for _, k := range tt.want {
				want[k] = true
			}
			if !maps.Equal(got, want) {
				var lines []string
				for _, v := range r.Violations {
					lines = append(lines, v.String())
				}
				t.Errorf("violation kinds %v, want %v:\n%s", sortedKeys(got), tt.want, strings.Join(lines, "\n"))
			}
			for _, v := range r.Violations {
				if !strings.HasPrefix(v.String(), "SAFETY "+string(v.Kind)) || v.Msg == "" {
					t.Errorf("violation %q", v)
				}
			}
			if tt.check != nil {
				tt.check(t, r)
			}
			if !strings.Contains(r.Summary(), fmt.Sprintf("%d violation(s)", len(r.Violations))) {
				t.Errorf("summary %q", r.Summary())
			}
		})
	}
}

// The order of the events in the log does not matter: etcd events are
// replayed by revision, node events by time.
func TestCheckOrderIndependent(t *testing.T) {
	l := booted(newLog(1), "n1", "n2").cycle("n1", "n1-a", "n1-b", 1).cycle("n2", "n2-a", "n2-b", 3).log()
	slices.Reverse(l.Events)
	if r := Check(l); len(r.Violations) != 0 || r.SlotsTaken != 2 || r.Reboots != 2 {
		t.Errorf("reversed log: %+v", r)
	}
}

func TestCheckDefaultsMaxConcurrent(t *testing.T) {
	l := booted(newLog(1), "n1").cycle("n1", "n1-a", "n1-b", 1).log()
	l.MaxConcurrent = 0
	if r := Check(l); len(r.Violations) != 0 {
		t.Errorf("max_concurrent 0 (treated as 1): %v", r.Violations)
	}
}

func TestSnapshotSlotsAreNotCreations(t *testing.T) {
	// A slot held before the collection started (no record of its
	// creation visible) is not reported as unfenced.
	b := booted(newLog(1), "n1")
	b.evs = append(b.evs, Event{Kind: SlotPut, Node: "n1", Rev: 1, Source: SourceSnapshot, Slot: &cluster.Slot{Node: "n1", BootID: "n1-a", ModRevision: 1}})
	b.down("n1", 1).up("n1", "n1-b", 2).release("n1", cluster.EventCompleted, "n1-b", 3)
	if r := Check(b.log()); len(r.Violations) != 0 || r.SlotsTaken != 0 {
		t.Errorf("%+v", r)
	}
}

func TestEventAndViolationStrings(t *testing.T) {
	e := Event{Kind: Record, Node: "n1", Rev: 7, History: &cluster.HistoryEvent{Event: "completed"}, Source: "etcd"}
	if s := e.String(); s != "history n1 rev 7 completed (etcd)" {
		t.Errorf("%q", s)
	}
	v := Violation{Kind: SlotLost, Rev: 3, At: at(1), Msg: "x"}
	if s := v.String(); s != "SAFETY slot-lost at revision 3 at 12:00:01.000000: x" {
		t.Errorf("%q", s)
	}
	if short("0123456789") != "01234567" || short("") != "?" || clock(time.Time{}) != "never" {
		t.Error("short/clock")
	}
}
