//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
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

// checkSafety is the history checker (test/histcheck) on the scenario's
// three independent records: etcd's revision history of the prefix since
// the scenario started (slot and mutex keys, P/history/), the supervisor's
// boot log (down: nspawn exit 133, up: a finished boot and its boot_id) and,
// from the nodes that are up, the journal's reboot-requested entries. It
// fails the test on any violation: more than max_concurrent slots at one
// revision, or nodes in flight (reboot requested → slot released) or down at
// once; a slot written outside the mutex; a reboot without a slot of the
// boot it left; a slot lost; a slot or mutex key left once the leases of
// killed holders expired.
func (sc *scenario) checkSafety() {
	sc.t.Helper()
	sc.safetyChecked = true
	if _, werr := sc.watch.snapshot(); werr != nil {
		// The timeline's watch (an etcd fault can end it); the checker
		// reads etcd's history itself.
		sc.t.Logf("slot watch: %v", werr)
	}
	r, err := sc.historyReport()
	if err != nil {
		sc.t.Errorf("history checker: %v", err)
		return
	}
	for _, v := range r.Violations {
		sc.t.Error(v)
	}
	sc.violations += len(r.Violations)
	sc.t.Log(r.Summary())
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
