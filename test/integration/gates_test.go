package integration

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// testHealthGate: the health script and the built-in policies block before
// the lock and under it; a detector that clears while queued aborts; pause,
// an overdue slot and missing alive records block as DESIGN §3/§4 say.
func testHealthGate(t *testing.T, endpoints []string) {
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, endpoints []string)
	}{
		{"PreLock", gatePreLock},
		{"UnderLock", gateUnderLock},
		{"FallbackNodes", gateFallbackNodes},
		{"DetectorClearsWhileQueued", gateDetectorClears},
		{"Pause", gatePause},
		{"PauseUnderLock", gatePauseUnderLock},
		{"OverdueSlotFreezes", gateOverdueSlot},
		{"MissingAliveNeverHealthy", gateMissingAlive},
		{"MinHealthyCountsSelfDown", gateSelfCountsDown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, endpoints)
		})
	}
}

// gatePreLock: the health script refuses in phase pre-lock: check exits 3
// and no holder ever queues (PRD E2E-2).
func gatePreLock(t *testing.T, endpoints []string) {
	c := newCluster(t, endpoints, defaults())
	a := c.addNode("node-a")
	a.touch("gate-deny-pre-lock")
	a.expect(exitHealth, "check", "--once")
	if n := c.rec.count(t, "lock/"); n != 0 || a.gateCalls("under-lock") != 0 {
		t.Fatalf("blocked pre-lock, yet %d mutex events and %d under-lock script runs: a holder started", n, a.gateCalls("under-lock"))
	}
	if al, ok := c.alive(a.name); !ok || al.State != "blocked" || !strings.Contains(al.Blocked, "denied by the test") {
		t.Errorf("alive record %+v (present %v): want state blocked with the script's reason", al, ok)
	}
	// The same node is allowed once the script agrees.
	a.remove("gate-deny-pre-lock")
	a.expect(exitOK, "check", "--once")
	a.waitRebooted(1)
}

// gateUnderLock: the script allows pre-lock and refuses under the lock: the
// holder releases the mutex, backs off and retries until max_hold_wait, then
// exits 3. No slot, no reboot, no queue entry left behind.
func gateUnderLock(t *testing.T, endpoints []string) {
	set := defaults()
	set.MaxHoldWait = "3s"
	c := newCluster(t, endpoints, set)
	a := c.addNode("node-a")
	a.touch("gate-deny-under-lock")
	a.expect(exitHealth, "check", "--once")
	if n := a.gateCalls("under-lock"); n < 2 {
		t.Errorf("the under-lock script ran %d time(s) in 3s with backoff 100ms–500ms: the holder did not retry", n)
	}
	if n := c.rec.count(t, "slots/"); n != 0 || c.rebootsOf(a.name) != 0 {
		t.Fatalf("blocked under the lock, yet %d slot events and %d reboots", n, c.rebootsOf(a.name))
	}
	if q := c.queue(); len(q) != 0 {
		t.Fatalf("queue entries left behind: %+v", q)
	}
}

// gateFallbackNodes (PRD E2E-3): fallback_nodes = [node-1, node-2] with
// node-2 unhealthy: node-1 is the last healthy fallback node and is refused
// (exit 3); once node-2 is healthy again node-1 may reboot.
func gateFallbackNodes(t *testing.T, endpoints []string) {
	set := defaults()
	set.FallbackNodes = []string{"node-1", "node-2"}
	c := newCluster(t, endpoints, set)
	ns := c.addNodes(3)
	n1, n2, n3 := ns[0], ns[1], ns[2]
	n2.setNeedsReboot(false)
	n3.setNeedsReboot(false)
	n2.touch("unhealthy")
	n2.expect(exitOK, "check", "--once")
	n3.expect(exitOK, "check", "--once")
	if al, _ := c.alive(n2.name); al.Healthy {
		t.Fatalf("node-2 is flagged unhealthy but its alive record says healthy: %+v", al)
	}
	out := n1.expect(exitHealth, "check", "--once")
	if !strings.Contains(out, "fallback") {
		t.Errorf("node-1 blocked, but not by the fallback rule:\n%s", out)
	}
	if n := c.rec.count(t, "lock/"); n != 0 {
		t.Fatalf("node-1 blocked pre-lock, yet %d mutex events", n)
	}
	n2.remove("unhealthy")
	n2.expect(exitOK, "check", "--once")
	n1.expect(exitOK, "check", "--once")
	n1.waitRebooted(1)
}

