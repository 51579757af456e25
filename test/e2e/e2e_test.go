//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/cluster"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// waitRegistered waits until every node's first tick registered it.
func (sc *scenario) waitRegistered() {
	sc.t.Helper()
	sc.waitFor(90*time.Second, "all nodes registered in etcd", func() (bool, error) {
		resp, err := sc.s.etcd.get(sc.prefix + "/members/")
		if err != nil {
			return false, err
		}
		return len(resp.Kvs) == len(sc.nodes), fmt.Errorf("%d members", len(resp.Kvs))
	})
}

// alive reads a node's alive record.
func (sc *scenario) alive(n *Node) (cluster.Alive, error) {
	var a cluster.Alive
	resp, err := sc.s.etcd.get(sc.prefix + "/alive/" + n.Name)
	if err != nil {
		return a, err
	}
	if len(resp.Kvs) != 1 {
		return a, fmt.Errorf("no alive record for %s", n.Name)
	}
	return a, json.Unmarshal(resp.Kvs[0].Value, &a)
}

// E2E-1: every node needs a reboot at once. Each reboots exactly once,
// through systemd inside the node, one at a time, and the next one starts
// only after the previous one is back and released its slot. Topologies of
// 3 and 5 nodes.
func TestAllNodesNeedReboot(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprintf("%d-nodes", n), func(t *testing.T) { testAllNodesNeedReboot(t, n) })
	}
}

func testAllNodesNeedReboot(t *testing.T, size int) {
	sc := newScenario(t, fmt.Sprintf("all-reboot-%d", size), size, nil)
	sc.boot()
	sc.waitRegistered()
	t0 := time.Now()
	sc.needReboot(sc.nodes...)
	sc.waitCompleted(4*time.Minute, sc.nodes...)
	t.Logf("all %d nodes rebooted and released in %v", len(sc.nodes), time.Since(t0).Round(time.Millisecond))
	// A few more ticks: nobody reboots twice.
	sc.hold(8*time.Second, "after every node rebooted once", func() string {
		for _, n := range sc.nodes {
			if r := sc.reboots(n); r > 1 {
				return fmt.Sprintf("%s rebooted %d times", n.Name, r)
			}
		}
		return ""
	})
	sc.checkSafety()

	hist, err := sc.history()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range sc.nodes {
		if r := sc.reboots(n); r != 1 {
			t.Errorf("%s: %d reboots (supervisor), want 1", n.Name, r)
		}
		for _, ev := range []string{cluster.EventSlotTaken, cluster.EventRebootRequested, cluster.EventCompleted} {
			if c := countEvents(hist, n.Name, ev); c != 1 {
				t.Errorf("%s: %d %q history records, want 1", n.Name, c, ev)
			}
		}
		var ids []string
		for _, e := range sc.tl.snapshot() {
			if e.Node == n.Name && e.Kind == evBooted {
				ids = append(ids, e.BootID)
			}
		}
		if len(ids) != 2 || ids[0] == ids[1] || ids[0] == "" {
			t.Errorf("%s: boot ids %v, want two different ones (a real reboot)", n.Name, ids)
		}
		a, err := sc.alive(n)
		switch {
		case err != nil:
			t.Errorf("%s: %v", n.Name, err)
		case a.RebootRequired || !a.Healthy || a.BootID != ids[len(ids)-1]:
			t.Errorf("%s: alive record after its reboot %+v, want healthy, not reboot_required, boot_id %s", n.Name, a, ids[len(ids)-1])
		}
	}
	for i, d := range handovers(hist) {
		t.Logf("handover %d: slot released after boot → next node's reboot request: %v", i+1, d.Round(time.Millisecond))
	}
	for _, n := range sc.nodes {
		checkTimerAndJournal(t, n)
	}
	checkIdleAndTick(sc, sc.nodes[0])
}

