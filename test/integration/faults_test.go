package integration

import (
	"context"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/test/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// testHolderKilled: SIGKILL of a holder's whole process group (a) while it
// is queued and (b) while it owns the mutex before the slot write: the next
// node proceeds once the dead holder's lease expires; (c) after the slot
// write: the cluster stays protected until that node's post-boot release.
func testHolderKilled(t *testing.T, endpoints []string) {
	t.Run("WhileQueued", func(t *testing.T) {
		t.Parallel()
		set := defaults()
		c := newCluster(t, endpoints, set)
		b, n := c.addNode("node-b"), c.addNode("node-c")
		unlock := c.operatorLock()
		hb := b.start("check", "--once")
		waitFor(t, "node-b queued", waitLong, func() bool { return c.queuePos(b.name) == 2 })
		hc := n.start("check", "--once")
		waitFor(t, "node-c queued behind node-b", waitLong, func() bool { return c.queuePos(n.name) == 3 })

		hb.kill()
		killed := time.Now()
		unlock()
		waitFor(t, "node-b's queue entry to expire with its lease", progressBound(set.ttl()), func() bool { return c.queuePos(b.name) == 0 })
		waitFor(t, "node-c to reboot", progressBound(set.ttl()), func() bool { return c.rebootsOf(n.name) == 1 })
		t.Logf("node-c rebooted %s after node-b was killed (lock.ttl %s)", time.Since(killed).Round(time.Millisecond), set.TTL)
		n.waitRebooted(1)
		hc.expectExit(t, exitOK)
		if c.rebootsOf(b.name) != 0 || len(c.historyOf(b.name, "slot-taken")) != 0 {
			t.Fatalf("the killed node-b rebooted or took a slot")
		}
		if order, most := c.rec.slotHistory(t); !slices.Equal(order, []string{n.name}) || most != 1 {
			t.Fatalf("slot history %v (at most %d at once), want only node-c's", order, most)
		}
	})

	t.Run("BeforeSlotWrite", func(t *testing.T) {
		t.Parallel()
		set := defaults()
		set.TTL, set.HealthTimeout = "4s", "3s" // the under-lock script blocks while A is killed
		c := newCluster(t, endpoints, set)
		a, b := c.addNode("node-a"), c.addNode("node-b")
		a.touch("gate-block-under-lock")
		ha := a.start("check", "--once")
		waitFor(t, "node-a in its under-lock health script", waitLong, func() bool { return a.exists("gate-blocked-under-lock") })
		hb := b.start("check", "--once")
		waitFor(t, "node-b queued behind node-a", waitLong, func() bool { return c.queuePos(b.name) == 2 })
		if c.queuePos(a.name) != 1 || a.gateCalls("under-lock") != 1 {
			t.Fatalf("scenario broken (machine too slow?): node-a is no longer in its first under-lock script run (queue %d, runs %d)",
				c.queuePos(a.name), a.gateCalls("under-lock"))
		}

		ha.kill()
		killed := time.Now()
		a.remove("gate-block-under-lock") // the orphaned script (own process group) ends too
		waitFor(t, "node-b to reboot after node-a's lease expired", progressBound(set.ttl()), func() bool { return c.rebootsOf(b.name) == 1 })
		t.Logf("node-b rebooted %s after node-a was killed under the lock (lock.ttl %s)", time.Since(killed).Round(time.Millisecond), set.TTL)
		b.waitRebooted(1)
		hb.expectExit(t, exitOK)
		if c.rebootsOf(a.name) != 0 {
			t.Fatalf("node-a rebooted although it was killed before its slot write")
		}
		if order, most := c.rec.slotHistory(t); !slices.Equal(order, []string{b.name}) || most != 1 {
			t.Fatalf("slot history %v (at most %d at once), want only node-b's", order, most)
		}
	})

	// SIGTERM (what systemd sends on stop) under the lock: the holder
	// unlocks and revokes its lease on the way out, so the next node does
	// not wait for lock.ttl.
	t.Run("SIGTERMReleasesLease", func(t *testing.T) {
		t.Parallel()
		set := defaults()
		set.TTL, set.HealthTimeout = "4s", "3s"
		c := newCluster(t, endpoints, set)
		a, b := c.addNode("node-a"), c.addNode("node-b")
		a.touch("gate-block-under-lock")
		ha := a.start("check", "--once")
		waitFor(t, "node-a in its under-lock health script", waitLong, func() bool { return a.exists("gate-blocked-under-lock") })
		hb := b.start("check", "--once")
		waitFor(t, "node-b queued behind node-a", waitLong, func() bool { return c.queuePos(b.name) == 2 })
		q := c.queue()
		if len(q) == 0 || q[0].node != a.name {
			t.Fatalf("node-a does not own the mutex: %+v", q)
		}
		if err := ha.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		// Stopped before its decision: no reboot, "blocked" (5) so that the
		// unit is not failed (SuccessExitStatus=3 4 5).
		ha.expectExit(t, exitBlocked)
		a.remove("gate-block-under-lock")
		ctx, cancel := c.ctx()
		ttl, err := c.cli.TimeToLive(ctx, clientv3.LeaseID(q[0].lease))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if ttl.TTL != -1 {
			t.Errorf("node-a's session lease still exists after SIGTERM (TTL %ds): it was not revoked", ttl.TTL)
		}
		b.waitRebooted(1)
		hb.expectExit(t, exitOK)
		if c.rebootsOf(a.name) != 0 {
			t.Fatalf("node-a rebooted after SIGTERM")
		}
	})

	t.Run("AfterSlotWrite", func(t *testing.T) {
		t.Parallel()
		set := defaults()
		c := newCluster(t, endpoints, set)
		a, b := c.addNode("node-a"), c.addNode("node-b")
		a.touch("reboot-block")
		ha := a.start("check", "--once")
		waitFor(t, "node-a's reboot command running", waitLong, func() bool { return a.exists("reboot-blocked") })
		if got := keys(c.slots()); !slices.Equal(got, []string{a.name}) {
			t.Fatalf("node-a's reboot command runs but the slots are %v", got)
		}
		hb := b.start("check", "--once")
		waitFor(t, "node-b owning the mutex, waiting for a slot", waitLong, func() bool { return c.queuePos(b.name) == 1 })

		ha.kill()
		a.remove("reboot-block")
		nothingHappens(3 * set.ttl())
		if !hb.running() || c.rebootsOf(b.name) != 0 {
			t.Fatalf("node-a killed after its slot write: node-b holder running %v, rebooted %d times; want still waiting",
				hb.running(), c.rebootsOf(b.name))
		}
		if got := keys(c.slots()); !slices.Equal(got, []string{a.name}) {
			t.Fatalf("slots 3 × lock.ttl after the kill: %v, want only node-a's", got)
		}
		// A check on node-a before it rebooted (same boot id): the reboot
		// was requested in this boot, so the slot stays.
		a.expect(exitOK, "check", "--once")
		if _, ok := c.slots()[a.name]; !ok {
			t.Fatalf("a check on node-a before its reboot released its slot")
		}

		a.boot()
		b.waitRebooted(1)
		hb.expectExit(t, exitOK)
		if order, most := c.rec.slotHistory(t); !slices.Equal(order, []string{a.name, b.name}) || most != 1 {
			t.Fatalf("slot history %v (at most %d at once), want [node-a node-b], 1", order, most)
		}
	})
}

// testLeaseRevoked: the holder's session lease is revoked while it owns the
// mutex (blocked in its under-lock health script): no slot, no reboot, exit
// 4, and the next node proceeds. "FencedWrite" lets the script return at
// once, so the holder reaches the fenced slot write with a lock it lost;
// "SessionEnds" keeps it blocked until the session's end stops it.
func testLeaseRevoked(t *testing.T, endpoints []string) {
	for _, fence := range []bool{true, false} {
		name := "SessionEnds"
		if fence {
			name = "FencedWrite"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			set := defaults()
			set.TTL, set.HealthTimeout = "4s", "3s"
			c := newCluster(t, endpoints, set)
			a, b := c.addNode("node-a"), c.addNode("node-b")
			a.touch("gate-block-under-lock")
			ha := a.start("check", "--once")
			waitFor(t, "node-a in its under-lock health script", waitLong, func() bool { return a.exists("gate-blocked-under-lock") })
			hb := b.start("check", "--once")
			waitFor(t, "node-b queued behind node-a", waitLong, func() bool { return c.queuePos(b.name) == 2 })

			q := c.queue()
			if len(q) == 0 || q[0].node != a.name || q[0].lease == 0 {
				t.Fatalf("node-a does not own the mutex with a leased key: %+v", q)
			}
			ctx, cancel := c.ctx()
			_, err := c.cli.Revoke(ctx, clientv3.LeaseID(q[0].lease))
			cancel()
			if err != nil {
				t.Fatalf("revoke node-a's lease: %v", err)
			}
			if fence {
				a.remove("gate-block-under-lock")
			}
			ha.expectExit(t, exitBusy)
			a.remove("gate-block-under-lock")
			out := ha.output()
			t.Logf("node-a: %s", firstLineWith(out, "lock-lost"))
			if c.rebootsOf(a.name) != 0 {
				t.Fatalf("node-a rebooted after losing its lease")
			}
			b.waitRebooted(1)
			hb.expectExit(t, exitOK)
			if order, most := c.rec.slotHistory(t); !slices.Equal(order, []string{b.name}) || most != 1 {
				t.Fatalf("slot history %v (at most %d at once), want only node-b's", order, most)
			}
		})
	}
}

