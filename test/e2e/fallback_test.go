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

// E2E-3: only a fallback node would be left. fallback_nodes = [node-2,
// node-3] and node-2 reports itself unhealthy (its node_health_command
// fails). node-3 needs a reboot, but rebooting it would leave no healthy
// fallback node: it is blocked before the lock and never reboots, while
// node-1, not a fallback node, needs a reboot at the same time and does
// reboot (node-3 stays up as the healthy fallback). Once node-2 reports
// itself healthy again, node-3 reboots.
func TestFallbackOnlyLeftBlocks(t *testing.T) {
	sc := newScenario(t, "fallback", 3, func(c *nodeConfig) {
		c.FallbackNodes = []string{"node-2", "node-3"}
		c.NodeHealthCommand = []string{nodeHealthPath}
	})
	n1, n2, n3 := sc.node("node-1"), sc.node("node-2"), sc.node("node-3")
	if err := n2.setFlag("unhealthy", "e2e: fallback node-2 is down for maintenance"); err != nil {
		t.Fatal(err)
	}
	sc.tl.note(n2.Name, "node_health_command fails (flag file unhealthy)")
	sc.boot()
	sc.waitRegistered()
	// The health command decides both ways: node-2 unhealthy, the others healthy.
	sc.waitFor(30*time.Second, "alive records: node-2 unhealthy, node-1 and node-3 healthy", func() (bool, error) {
		for _, n := range sc.nodes {
			a, err := sc.alive(n)
			if err != nil {
				return false, err
			}
			if a.Healthy != (n != n2) {
				return false, fmt.Errorf("%s healthy=%v", n.Name, a.Healthy)
			}
		}
		return true, nil
	})
	sc.needReboot(n1, n3)

	sc.waitFor(2*time.Minute, "node-1 rebooted, node-3 not", func() (bool, error) {
		if r := sc.reboots(n3); r != 0 {
			return false, fatal(fmt.Sprintf("node-3 rebooted %d times, leaving no healthy fallback node", r))
		}
		return sc.reboots(n1) == 1, nil
	})
	sc.waitCompleted(2*time.Minute, n1)
	sc.waitFor(30*time.Second, "node-3 blocked by the fallback rule", func() (bool, error) {
		a, err := sc.alive(n3)
		return err == nil && a.State == cluster.StateBlocked && a.RebootRequired &&
			strings.Contains(a.Blocked, "no healthy fallback node"), fmt.Errorf("node-3: %+v %v", a, err)
	})
	sc.hold(6*time.Second, "node-3 blocked while node-2 is the other fallback and unhealthy", func() string {
		if r := sc.reboots(n3); r != 0 {
			return fmt.Sprintf("node-3 rebooted %d times, leaving no healthy fallback node", r)
		}
		if slots, err := sc.slots(); err == nil && slices.Contains(slots, n3.Name) {
			return "node-3 took a slot"
		}
		return ""
	})
	a, err := sc.alive(n3)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("node-3 while node-2 is unhealthy: state %s: %s", a.State, a.Blocked)
	sc.waitTickExit(n3, 3) // blocked by a cluster policy, not a failed unit

	if err := n2.setFlag("unhealthy", ""); err != nil {
		t.Fatal(err)
	}
	tHeal := time.Now()
	sc.tl.note(n2.Name, "node_health_command succeeds again")
	sc.waitCompleted(2*time.Minute, n3)

	hist, err := sc.history()
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hist {
		if h.Node == n3.Name && h.Event == cluster.EventSlotTaken && h.At.Before(tHeal) {
			t.Errorf("node-3 took a slot at %s, before node-2 was healthy again (%s)", h.At.Format(time.RFC3339Nano), tHeal.Format(time.RFC3339Nano))
		}
	}
	if r := sc.reboots(n3) - sc.rebootsAfter(n3, tHeal); r != 0 {
		t.Errorf("node-3 rebooted %d times while node-2 was unhealthy", r)
	}
	want := map[*Node]int{n1: 1, n2: 0, n3: 1}
	for n, w := range want {
		if r := sc.reboots(n); r != w {
			t.Errorf("%s: %d reboots, want %d", n.Name, r, w)
		}
		if c := countEvents(hist, n.Name, cluster.EventSlotTaken); c != w {
			t.Errorf("%s: %d slot-taken records, want %d", n.Name, c, w)
		}
	}
	sc.checkSafety()
}
