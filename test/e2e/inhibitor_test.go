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

const (
	inhibitUnit = "e2e-inhibit.service"
	inhibitWho  = "e2e-maintenance"
	inhibitWhy  = "e2e backup running"
)

// A logind "block" inhibitor on shutdown postpones the reboot
// (respect_inhibitors = true). node-1 runs
// `systemd-inhibit --what=shutdown --mode=block` (as a transient unit, so
// it outlives the nsenter that starts it) and then needs a reboot, as does
// node-2. node-1's holder is blocked under the lock by the inhibitor,
// takes no slot, says who inhibits and why (alive record, `status`, the
// holder's STATUS= line) and retries; node-2 reboots meanwhile. Once the
// inhibitor ends, node-1 reboots. logind itself lets root reboot through a
// block inhibitor, so only the holder's own check can hold this reboot.
//
// Both reboot methods are covered: a command such as `systemctl reboot`
// run as root goes through block inhibitors, so the holder asks logind
// about them whatever the method.
func TestInhibitorPostponesReboot(t *testing.T) {
	for _, method := range []string{"logind", "command"} {
		t.Run(method, func(t *testing.T) { testInhibitorPostponesReboot(t, method) })
	}
}

func testInhibitorPostponesReboot(t *testing.T, method string) {
	sc := newScenario(t, "inhibitor-"+method, 3, func(c *nodeConfig) {
		c.RebootMethod, c.RespectInhibitors = method, true
	})
	n1, n2, n3 := sc.node("node-1"), sc.node("node-2"), sc.node("node-3")
	sc.boot()
	sc.waitRegistered()
	if _, err := n1.Exec(10*time.Second, "systemd-run", "--unit="+inhibitUnit, "--collect", "--quiet",
		"systemd-inhibit", "--what=shutdown", "--mode=block", "--who="+inhibitWho, "--why="+inhibitWhy, "sleep", "300"); err != nil {
		t.Fatal(err)
	}
	sc.waitFor(10*time.Second, "logind lists the inhibitor", func() (bool, error) {
		out, err := n1.Exec(10*time.Second, "systemd-inhibit", "--list", "--no-pager", "--no-legend")
		return strings.Contains(out, inhibitWho) && strings.Contains(out, "block"), fmt.Errorf("%q %v", out, err)
	})
	sc.tl.note(n1.Name, "block inhibitor on shutdown: %s (%s)", inhibitWho, inhibitWhy)
	sc.needReboot(n1, n2)

	isInhibited := func(why string) bool {
		return strings.Contains(why, "inhibitor") && strings.Contains(why, inhibitWho) && strings.Contains(why, inhibitWhy)
	}
	sc.waitFor(60*time.Second, "node-1's holder blocked by the inhibitor", func() (bool, error) {
		if sc.reboots(n1) > 0 {
			return false, fatal("node-1 rebooted through a block inhibitor")
		}
		if slots, err := sc.slots(); err == nil && slices.Contains(slots, n1.Name) {
			return false, fatal("node-1 took a slot while a block inhibitor is active")
		}
		a, err := sc.alive(n1)
		return err == nil && a.State == cluster.StateBlocked && a.RebootRequired && isInhibited(a.Blocked), fmt.Errorf("%+v %v", a, err)
	})
	a, _ := sc.alive(n1)
	t.Logf("node-1 alive record: state %s: %s", a.State, a.Blocked)
	if sc.cfg.holderUnit() == holdUnit {
		// The STATUS= line alternates between queued and blocked while
		// the holder retries.
		sc.waitFor(20*time.Second, "the holder unit's status names the inhibitor", func() (bool, error) {
			out, err := n1.Exec(10*time.Second, "systemctl", "show", holdUnit, "-p", "StatusText")
			return isInhibited(out), fmt.Errorf("%q %v", out, err)
		})
	}
	sc.waitFor(20*time.Second, "`clusterrebootd status --json` on node-3 names the inhibitor", func() (bool, error) {
		out, err := n3.Exec(20*time.Second, "clusterrebootd", "status", "--json")
		if err != nil {
			return false, err
		}
		var st struct {
			Nodes []struct {
				Node, State, Why string
			} `json:"nodes"`
		}
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			return false, err
		}
		for _, n := range st.Nodes {
			if n.Node == n1.Name {
				return isInhibited(n.Why), fmt.Errorf("node-1: state %s, why %q", n.State, n.Why)
			}
		}
		return false, fmt.Errorf("node-1 not in %s", out)
	})

	sc.waitCompleted(2*time.Minute, n2)
	sc.hold(5*time.Second, "node-1 inhibited", func() string {
		if r := sc.reboots(n1); r != 0 {
			return fmt.Sprintf("node-1 rebooted %d times through a block inhibitor", r)
		}
		if slots, err := sc.slots(); err == nil && len(slots) > 0 {
			return fmt.Sprintf("slots %v while node-1 is inhibited and node-2 done", slots)
		}
		return ""
	})
	if a, err := sc.alive(n1); err != nil || !isInhibited(a.Blocked) {
		t.Errorf("node-1 after node-2's reboot: alive record %+v (%v), want still blocked by the inhibitor", a, err)
	}
	hist, err := sc.history()
	if err != nil {
		t.Fatal(err)
	}
	if c := countEvents(hist, n1.Name, cluster.EventSlotTaken); c != 0 {
		t.Errorf("node-1 took %d slots while inhibited, want none", c)
	}

	if _, err := n1.Exec(10*time.Second, "systemctl", "stop", inhibitUnit); err != nil {
		t.Fatal(err)
	}
	tEnd := time.Now()
	sc.tl.note(n1.Name, "inhibitor ended (systemctl stop %s)", inhibitUnit)
	sc.waitCompleted(2*time.Minute, n1)
	if r, after := sc.reboots(n1), sc.rebootsAfter(n1, tEnd); r != 1 || after != 1 {
		t.Errorf("node-1: %d reboots, %d after the inhibitor ended, want 1 and 1", r, after)
	}
	want := map[*Node]int{n1: 1, n2: 1, n3: 0}
	for n, w := range want {
		if r := sc.reboots(n); r != w {
			t.Errorf("%s: %d reboots, want %d", n.Name, r, w)
		}
	}
	sc.checkSafety()
}
