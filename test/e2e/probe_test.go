//go:build e2e

package e2e

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Journal MESSAGE_IDs systemd (PID 1) logs for a unit invocation.
const (
	msgUnitSuccess     = "7ad2d189f7e94e70a38c781354912448" // "Deactivated successfully."
	msgUnitFailed      = "d9b373ed55a64feb8242e02dbe79a49c" // "Failed with result '…'."
	msgUnitProcessExit = "98e322203f7a4ed290d09fe03c09fe15" // "Main process exited, code=…, status=…" (failures)
)

// bootID reads the node's current boot_id.
func (n *Node) bootID() (string, error) {
	out, err := n.Exec(10*time.Second, "cat", "/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(out), err
}

// bootIDs lists the boot_ids the supervisor recorded for a node, in order.
func (sc *scenario) bootIDs(n *Node) []string {
	var ids []string
	for _, e := range sc.tl.snapshot() {
		if e.Node == n.Name && e.Kind == evBooted {
			ids = append(ids, e.BootID)
		}
	}
	return ids
}

// entryTime is a journal entry's __REALTIME_TIMESTAMP (node and host share
// the clock).
func entryTime(e map[string]any) time.Time {
	s, _ := e["__REALTIME_TIMESTAMP"].(string)
	us, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.UnixMicro(us)
}

// field is a journal entry's field as a string.
func field(e map[string]any, k string) string {
	v, ok := e[k]
	if !ok {
		return ""
	}
	if s, ok := v.(string); ok {
		return s
	}
	return fmt.Sprint(v)
}

// since keeps the entries at or after t.
func since(es []map[string]any, t time.Time) []map[string]any {
	var out []map[string]any
	for _, e := range es {
		if !entryTime(e).Before(t) {
			out = append(out, e)
		}
	}
	return out
}

// invocationOutcome reads what systemd logged about one unit invocation
// (INVOCATION_ID): whether it ended successfully ("Deactivated
// successfully", no failure or failed-exit message) and those messages.
func (n *Node) invocationOutcome(invocation string) (success bool, msgs []string, err error) {
	if invocation == "" {
		return false, nil, fmt.Errorf("%s: no invocation id", n.Name)
	}
	es, err := n.journal("_PID=1", "INVOCATION_ID="+invocation)
	if err != nil {
		return false, nil, err
	}
	ok, bad := false, false
	for _, e := range es {
		switch field(e, "MESSAGE_ID") {
		case msgUnitSuccess:
			ok = true
		case msgUnitFailed, msgUnitProcessExit:
			bad = true
		}
		msgs = append(msgs, field(e, "UNIT")+": "+field(e, "MESSAGE"))
	}
	return ok && !bad, msgs, nil
}

// waitTickExit waits until the node's check unit is between ticks (a
// running tick has no exit status yet) and fails unless its last tick
// exited with code and counted as a success (SuccessExitStatus).
func (sc *scenario) waitTickExit(n *Node, code int) {
	sc.t.Helper()
	want := strconv.Itoa(code)
	sc.waitFor(20*time.Second, fmt.Sprintf("%s: the last check tick exited %d, unit result success", n.Name, code), func() (bool, error) {
		out, err := n.Exec(10*time.Second, "systemctl", "show", checkUnit, "-p", "ActiveState", "-p", "ExecMainStatus", "-p", "Result")
		p := parseProps(out)
		if err != nil || p["ActiveState"] != "inactive" {
			return false, fmt.Errorf("%v %v", p, err)
		}
		if p["ExecMainStatus"] != want || p["Result"] != "success" {
			return false, fatal(fmt.Sprintf("check unit %v, want ExecMainStatus=%s Result=success", p, want))
		}
		return true, nil
	})
}
