//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/cluster"
)

// history reads the scenario's audit trail P/history/, oldest first.
func (sc *scenario) history() ([]cluster.HistoryEvent, error) {
	resp, err := sc.s.etcd.get(sc.prefix + "/history/")
	if err != nil {
		return nil, err
	}
	hs := make([]cluster.HistoryEvent, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var h cluster.HistoryEvent
		if err := json.Unmarshal(kv.Value, &h); err != nil {
			return nil, fmt.Errorf("history %s: %w", kv.Key, err)
		}
		h.Revision = kv.CreateRevision
		hs = append(hs, h)
	}
	slices.SortStableFunc(hs, func(a, b cluster.HistoryEvent) int {
		if c := a.At.Compare(b.At); c != 0 {
			return c
		}
		return int(a.Revision - b.Revision)
	})
	return hs, nil
}

func countEvents(hs []cluster.HistoryEvent, node, event string) int {
	n := 0
	for _, h := range hs {
		if h.Node == node && h.Event == event {
			n++
		}
	}
	return n
}

// slotEnders are the history events written when a slot goes away.
var slotEnders = map[string]bool{
	cluster.EventCompleted: true, cluster.EventReleased: true, cluster.EventExpired: true,
	cluster.EventRebootFailed: true, cluster.EventDryRun: true, cluster.EventAborted: true,
}

// interval is a span of time one node spent in some state.
type interval struct {
	node     string
	from, to time.Time
}

var forever = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// checkSafety is the history checker. From three independent records it
// fails the test on any instant with more than max_concurrent
//   - slots in etcd (the watch, in revision order),
//   - nodes between "reboot requested" and the release of their slot
//     (P/history/),
//   - nodes down (supervisor: nspawn exit 133 until the next finished boot);
//
// and on any reboot of a node outside a slot of that node, and any slot
// deletion not accounted for by a history record (a lost slot).
func (sc *scenario) checkSafety() {
	sc.safetyChecked = true
	violations := 0
	t := violationCounter{sc.t, &violations}
	sc.t.Helper()
	evs, werr := sc.watch.snapshot()
	if werr != nil {
		t.Errorf("slot watch: %v", werr)
	}
	hist, err := sc.history()
	if err != nil {
		t.Errorf("history: %v", err)
		return
	}
	tl := sc.tl.snapshot()

	// 1. Slots by etcd revision.
	held := map[string]*interval{}
	var slotIv []interval
	dels := map[string]int{}
	maxHeld := 0
	for _, e := range evs {
		if e.Put {
			if held[e.Node] == nil {
				held[e.Node] = &interval{node: e.Node, from: e.AcquiredAt, to: forever}
			}
		} else if iv := held[e.Node]; iv != nil {
			iv.to = e.Seen
			slotIv = append(slotIv, *iv)
			delete(held, e.Node)
			dels[e.Node]++
		}
		maxHeld = max(maxHeld, len(held))
		if len(held) > sc.maxConcurrent {
			t.Errorf("SAFETY: etcd revision %d: %d slots held at once (%v), max_concurrent %d", e.Rev, len(held), keys(held), sc.maxConcurrent)
		}
	}
	for _, iv := range held {
		slotIv = append(slotIv, *iv)
	}

	// 2. No reboot without a slot of the rebooting node.
	reboots := 0
	for _, e := range tl {
		if e.Kind != evReboot {
			continue
		}
		reboots++
		ok := false
		for _, iv := range slotIv {
			if iv.node == e.Node && !e.At.Before(iv.from) && !e.At.After(iv.to) {
				ok = true
			}
		}
		if !ok {
			t.Errorf("SAFETY: %s rebooted at %s without holding a slot", e.Node, e.At.Format(time.RFC3339Nano))
		}
	}

	// 3. Reboot requested → slot released, from the audit trail.
	var reqIv []interval
	open := map[string]*interval{}
	for _, h := range hist {
		switch {
		case h.Event == cluster.EventRebootRequested:
			open[h.Node] = &interval{node: h.Node, from: h.At, to: forever}
		case slotEnders[h.Event] && open[h.Node] != nil:
			open[h.Node].to = h.At
			reqIv = append(reqIv, *open[h.Node])
			delete(open, h.Node)
		}
	}
	for _, iv := range open {
		reqIv = append(reqIv, *iv)
	}
	violations += sc.checkOverlap(reqIv, "between reboot requested and slot released (etcd history)")

	// 4. Nodes down, from the supervisor.
	var downIv []interval
	down := map[string]*interval{}
	for _, e := range tl {
		switch e.Kind {
		case evReboot:
			down[e.Node] = &interval{node: e.Node, from: e.At, to: forever}
		case evBooted:
			if iv := down[e.Node]; iv != nil {
				iv.to = e.At
				downIv = append(downIv, *iv)
				delete(down, e.Node)
			}
		}
	}
	for _, iv := range down {
		downIv = append(downIv, *iv)
	}
	violations += sc.checkOverlap(downIv, "down (supervisor boot log)")

	// 5. No slot lost: every deletion has its history record.
	for node, d := range dels {
		rel := 0
		for _, h := range hist {
			if h.Node == node && slotEnders[h.Event] {
				rel++
			}
		}
		if d > rel {
			t.Errorf("SAFETY: slot of %s deleted %d time(s) but the history records %d release(s)", node, d, rel)
		}
	}
	sc.t.Logf("history checker: %d slot events (at most %d held at once), %d history records, %d reboots, %d requested→released spans, %d down spans: %d violation(s)",
		len(evs), maxHeld, len(hist), reboots, len(reqIv), len(downIv), violations)
}

// violationCounter counts the errors it reports.
type violationCounter struct {
	t *testing.T
	n *int
}

func (v violationCounter) Errorf(format string, args ...any) {
	v.t.Helper()
	*v.n++
	v.t.Errorf(format, args...)
}

// checkOverlap fails when more than max_concurrent intervals overlap and
// returns the number of violations.
func (sc *scenario) checkOverlap(ivs []interval, what string) int {
	type edge struct {
		at   time.Time
		d    int
		node string
	}
	var es []edge
	for _, iv := range ivs {
		es = append(es, edge{iv.from, +1, iv.node}, edge{iv.to, -1, iv.node})
	}
	// Ends before starts at the same instant: touching spans do not overlap.
	slices.SortStableFunc(es, func(a, b edge) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.d - b.d
	})
	in := map[string]int{}
	n, bad := 0, 0
	for _, e := range es {
		n += e.d
		in[e.node] += e.d
		if n > sc.maxConcurrent {
			var who []string
			for k, v := range in {
				if v > 0 {
					who = append(who, k)
				}
			}
			slices.Sort(who)
			sc.t.Errorf("SAFETY: %d nodes %s at once at %s: %s", n, what, e.at.Format(time.RFC3339Nano), strings.Join(who, ", "))
			bad++
		}
	}
	return bad
}

// handovers measures, from the audit trail, each time from one node's slot
// release after its reboot (completed) to the next node's reboot request.
func handovers(hist []cluster.HistoryEvent) []time.Duration {
	var ds []time.Duration
	for i, h := range hist {
		if h.Event != cluster.EventCompleted {
			continue
		}
		for _, next := range hist[i+1:] {
			if next.Event == cluster.EventRebootRequested && next.Node != h.Node {
				ds = append(ds, next.At.Sub(h.At))
				break
			}
		}
	}
	return ds
}

func keys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
