//go:build e2e

package e2e

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/cluster"
)

// E2E-5: the detector clears while a node waits for the lock. node-1 holds
// the mutex (its under-lock health script runs); node-2 needs a reboot, its
// holder queues behind node-1, and then /run/reboot-required goes away on
// node-2. When node-2's holder gets the lock, the detector re-check says
// "no longer needed": the holder ends with exit 0, without a slot, a
// history record or a reboot (node-2's boot_id is unchanged), while node-1
// reboots as usual.
func TestDetectorClearsAfterLock(t *testing.T) {
	sc := newScenario(t, "detector-clears", 3, func(c *nodeConfig) { c.LockTTL, c.HealthTimeout = "12s", "10s" })
	n1, n2 := sc.node("node-1"), sc.node("node-2")
	// node-1 keeps the mutex long enough for node-2's next tick to queue.
	if err := n1.setFlag("sleep-under-lock", "8"); err != nil {
		t.Fatal(err)
	}
	sc.boot()
	sc.waitRegistered()
	boot0, err := n2.bootID()
	if err != nil {
		t.Fatal(err)
	}
	sc.needReboot(n1)
	sc.waitFor(60*time.Second, "node-1 at the head of the mutex queue", func() (bool, error) {
		o, err := sc.lockOwner()
		return o == n1.Name, err
	})
	sc.needReboot(n2)
	sc.waitFor(30*time.Second, "node-2's holder queued behind node-1", func() (bool, error) {
		if slots, err := sc.slots(); err == nil && len(slots) > 0 {
			return false, fatal(fmt.Sprintf("node-1 took its slot (%v) before node-2 queued: the scenario's timing did not hold", slots))
		}
		q, err := sc.lockQueue()
		return slices.Equal(q, []string{n1.Name, n2.Name}), fmt.Errorf("queue %v %v", q, err)
	})
	if _, err := n2.Exec(10*time.Second, "rm", rebootRequired); err != nil {
		t.Fatal(err)
	}
	tCleared := time.Now()
	sc.tl.note(n2.Name, "rm %s while queued behind node-1", rebootRequired)

	var aborted map[string]any
	sc.waitFor(60*time.Second, "node-2's holder aborts under the lock", func() (bool, error) {
		if sc.reboots(n2) > 0 {
			return false, fatal("node-2 rebooted although its detector cleared")
		}
		if slots, err := sc.slots(); err == nil && slices.Contains(slots, n2.Name) {
			return false, fatal("node-2 took a slot although its detector cleared")
		}
		es, err := n2.journal("CLUSTERREBOOTD_EVENT=aborted")
		if err != nil {
			return false, err
		}
		if len(es) > 0 {
			aborted = es[len(es)-1]
		}
		return len(es) == 1, fmt.Errorf("%d aborted events", len(es))
	})
	sc.tl.add(Event{At: entryTime(aborted), Node: n2.Name, Kind: evTest, Detail: "journal: " + field(aborted, "MESSAGE")})
	sc.waitCompleted(2*time.Minute, n1)
	sc.hold(6*time.Second, "node-2 after its holder aborted", func() string {
		if r := sc.reboots(n2); r != 0 {
			return fmt.Sprintf("node-2 rebooted %d times", r)
		}
		if slots, err := sc.slots(); err == nil && slices.Contains(slots, n2.Name) {
			return "node-2 holds a slot"
		}
		return ""
	})

	// The holder got the lock after the file went, in its own unit, and
	// that unit ended successfully (exit 0).
	if u := field(aborted, "_SYSTEMD_UNIT"); u != sc.cfg.holderUnit() {
		t.Errorf("node-2: the aborted event came from %q, want the holder's unit %s", u, sc.cfg.holderUnit())
	}
	inv := field(aborted, "_SYSTEMD_INVOCATION_ID")
	locked, err := n2.journal("CLUSTERREBOOTD_EVENT=lock-acquired", "_SYSTEMD_INVOCATION_ID="+inv)
	switch {
	case err != nil:
		t.Error(err)
	case len(locked) != 1:
		t.Errorf("node-2: the aborting holder logged %d lock-acquired events, want 1", len(locked))
	case entryTime(locked[0]).Before(tCleared):
		t.Errorf("node-2: the holder got the lock at %s, before %s was removed (%s)", entryTime(locked[0]), rebootRequired, tCleared)
	}
	ok, msgs, err := n2.invocationOutcome(inv)
	if err != nil || !ok {
		t.Errorf("node-2: holder unit invocation %s did not end successfully (%v): %q", inv, err, msgs)
	} else {
		t.Logf("node-2: holder unit: %q", msgs)
	}

	// No slot, no history, no reboot, same boot.
	hist, err := sc.history()
	if err != nil {
		t.Fatal(err)
	}
	if c := countEvents(hist, n2.Name, cluster.EventSlotTaken) + countEvents(hist, n2.Name, cluster.EventRebootRequested); c != 0 {
		t.Errorf("node-2: %d slot-taken/reboot-requested records, want none", c)
	}
	if boot1, err := n2.bootID(); err != nil || boot1 != boot0 {
		t.Errorf("node-2: boot_id %q (%v), want the unchanged %q", boot1, err, boot0)
	}
	a, err := sc.alive(n2)
	if err != nil || a.RebootRequired || a.State != cluster.StateIdle || a.BootID != boot0 {
		t.Errorf("node-2: alive record %+v (%v), want idle, no reboot required, boot_id %s", a, err, boot0)
	}
	if r := sc.reboots(n1); r != 1 {
		t.Errorf("node-1: %d reboots, want 1", r)
	}
	sc.checkSafety()
}
