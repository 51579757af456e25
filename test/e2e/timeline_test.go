//go:build e2e

package e2e

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Event kinds of the timeline.
const (
	evStart   = "nspawn-start" // supervisor started systemd-nspawn
	evBooted  = "booted"       // systemd in the node finished startup (Detail: state, boot_id)
	evReboot  = "reboot"       // nspawn exited 133: the node rebooted
	evExit    = "exit"         // nspawn exited otherwise (poweroff, crash)
	evSlotPut = "slot-put"     // etcd watch: P/slots/<node> written
	evSlotDel = "slot-del"     // etcd watch: P/slots/<node> deleted
	evHistory = "history"      // P/history/ record (At from the record)
	evTest    = "test"         // something the test did (touch, partition, heal)
)

// Event is one line of a scenario's timeline. Node and host share one
// clock (containers share the kernel), so node-written times (history, slot
// values) and the supervisor's times compare directly.
type Event struct {
	At     time.Time
	Node   string
	Kind   string
	Detail string
	Code   int    // exit status for evReboot/evExit
	BootID string // for evBooted
}

// Timeline collects a scenario's events from the supervisor, the etcd
// watch and the test.
type Timeline struct {
	mu     sync.Mutex
	start  time.Time
	events []Event
}

func newTimeline() *Timeline { return &Timeline{start: time.Now()} }

func (tl *Timeline) add(e Event) {
	if e.At.IsZero() {
		e.At = time.Now()
	}
	tl.mu.Lock()
	tl.events = append(tl.events, e)
	tl.mu.Unlock()
}

// note records a test action.
func (tl *Timeline) note(node, format string, args ...any) {
	tl.add(Event{Node: node, Kind: evTest, Detail: fmt.Sprintf(format, args...)})
}

// snapshot returns the events so far, in time order.
func (tl *Timeline) snapshot() []Event {
	tl.mu.Lock()
	es := slices.Clone(tl.events)
	tl.mu.Unlock()
	slices.SortStableFunc(es, func(a, b Event) int { return a.At.Compare(b.At) })
	return es
}

// count counts a node's events of a kind ("" node: all nodes).
func (tl *Timeline) count(node, kind string) int {
	n := 0
	for _, e := range tl.snapshot() {
		if e.Kind == kind && (node == "" || e.Node == node) {
			n++
		}
	}
	return n
}

// format renders the timeline with times relative to its start, merged with
// extra events (etcd history read at the end).
func (tl *Timeline) format(extra []Event) string {
	es := append(tl.snapshot(), extra...)
	slices.SortStableFunc(es, func(a, b Event) int { return a.At.Compare(b.At) })
	var b strings.Builder
	for _, e := range es {
		d := e.Detail
		switch e.Kind {
		case evReboot, evExit:
			d = fmt.Sprintf("status %d %s", e.Code, d)
		case evBooted:
			d = fmt.Sprintf("boot_id %.8s %s", e.BootID, d)
		}
		fmt.Fprintf(&b, "  %+8.3fs  %-7s %-12s %s\n", e.At.Sub(tl.start).Seconds(), e.Node, e.Kind, strings.TrimSpace(d))
	}
	return b.String()
}