// E2E-4: the holder is SIGKILLed while it holds the mutex (its under-lock
// health script is running). Nobody proceeds while its queue entry lives;
// once the lease expired the others take the lock, and every node still
// reboots exactly once, one at a time.
func TestHolderKilledUnderLock(t *testing.T) {
	sc := newScenario(t, "holder-killed", 3, func(c *nodeConfig) { c.LockTTL, c.HealthTimeout = "10s", "8s" })
	n1, n2, n3 := sc.node("node-1"), sc.node("node-2"), sc.node("node-3")
	if err := n1.setFlag("sleep-under-lock", "6"); err != nil {
		t.Fatal(err)
	}
	sc.boot()
	sc.waitRegistered()
	sc.needReboot(n1)
	var head *mvccpb.KeyValue
	sc.waitFor(60*time.Second, "node-1 at the head of the mutex queue", func() (bool, error) {
		kv, o, err := sc.lockHead()
		head = kv
		return o == n1.Name, err
	})
	// Every clusterrebootd process on node-1: the holder (and a check tick
	// that might be running, which holds nothing).
	if _, err := n1.Exec(10*time.Second, "pkill", "-KILL", "-x", "clusterrebootd"); err != nil {
		t.Fatal(err)
	}
	tKill := time.Now()
	sc.tl.note(n1.Name, "SIGKILL every clusterrebootd process (the holder under the lock)")
	if err := n1.setFlag("sleep-under-lock", ""); err != nil {
		t.Fatal(err)
	}
	sc.needReboot(n2, n3)
	gone, err := sc.deletedAt(string(head.Key), head.ModRevision+1, time.Minute)
	if err != nil {
		t.Fatalf("the killed holder's mutex key: %v", err)
	}
	sc.tl.note(n1.Name, "the killed holder's mutex key expired with its lease (etcd revision %d, seen %v after the kill)",
		gone, time.Since(tKill).Round(time.Millisecond))
	sc.waitCompleted(3*time.Minute, n1, n2, n3)
	hist, err := sc.history()
	if err != nil {
		t.Fatal(err)
	}
	// Revisions, not clocks: the slot-taken record is written in the same
	// transaction as the slot.
	for _, h := range hist {
		if h.Event == cluster.EventSlotTaken && h.Revision > head.ModRevision && h.Revision < gone {
			t.Errorf("%s took a slot at revision %d, before the killed holder's mutex key went (revision %d)", h.Node, h.Revision, gone)
		}
	}
	for _, n := range sc.nodes {
		if r := sc.reboots(n); r != 1 {
			t.Errorf("%s: %d reboots, want 1", n.Name, r)
		}
	}
	sc.checkSafety()
}

// checkTimerAndJournal: the shipped timer is active in systemd, and the
// check unit logs native journald fields that journalctl can filter on.
func checkTimerAndJournal(t *testing.T, n *Node) {
	t.Helper()
	out, err := n.Exec(10*time.Second, "systemctl", "list-timers", "--all", "--no-pager", "clusterrebootd-check.timer")
	if err != nil || !strings.Contains(out, "clusterrebootd-check.timer") || !strings.Contains(out, "clusterrebootd-check.service") {
		t.Errorf("%s: systemctl list-timers does not show clusterrebootd-check.timer (%v):\n%s", n.Name, err, out)
	}
	es, err := n.journal("-u", "clusterrebootd-check.service")
	if err != nil {
		t.Errorf("%s: journal: %v", n.Name, err)
		return
	}
	fields := map[string]bool{}
	for _, e := range es {
		for k := range e {
			if strings.HasPrefix(k, "CLUSTERREBOOTD_") {
				fields[k] = true
			}
		}
	}
	if len(fields) == 0 || !fields["CLUSTERREBOOTD_EVENT"] {
		t.Errorf("%s: journalctl -u clusterrebootd-check -o json: no CLUSTERREBOOTD_EVENT field in %d entries (fields %v)", n.Name, len(es), keys(fields))
	}
	req, err := n.journal("CLUSTERREBOOTD_EVENT=reboot-requested")
	if err != nil {
		t.Errorf("%s: journal: %v", n.Name, err)
		return
	}
	if len(req) != 1 {
		t.Errorf("%s: journalctl CLUSTERREBOOTD_EVENT=reboot-requested: %d entries, want 1", n.Name, len(req))
		return
	}
	t.Logf("%s: journal: %d check-unit entries, fields %v; reboot-requested logged by %v: %v",
		n.Name, len(es), keys(fields), req[0]["_SYSTEMD_UNIT"], req[0]["MESSAGE"])
}

