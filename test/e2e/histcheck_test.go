//go:build e2e

package e2e

import (
	"context"
	"time"

	"github.com/clusterrebootd/clusterrebootd/test/histcheck"
)

// historyLog gathers the scenario's records for the history checker. The
// final slot and mutex keys are read once the leases of killed holders had
// time to expire (lock.ttl and a margin).
func (sc *scenario) historyLog() (histcheck.Log, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ttl, err := time.ParseDuration(sc.cfg.LockTTL)
	if err != nil {
		ttl = 90 * time.Second
	}
	fin, err := histcheck.Settle(ctx, sc.s.etcd.cli, sc.prefix, ttl+5*time.Second)
	if err != nil {
		return histcheck.Log{}, err
	}
	from := sc.startRev + 1
	if sc.compactRev > 0 {
		from = sc.compactRev + 1
	}
	evs, _, err := histcheck.Collect(ctx, sc.s.etcd.cli, sc.prefix, from)
	if err != nil {
		return histcheck.Log{}, err
	}
	evs = append(evs, sc.preCompaction...)
	evs = append(evs, sc.supervisorEvents()...)
	evs = append(evs, sc.journalEvents()...)
	return histcheck.Log{MaxConcurrent: sc.maxConcurrent, Events: evs, Locks: true, Final: fin}, nil
}

func (sc *scenario) historyReport() (histcheck.Report, error) {
	l, err := sc.historyLog()
	if err != nil {
		return histcheck.Report{}, err
	}
	return histcheck.Check(l), nil
}

// supervisorEvents: every finished boot (up, with its boot_id) and every
// reboot (nspawn exit 133: down, leaving the boot before it).
func (sc *scenario) supervisorEvents() []histcheck.Event {
	var evs []histcheck.Event
	for _, e := range sc.tl.snapshot() {
		switch e.Kind {
		case evBooted:
			evs = append(evs, histcheck.Event{Kind: histcheck.Up, Node: e.Node, BootID: e.BootID, At: e.At, Source: "supervisor"})
		case evReboot:
			evs = append(evs, histcheck.Event{Kind: histcheck.Down, Node: e.Node, At: e.At, Source: "supervisor"})
		}
	}
	return evs
}

// journalEvents: the reboot-requested entries of the nodes that are up
// (the journal is persistent, so all boots). A node that is down adds
// nothing.
func (sc *scenario) journalEvents() []histcheck.Event {
	var evs []histcheck.Event
	for _, n := range sc.nodes {
		if !n.up() {
			continue
		}
		es, err := n.journal("CLUSTERREBOOTD_EVENT=reboot-requested")
		if err != nil {
			sc.t.Logf("%s: journal for the history checker: %v", n.Name, err)
			continue
		}
		for _, e := range es {
			evs = append(evs, histcheck.Event{Kind: histcheck.RebootAsked, Node: n.Name, At: entryTime(e), Source: "journal"})
		}
	}
	return evs
}