// TestEtcdStoppedMidHold: etcd dies while the holder owns the mutex and is
// deciding (its under-lock script returns just after): no slot, no reboot,
// exit 6 (or 4: the session ended first); after etcd restarts the same node
// reboots normally.
func TestEtcdStoppedMidHold(t *testing.T) {
	t.Parallel()
	etcd := etcdtest.Start(t)
	set := defaults()
	set.TTL, set.HealthTimeout = "4s", "3s"
	set.DialTimeout, set.RequestTimeout = "1s", "1s"
	c := newCluster(t, etcd.Endpoints(), set)
	a := c.addNode("node-a")
	a.touch("gate-block-under-lock")
	ha := a.start("check", "--once")
	waitFor(t, "node-a in its under-lock health script", waitLong, func() bool { return a.exists("gate-blocked-under-lock") })

	// SIGKILL: a graceful stop drains client streams for seconds, longer
	// than the blocked script may wait.
	etcd.Kill()
	a.remove("gate-block-under-lock")
	code := ha.wait(t, procTimeout)
	if code != exitEtcd && code != exitBusy {
		t.Fatalf("holder with etcd gone: exit %d, want %d (etcd unreachable) or %d (lock lost)\n%s", code, exitEtcd, exitBusy, ha.output())
	}
	t.Logf("holder exited %d after etcd stopped: %s", code, lastLine(ha.output()))
	if c.rebootsOf(a.name) != 0 {
		t.Fatalf("node-a rebooted while etcd was down")
	}

	etcd.Restart(t)
	waitFor(t, "the test's etcd client to reconnect", waitLong, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := c.cli.Get(ctx, c.prefix+"slots/", clientv3.WithPrefix())
		return err == nil
	})
	if s := c.slots(); len(s) != 0 {
		t.Fatalf("slots after the outage: %v, want none", keys(s))
	}
	// Recovery: a stale queue entry of the failed holder (its lease was
	// restored by etcd) expires, and the next check reboots the node.
	recovered := time.Now()
	a.expect(exitOK, "check", "--once")
	t.Logf("check after the restart took %s (stale queue entries expire within lock.ttl)", time.Since(recovered).Round(time.Millisecond))
	a.waitRebooted(1)
	a.boot()
	if _, most := c.rec.slotHistory(t); most != 1 {
		t.Errorf("%d slots at once", most)
	}
}

func firstLineWith(out, sub string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return "(no line with " + sub + ")"
}

func lastLine(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return lines[len(lines)-1]
}