// checkIdleAndTick: between ticks no clusterrebootd process is resident,
// and what one idle tick costs under systemd.
func checkIdleAndTick(sc *scenario, n *Node) {
	t := sc.t
	idle := false
	for i := 0; i < 50 && !idle; i++ {
		a1, _ := n.Exec(10*time.Second, "systemctl", "is-active", "clusterrebootd-check.service")
		ps, _ := n.Exec(10*time.Second, "pgrep", "-x", "clusterrebootd")
		a2, _ := n.Exec(10*time.Second, "systemctl", "is-active", "clusterrebootd-check.service")
		idle = strings.TrimSpace(a1) == "inactive" && strings.TrimSpace(ps) == "" && strings.TrimSpace(a2) == "inactive"
		if !idle {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if !idle {
		t.Errorf("%s: never saw the node idle (check unit inactive and no clusterrebootd process)", n.Name)
	} else {
		t.Logf("%s: idle between ticks: check unit inactive, no clusterrebootd process", n.Name)
	}
	out, err := n.Exec(10*time.Second, "systemctl", "show", "clusterrebootd-check.service",
		"-p", "ExecMainStartTimestampMonotonic", "-p", "ExecMainExitTimestampMonotonic", "-p", "ExecMainStatus", "-p", "Result")
	if err != nil {
		t.Errorf("%s: %v", n.Name, err)
		return
	}
	p := parseProps(out)
	s, _ := strconv.ParseInt(p["ExecMainStartTimestampMonotonic"], 10, 64)
	e, _ := strconv.ParseInt(p["ExecMainExitTimestampMonotonic"], 10, 64)
	if s > 0 && e >= s {
		t.Logf("%s: last idle tick under systemd: %v wall (exit status %s, result %s)", n.Name,
			(time.Duration(e-s) * time.Microsecond).Round(time.Millisecond), p["ExecMainStatus"], p["Result"])
	}
}

func parseProps(out string) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(l), "="); ok {
			m[k] = v
		}
	}
	return m
}

// E2E-2: the health script refuses. Every node needs a reboot and none
// reboots; a blocked tick is not a failed unit. Opening the gate on one node
// lets exactly that node reboot, which shows the gate was what held them.
func TestHealthGateBlocks(t *testing.T) {
	sc := newScenario(t, "gate-blocks", 3, nil)
	for _, n := range sc.nodes {
		if err := n.setFlag("deny", "quorum at risk"); err != nil {
			t.Fatal(err)
		}
	}
	sc.boot()
	sc.waitRegistered()
	sc.needReboot(sc.nodes...)
	sc.waitFor(90*time.Second, "two blocked ticks on every node", func() (bool, error) {
		for _, n := range sc.nodes {
			es, err := n.journal("-u", "clusterrebootd-check.service", "CLUSTERREBOOTD_EVENT=blocked")
			if err != nil {
				return false, err
			}
			if len(es) < 2 {
				return false, fmt.Errorf("%s: %d blocked ticks", n.Name, len(es))
			}
		}
		return true, nil
	})
	for _, n := range sc.nodes {
		if r := sc.reboots(n); r != 0 {
			t.Errorf("%s rebooted %d times through a refusing health gate", n.Name, r)
		}
		sc.waitTickExit(n, 3) // blocked, and not a failed unit (SuccessExitStatus)
		a, err := sc.alive(n)
		if err != nil || a.State != cluster.StateBlocked || !a.RebootRequired {
			t.Errorf("%s: alive record %+v (%v), want state blocked with reboot_required", n.Name, a, err)
		} else {
			t.Logf("%s: blocked: %s", n.Name, a.Blocked)
		}
	}
	if slots, err := sc.slots(); err != nil || len(slots) != 0 {
		t.Errorf("slots %v (%v), want none", slots, err)
	}
	hist, err := sc.history()
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 0 {
		t.Errorf("history has %d records, want none", len(hist))
	}

	// Open the gate on node-2 only.
	n2 := sc.node("node-2")
	if err := n2.setFlag("deny", ""); err != nil {
		t.Fatal(err)
	}
	sc.tl.note(n2.Name, "gate opened")
	sc.waitCompleted(2*time.Minute, n2)
	sc.hold(6*time.Second, "gate still closed on node-1 and node-3", func() string {
		for _, n := range []*Node{sc.node("node-1"), sc.node("node-3")} {
			if sc.reboots(n) != 0 {
				return n.Name + " rebooted"
			}
		}
		return ""
	})
	if r := sc.reboots(n2); r != 1 {
		t.Errorf("node-2: %d reboots, want 1", r)
	}
	sc.checkSafety()
}