// gateDetectorClears (PRD E2E-5): the node no longer needs a reboot when its
// holder gets the lock: the holder aborts, exit 0, no slot, no reboot.
func gateDetectorClears(t *testing.T, endpoints []string) {
	c := newCluster(t, endpoints, defaults())
	a := c.addNode("node-a")
	unlock := c.operatorLock()
	ha := a.start("check", "--once")
	waitFor(t, "node-a queued", waitLong, func() bool { return c.queuePos(a.name) == 2 })
	a.setNeedsReboot(false)
	unlock()
	ha.expectExit(t, exitOK)
	if c.rebootsOf(a.name) != 0 || c.rec.count(t, "slots/") != 0 {
		t.Fatalf("node-a rebooted or took a slot after its detector cleared")
	}
	if n := a.gateCalls("under-lock"); n != 0 {
		t.Errorf("the under-lock health script ran %d time(s): the detector re-check comes first and aborts", n)
	}
	if q := c.queue(); len(q) != 0 {
		t.Errorf("queue entries left behind: %+v", q)
	}
}

// gatePause: `pause --reason` blocks check runs (exit 5, no holder);
// `resume` unblocks.
func gatePause(t *testing.T, endpoints []string) {
	c := newCluster(t, endpoints, defaults())
	a := c.addNode("node-a")
	const reason = "kernel regression INC-42"
	a.expect(exitOK, "pause", "--reason", reason)
	out := a.expect(exitBlocked, "check", "--once")
	if !strings.Contains(out, reason) {
		t.Errorf("blocked check does not say why (%q):\n%s", reason, out)
	}
	if n := c.rec.count(t, "lock/"); n != 0 {
		t.Fatalf("paused, yet %d mutex events", n)
	}
	st := status(t, a)
	if st.Paused == nil || st.Paused.Reason != reason || st.Paused.By != operator {
		t.Errorf("status paused = %+v, want reason %q by %q", st.Paused, reason, operator)
	}
	a.expect(exitOK, "resume")
	a.expect(exitOK, "check", "--once")
	a.waitRebooted(1)
}

// gatePauseUnderLock: a pause set while the holder is queued stops it under
// the lock; resume lets the same holder proceed.
func gatePauseUnderLock(t *testing.T, endpoints []string) {
	c := newCluster(t, endpoints, defaults())
	a := c.addNode("node-a")
	unlock := c.operatorLock()
	ha := a.start("check", "--once")
	waitFor(t, "node-a queued", waitLong, func() bool { return c.queuePos(a.name) == 2 })
	a.expect(exitOK, "pause", "--reason", "freeze")
	unlock()
	waitFor(t, "node-a blocked by the pause under the lock", waitLong, func() bool {
		al, _ := c.alive(a.name)
		return al.State == "blocked" && strings.Contains(al.Blocked, "paused")
	})
	if !ha.running() || c.rebootsOf(a.name) != 0 || len(c.slots()) != 0 {
		t.Fatalf("paused: holder running %v, reboots %d, slots %v", ha.running(), c.rebootsOf(a.name), keys(c.slots()))
	}
	a.expect(exitOK, "resume")
	a.waitRebooted(1)
	ha.expectExit(t, exitOK)
}

