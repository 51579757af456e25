//go:build e2e

package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/cluster"
)

// E2E-4, second half: the holder is SIGKILLed after its fenced slot write,
// while the reboot is being asked for. The reboot command (method
// "command") takes its time on node-1: it sleeps before `systemctl reboot`
// (on the other nodes it reboots at once). The test
// kills every process of the holder's unit, the sleeping reboot command
// with it, so no reboot is on its way any more.
//
// What the product does (lib/coordinator postboot.go, sameBoot): the slot
// is durable and the holder wrote the reboot-requested marker
// (/run/clusterrebootd) before the reboot call, so every later check on
// the node sees its own slot with the same boot_id and the marker, reports
// "rebooting: reboot in progress" and keeps the slot. The cluster stays
// protected: nobody else gets a slot, whatever they need, until the node
// reboots (its post-boot check releases the slot; /run is a tmpfs, so the
// marker goes with the reboot), an operator runs `clusterrebootd release`,
// or the slot's deadline (max_reboot_duration) passes and, with the default
// slot_expiry = "freeze", the cluster freezes until an operator acts.
// Here the node reboots after a while (the test runs `systemctl reboot` in
// it, as an operator would), releases its slot after boot, and node-2,
// waiting all along, reboots next.
func TestHolderKilledAfterSlotWrite(t *testing.T) {
	sc := newScenario(t, "killed-after-slot", 3, func(c *nodeConfig) {
		c.RebootMethod, c.RebootCommand = "command", []string{slowRebootPath}
	})
	n1, n2, n3 := sc.node("node-1"), sc.node("node-2"), sc.node("node-3")
	if err := n1.setFlag("slow-reboot", "1"); err != nil {
		t.Fatal(err)
	}
	sc.boot()
	sc.waitRegistered()
	sc.needReboot(n1)
	sc.waitFor(60*time.Second, "node-1 holds its slot and its reboot command sleeps", func() (bool, error) {
		slots, err := sc.slots()
		if err != nil || !slices.Equal(slots, []string{n1.Name}) {
			return false, fmt.Errorf("slots %v %v", slots, err)
		}
		if sc.reboots(n1) != 0 {
			return false, fatal("node-1 rebooted before the test could kill its holder")
		}
		_, err = n1.Exec(10*time.Second, "pgrep", "-f", slowRebootPath)
		return err == nil, err
	})
	unit := sc.cfg.holderUnit()
	if _, err := n1.Exec(10*time.Second, "systemctl", "kill", "--signal=KILL", unit); err != nil {
		t.Fatal(err)
	}
	tKill := time.Now()
	sc.tl.note(n1.Name, "systemctl kill --signal=KILL %s (holder and reboot command)", unit)
	sc.waitFor(10*time.Second, "no holder and no reboot command left on node-1", func() (bool, error) {
		if _, err := n1.Exec(10*time.Second, "pgrep", "-f", slowRebootPath); err == nil || !strings.Contains(err.Error(), "exit status 1") {
			return false, fmt.Errorf("reboot command still running (pgrep: %v)", err) // pgrep: 1 = no match
		}
		if unit != holdUnit {
			return true, nil // foreground: the timer starts the check unit again at once
		}
		out, _ := n1.Exec(10*time.Second, "systemctl", "is-active", unit)
		st := strings.TrimSpace(out)
		return st == "inactive" || st == "failed", fmt.Errorf("%s %s", unit, st)
	})
	sc.needReboot(n2)

	// Four check ticks on node-1, and node-2 queued for a slot.
	sc.hold(12*time.Second, "node-1's slot protects the cluster after its holder died", func() string {
		slots, err := sc.slots()
		if err == nil && !slices.Equal(slots, []string{n1.Name}) {
			return fmt.Sprintf("slots %v, want node-1's only", slots)
		}
		for _, n := range sc.nodes {
			if r := sc.reboots(n); r != 0 {
				return fmt.Sprintf("%s rebooted %d times", n.Name, r)
			}
		}
		return ""
	})
	a, err := sc.alive(n1)
	if err != nil || a.State != cluster.StateRebooting || a.Blocked != "reboot in progress" {
		t.Errorf("node-1 after its holder died: alive record %+v (%v), want state rebooting, \"reboot in progress\"", a, err)
	}
	checks, err := n1.journal("-u", checkUnit, "CLUSTERREBOOTD_EVENT=check")
	kept := 0
	for _, e := range since(checks, tKill) {
		if strings.Contains(field(e, "MESSAGE"), "own slot held and reboot in progress") {
			kept++
		}
	}
	if err != nil || kept < 2 {
		t.Errorf("node-1: %d check ticks after the kill kept the slot for a reboot in progress (%v), want >= 2", kept, err)
	}
	if a2, err := sc.alive(n2); err == nil {
		t.Logf("node-2 meanwhile: state %s: %s", a2.State, a2.Blocked)
	}
	if resp, err := sc.s.etcd.get(sc.prefix + "/slots/" + n1.Name); err == nil && len(resp.Kvs) == 1 {
		t.Logf("node-1's slot: %s", resp.Kvs[0].Value)
	}

	// The reboot happens after all.
	tReboot := time.Now()
	_, err = n1.Exec(20*time.Second, "systemctl", "reboot")
	sc.tl.note(n1.Name, "systemctl reboot by the test (as an operator would) (%v)", err)
	sc.waitCompleted(2*time.Minute, n1, n2)

	hist, err := sc.history()
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range []string{cluster.EventSlotTaken, cluster.EventRebootRequested, cluster.EventCompleted} {
		if c := countEvents(hist, n1.Name, ev); c != 1 {
			t.Errorf("node-1: %d %q records, want 1", c, ev)
		}
	}
	for _, h := range hist {
		if h.Node == n1.Name && slotEnders[h.Event] && h.Event != cluster.EventCompleted {
			t.Errorf("node-1's slot ended with %q (%s): want it kept until the reboot", h.Event, h.Reason)
		}
		if h.Node == n2.Name && h.Event == cluster.EventSlotTaken && h.At.Before(tReboot) {
			t.Errorf("node-2 took a slot at %s, before node-1 rebooted", h.At.Format(time.RFC3339Nano))
		}
	}
	want := map[*Node]int{n1: 1, n2: 1, n3: 0}
	for n, w := range want {
		if r := sc.reboots(n); r != w {
			t.Errorf("%s: %d reboots, want %d", n.Name, r, w)
		}
	}
	if r := sc.reboots(n1) - sc.rebootsAfter(n1, tReboot); r != 0 {
		t.Errorf("node-1 rebooted %d times before the test rebooted it", r)
	}
	sc.checkSafety()
}