// A node is partitioned from etcd while it holds the mutex (its under-lock
// health script is running). It must not reboot: its lease expires and its
// fenced slot write cannot succeed. The others get the lock after the lease
// expired and reboot one at a time; after the partition heals, the node
// queues again and reboots once.
func TestPartitionWhileHoldingMutex(t *testing.T) {
	sc := newScenario(t, "partition-mutex", 3, func(c *nodeConfig) { c.LockTTL, c.HealthTimeout = "10s", "8s" })
	n1, n2, n3 := sc.node("node-1"), sc.node("node-2"), sc.node("node-3")
	if err := n1.setFlag("sleep-under-lock", "6"); err != nil {
		t.Fatal(err)
	}
	sc.boot()
	sc.waitRegistered()
	sc.needReboot(n1)
	sc.waitFor(60*time.Second, "node-1 at the head of the mutex queue", func() (bool, error) {
		o, err := sc.lockOwner()
		return o == n1.Name, err
	})
	sc.partition(n1, true)
	tPart := time.Now()
	sc.needReboot(n2, n3)
	sc.waitCompleted(3*time.Minute, n2, n3)
	sc.hold(5*time.Second, "node-1 partitioned", func() string {
		if r := sc.reboots(n1); r != 0 {
			return fmt.Sprintf("node-1 rebooted %d times while partitioned after losing its lease", r)
		}
		return ""
	})
	if o, err := sc.lockOwner(); err != nil || o == n1.Name {
		t.Errorf("node-1 still owns the mutex after its lease must have expired (%q, %v)", o, err)
	}
	if err := n1.setFlag("sleep-under-lock", ""); err != nil {
		t.Fatal(err)
	}
	sc.partition(n1, false)
	tHeal := time.Now()
	sc.waitCompleted(3*time.Minute, n1)
	if r := sc.rebootsAfter(n1, tPart) - sc.rebootsAfter(n1, tHeal); r != 0 {
		t.Errorf("node-1 rebooted %d times while partitioned", r)
	}
	for _, n := range sc.nodes {
		if r := sc.reboots(n); r != 1 {
			t.Errorf("%s: %d reboots, want 1", n.Name, r)
		}
	}
	sc.checkSafety()
}

// A node that rebooted is partitioned while it still holds its slot (its
// post-boot health check fails, so it keeps the slot). The slot is durable:
// for several lease TTLs nobody else reboots, whatever the others need.
// After the partition heals and its health returns, it releases the slot and
// the others reboot one at a time.
func TestPartitionWhileHoldingSlot(t *testing.T) {
	sc := newScenario(t, "partition-slot", 3, nil)
	n1, n2, n3 := sc.node("node-1"), sc.node("node-2"), sc.node("node-3")
	if err := n1.setFlag("deny-post-boot", "not healthy yet"); err != nil {
		t.Fatal(err)
	}
	sc.boot()
	sc.waitRegistered()
	sc.needReboot(n1)
	sc.waitFor(2*time.Minute, "node-1 rebooted, back, and still holding its slot", func() (bool, error) {
		hist, err := sc.history()
		if err != nil {
			return false, err
		}
		if end := lastEnd(hist, n1.Name); end != "" {
			return false, fatal(fmt.Sprintf("node-1's slot ended (%s) although its post-boot health check fails", end))
		}
		slots, err := sc.slots()
		return sc.reboots(n1) == 1 && sc.tl.count(n1.Name, evBooted) == 2 && slices.Equal(slots, []string{n1.Name}), err
	})
	sc.partition(n1, true)
	sc.needReboot(n2, n3)
	sc.hold(30*time.Second, "node-1 holds its slot, partitioned (3 x lock.ttl)", func() string {
		if r := sc.reboots(n2) + sc.reboots(n3); r != 0 {
			return "another node rebooted while node-1 holds its slot"
		}
		slots, err := sc.slots()
		if err == nil && !slices.Equal(slots, []string{n1.Name}) {
			return fmt.Sprintf("slots %v, want node-1's only", slots)
		}
		return ""
	})
	for _, n := range []*Node{n2, n3} {
		if a, err := sc.alive(n); err == nil {
			t.Logf("%s while waiting: state %s %s", n.Name, a.State, a.Blocked)
		}
	}
	if err := n1.setFlag("deny-post-boot", ""); err != nil {
		t.Fatal(err)
	}
	sc.partition(n1, false)
	sc.waitCompleted(3*time.Minute, n1, n2, n3)
	for _, n := range sc.nodes {
		if r := sc.reboots(n); r != 1 {
			t.Errorf("%s: %d reboots, want 1", n.Name, r)
		}
	}
	sc.checkSafety()
}
