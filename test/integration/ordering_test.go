package integration

import (
	"slices"
	"strings"
	"testing"
)

// testFIFOOneAtATime: 4 nodes needing a reboot start their check runs at
// staggered moments, so the mutex queue order is known. Each reboots in
// queue order, one at a time, and each reboot is followed by its post-boot
// check that frees the slot for the next (PRD E2E-1 in process form).
func testFIFOOneAtATime(t *testing.T, endpoints []string) {
	c := newCluster(t, endpoints, defaults())
	nodes := c.addNodes(4)
	var want []string
	holders := make([]*proc, len(nodes))
	for i, n := range nodes {
		want = append(want, n.name)
		holders[i] = n.start("check", "--once")
		waitFor(t, n.name+" queued on the cluster mutex", waitLong, func() bool { return c.rec.queuedEver(n.name) })
	}
	for i, n := range nodes {
		bootBefore := n.bootID()
		n.waitRebooted(1)
		holders[i].expectExit(t, exitOK)
		rb := c.reboots()
		if len(rb) != i+1 {
			t.Fatalf("after %s's reboot the reboot log has %d entries, want %d: %v", n.name, len(rb), i+1, rb)
		}
		if rb[i] != (reboot{n.name, bootBefore}) {
			t.Fatalf("reboot #%d = %v, want %s with boot id %s", i+1, rb[i], n.name, bootBefore)
		}
		slots := c.slots()
		if got := keys(slots); !slices.Equal(got, []string{n.name}) {
			t.Fatalf("while %s reboots the slots are %v, want only its own", n.name, got)
		}
		if s := slots[n.name]; s.BootID != bootBefore || !s.Deadline.After(s.AcquiredAt) || s.FenceRevision <= 0 {
			t.Fatalf("slot of %s = %+v: want boot id %s, a deadline after acquired_at and a fence revision", n.name, s, bootBefore)
		}
		for _, other := range nodes[i+1:] {
			if !holders[slices.Index(nodes, other)].running() {
				t.Fatalf("%s's holder ended before its turn", other.name)
			}
		}
		n.boot()
	}

	if got := c.rec.queueHistory(t); !slices.Equal(got, want) {
		t.Fatalf("mutex queue order %v, want %v (the test staggers the starts)", got, want)
	}
	order, most := c.rec.slotHistory(t)
	if !slices.Equal(order, want) {
		t.Errorf("slots taken in order %v, want the queue order %v", order, want)
	}
	if most != 1 {
		t.Errorf("%d slots existed at once, max_concurrent is 1", most)
	}
	for _, n := range nodes {
		for _, ev := range []string{"slot-taken", "reboot-requested", "completed"} {
			if got := len(c.historyOf(n.name, ev)); got != 1 {
				t.Errorf("history of %s: %d %q events, want 1", n.name, got, ev)
			}
		}
	}
	if q := c.queue(); len(q) != 0 {
		t.Errorf("mutex queue not empty at the end: %+v", q)
	}
}

// testLongRebootKeepsSlot: a reboot that lasts longer than lock.ttl must not
// let a second node start. A's holder has exited (its lease is gone), its
// durable slot holds until A's post-boot check releases it.
func testLongRebootKeepsSlot(t *testing.T, endpoints []string) {
	set := defaults()
	c := newCluster(t, endpoints, set)
	a, b := c.addNode("node-a"), c.addNode("node-b")
	a.expect(exitOK, "check", "--once")
	a.waitRebooted(1)

	hb := b.start("hold")
	waitFor(t, "node-b owning the mutex, waiting for a slot", waitLong, func() bool {
		return c.queuePos(b.name) == 1 || c.rebootsOf(b.name) > 0
	})
	if c.rebootsOf(b.name) > 0 {
		t.Fatalf("node-b rebooted while node-a's slot was held (slots %v)", keys(c.slots()))
	}
	nothingHappens(3 * set.ttl())
	if !hb.running() {
		t.Fatalf("node-b's holder ended while node-a was rebooting: exit %d\n%s", hb.exitCode(), hb.output())
	}
	if n := c.rebootsOf(b.name); n != 0 {
		t.Fatalf("node-b rebooted %d time(s) while node-a's reboot was still in progress", n)
	}
	if got := keys(c.slots()); !slices.Equal(got, []string{a.name}) {
		t.Fatalf("slots after 3 × lock.ttl: %v, want only node-a's", got)
	}

	a.boot()
	b.waitRebooted(1)
	hb.expectExit(t, exitOK)
	order, most := c.rec.slotHistory(t)
	if most != 1 || !slices.Equal(order, []string{a.name, b.name}) {
		t.Errorf("slot history: order %v, at most %d at once; want [node-a node-b], 1", order, most)
	}
}

// testOperatorLock: a lock taken with the etcd client's own concurrency
// package on P/lock (what `etcdctl lock P/lock` does) blocks every reboot
// until it is released.
func testOperatorLock(t *testing.T, endpoints []string) {
	set := defaults()
	c := newCluster(t, endpoints, set)
	a := c.addNode("node-a")
	unlock := c.operatorLock()
	ha := a.start("check", "--once")
	waitFor(t, "node-a queued behind the operator's lock", waitLong, func() bool { return c.queuePos(a.name) == 2 })
	nothingHappens(2 * set.ttl())
	if !ha.running() || c.rebootsOf(a.name) != 0 || len(c.slots()) != 0 {
		t.Fatalf("with the operator's lock held: holder running %v, reboots %d, slots %v; want running, 0, none",
			ha.running(), c.rebootsOf(a.name), keys(c.slots()))
	}
	st := status(t, a)
	ns := st.node(t, a.name)
	if ns.QueuePosition != 2 || !strings.Contains(ns.Why, "position 2") {
		t.Errorf("status of node-a behind the operator's lock: queue %d, why %q; want 2 and the position", ns.QueuePosition, ns.Why)
	}
	unlock()
	a.waitRebooted(1)
	ha.expectExit(t, exitOK)
	if got := c.historyOf(a.name, "slot-taken"); len(got) != 1 {
		t.Errorf("history: %d slot-taken for node-a, want 1", len(got))
	}
}