// gateOverdueSlot: a slot past its deadline freezes the cluster (no new
// slot; simulate says 4; status says frozen); `release --node` frees it with
// a history entry "released", and the waiting holder proceeds.
func gateOverdueSlot(t *testing.T, endpoints []string) {
	c := newCluster(t, endpoints, defaults())
	a := c.addNode("node-a")
	now := time.Now().UTC()
	ghost, err := json.Marshal(slotRec{Node: "ghost", BootID: "ghost-boot", Reason: "kernel 6.1.99",
		FenceRevision: 1, AcquiredAt: now.Add(-2 * time.Hour), Deadline: now.Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	c.put("slots/ghost", string(ghost))

	ha := a.start("check", "--once")
	waitFor(t, "node-a blocked by the overdue slot under the lock", waitLong, func() bool {
		al, _ := c.alive(a.name)
		return al.State == "blocked" && strings.Contains(al.Blocked, "overdue") || c.rebootsOf(a.name) > 0
	})
	if got := keys(c.slots()); !slices.Equal(got, []string{"ghost"}) || c.rebootsOf(a.name) != 0 {
		t.Fatalf("frozen cluster: slots %v, node-a reboots %d; want only ghost, 0", got, c.rebootsOf(a.name))
	}
	if code, out := a.run("simulate"); code != exitBusy || !strings.Contains(out, "overdue") {
		t.Errorf("simulate on a frozen cluster: exit %d, want %d, naming the overdue slot\n%s", code, exitBusy, out)
	}
	st := status(t, a)
	if g := st.node(t, "ghost"); !st.Frozen || g.Slot == nil || !g.Slot.Overdue || g.Why == "" {
		t.Errorf("status: frozen %v, ghost %+v; want frozen with an overdue slot and a why", st.Frozen, g)
	}

	a.expect(exitOK, "release", "--node", "ghost")
	a.waitRebooted(1)
	ha.expectExit(t, exitOK)
	rel := c.historyOf("ghost", "released")
	if len(rel) != 1 || rel[0].By != operator {
		t.Errorf("history of ghost: %+v, want one \"released\" event by %q", rel, operator)
	}
	if order, most := c.rec.slotHistory(t); most != 1 || !slices.Equal(order, []string{"ghost", a.name}) {
		t.Errorf("slot history %v (at most %d at once)", order, most)
	}
}

// gateMissingAlive: a member whose alive record expired never counts as
// healthy: with min_healthy_absolute = 2 and node-3's record gone, node-1
// going down would leave only node-2 (exit 3). Once node-3 checks in again,
// node-1 may reboot.
func gateMissingAlive(t *testing.T, endpoints []string) {
	set := defaults()
	set.MinHealthyAbsolute = 2
	c := newCluster(t, endpoints, set)
	ns := c.addNodes(3)
	n1, n2, n3 := ns[0], ns[1], ns[2]
	n2.setNeedsReboot(false)
	n3.setNeedsReboot(false)
	n2.expect(exitOK, "check", "--once")
	n3.expect(exitOK, "check", "--once")
	// Expire node-3's alive record: revoke its lease, as alive_ttl would.
	kvs := c.get("alive/" + n3.name).Kvs
	if len(kvs) != 1 || kvs[0].Lease == 0 {
		t.Fatalf("node-3's alive record is missing or not leased: %v", kvs)
	}
	ctx, cancel := c.ctx()
	_, err := c.cli.Revoke(ctx, clientv3.LeaseID(kvs[0].Lease))
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.alive(n2.name); !ok {
		t.Fatalf("revoking node-3's alive lease removed node-2's record too")
	}
	out := n1.expect(exitHealth, "check", "--once")
	if !strings.Contains(out, "min_healthy_absolute") {
		t.Errorf("node-1 blocked, but not by min_healthy_absolute:\n%s", out)
	}
	n3.expect(exitOK, "check", "--once")
	n1.expect(exitOK, "check", "--once")
	n1.waitRebooted(1)
}

// gateSelfCountsDown: 3 healthy nodes, max_concurrent 2, min_healthy_absolute
// 2. node-1 may go (2 remain). While it is down, node-2 must not: it would
// leave only node-3. Counting node-2 itself as healthy would wrongly allow
// it (2 >= 2). Its pre-lock check passes (node-1 is expected back), so the
// refusal comes under the lock: exit 3 after max_hold_wait.
func gateSelfCountsDown(t *testing.T, endpoints []string) {
	set := defaults()
	set.MaxConcurrent, set.MinHealthyAbsolute, set.MaxHoldWait = 2, 2, "3s"
	c := newCluster(t, endpoints, set)
	ns := c.addNodes(3)
	n1, n2, n3 := ns[0], ns[1], ns[2]
	n2.setNeedsReboot(false)
	n3.setNeedsReboot(false)
	n2.expect(exitOK, "check", "--once")
	n3.expect(exitOK, "check", "--once")
	n2.setNeedsReboot(true)

	n1.expect(exitOK, "check", "--once")
	n1.waitRebooted(1)
	out := n2.expect(exitHealth, "check", "--once")
	if !strings.Contains(out, "min_healthy_absolute") {
		t.Errorf("node-2 blocked, but not by min_healthy_absolute:\n%s", out)
	}
	if !c.rec.queuedEver(n2.name) {
		t.Errorf("node-2's holder never queued: the pre-lock check should assume node-1 comes back")
	}
	if _, ok := c.slots()[n2.name]; ok || c.rebootsOf(n2.name) != 0 {
		t.Fatalf("node-2 took a slot or rebooted while node-1 was down")
	}
	n1.boot()
	n2.expect(exitOK, "check", "--once")
	n2.waitRebooted(1)
	if _, most := c.rec.slotHistory(t); most != 1 {
		t.Errorf("%d slots at once; the policy allows only one node down here", most)
	}
}
