package gate

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Verdict rules: which check blocked (or, when allowed, which check spoke).
const (
	RuleSlots              = "slots"
	RuleOverdue            = "overdue"
	RuleMinHealthyAbsolute = "min_healthy_absolute"
	RuleMinHealthyFraction = "min_healthy_fraction"
	RuleFallback           = "fallback"
	// RuleInvalid: the policy or snapshot is malformed (max_concurrent < 1,
	// unknown slot_expiry, negative or NaN minimum, no Self). Always blocks.
	RuleInvalid = "invalid"
)

// Slot expiry modes (Policy.SlotExpiry).
const (
	SlotExpiryFreeze  = "freeze"  // an overdue slot blocks new slots until an operator acts ("" means this)
	SlotExpiryRelease = "release" // overdue slots are not counted
)

// NodeState is what the cluster knows about one node.
type NodeState struct {
	Name    string
	Alive   bool // the alive record is present and not expired
	Healthy bool // the node reported itself healthy
	InSlot  bool // the node holds a reboot slot
}

// SlotState is one reboot slot in use.
type SlotState struct {
	Node    string
	Overdue bool // past its deadline
}

// Snapshot is the cluster as seen by Self when it asks to reboot.
type Snapshot struct {
	Self    string
	Members []string
	Nodes   []NodeState
	Slots   []SlotState
}

// Policy holds the built-in cluster policies.
type Policy struct {
	MaxConcurrent            int
	SlotExpiry               string // SlotExpiryFreeze ("" too) or SlotExpiryRelease
	MinHealthyFraction       float64
	MinHealthyAbsolute       int
	ExpectedNodes            int // > 0 overrides the member count as cluster size
	FallbackNodes            []string
	ForbidIfOnlyFallbackLeft bool
	// AssumeSlotsReturn counts nodes holding a slot that is not overdue as
	// healthy: they are expected back. The pre-lock evaluation sets it, so
	// a node can queue on the mutex while another node reboots; the
	// evaluation under the lock must not (there the slot holder is down).
	AssumeSlotsReturn bool
}

// Verdict is the outcome of one policy check.
type Verdict struct {
	Allowed bool
	Rule    string // Rule* constant; on Allowed, the last rule evaluated
	Reason  string // human, for logs and status
}

// Counts are the numbers ClusterHealth decides on. They are meant for the
// health script too: CLUSTER_SIZE = Size, HEALTHY_NODES = HealthyNow,
// REBOOTING_NODES = Rebooting.
type Counts struct {
	Size                 int      // ExpectedNodes if > 0, else |Members ∪ {Self}|
	HealthyNow           int      // members counted healthy, Self included
	HealthyAfter         int      // members counted healthy, Self excluded
	NeedFraction         int      // ceil(MinHealthyFraction × Size), robust to float error
	FallbackHealthyAfter int      // fallback nodes other than Self counted healthy
	Rebooting            []string // nodes holding a slot, sorted
}

// SlotLimit checks the reboot slots: fewer than MaxConcurrent in use. Self's
// own slot, if any, is not counted (Self asks before writing it, and a
// rewrite replaces it). With SlotExpiry "freeze" (or "") any overdue slot
// blocks with Rule "overdue" until an operator releases it; with "release"
// overdue slots are not counted. Nodes flagged InSlot without a SlotState
// count as a slot in use (not overdue).
func SlotLimit(p Policy, s Snapshot) Verdict {
	if p.MaxConcurrent < 1 {
		return Verdict{Rule: RuleInvalid, Reason: fmt.Sprintf("max_concurrent %d is less than 1", p.MaxConcurrent)}
	}
	freeze := false
	switch p.SlotExpiry {
	case "", SlotExpiryFreeze:
		freeze = true
	case SlotExpiryRelease:
	default:
		return Verdict{Rule: RuleInvalid, Reason: fmt.Sprintf("unknown slot_expiry %q (want freeze or release)", p.SlotExpiry)}
	}
	// Per node: any overdue entry freezes; under release a node's slot is
	// only ignored when every entry for it is overdue (fail closed on
	// duplicates).
	anyOverdue, fresh := map[string]bool{}, map[string]bool{}
	for _, sl := range s.Slots {
		if sl.Node == s.Self {
			continue
		}
		if sl.Overdue {
			anyOverdue[sl.Node] = true
		} else {
			fresh[sl.Node] = true
		}
	}
	for _, n := range s.Nodes {
		if n.InSlot && n.Name != s.Self && !anyOverdue[n.Name] {
			fresh[n.Name] = true
		}
	}
	var late []string // frozen on (freeze) or ignored (release)
	for name := range anyOverdue {
		if freeze || !fresh[name] {
			late = append(late, nodeLabel(name))
		}
	}
	slices.Sort(late)
	if freeze && len(late) > 0 {
		return Verdict{Rule: RuleOverdue, Reason: fmt.Sprintf(
			"overdue slot of %s: cluster frozen until an operator releases it (clusterrebootd release --node %s)",
			strings.Join(late, ", "), late[0])}
	}
	var inUse []string
	for name := range fresh {
		inUse = append(inUse, nodeLabel(name))
	}
	slices.Sort(inUse)
	reason := fmt.Sprintf("%d of %d slots in use", len(inUse), p.MaxConcurrent)
	if len(inUse) > 0 {
		reason += " (" + strings.Join(inUse, ", ") + ")"
	}
	if len(late) > 0 {
		reason += "; overdue slots not counted (slot_expiry release): " + strings.Join(late, ", ")
	}
	return Verdict{Allowed: len(inUse) < p.MaxConcurrent, Rule: RuleSlots, Reason: reason}
}

// Count computes the numbers ClusterHealth decides on.
//
// A node counts as healthy only when it is in Members ∪ {Self}, has a
// NodeState that is Alive and Healthy (every entry, if there are duplicates)
// and holds no slot (NodeState.InSlot or a SlotState). With
// AssumeSlotsReturn a node holding a slot that is not overdue counts as
// healthy instead, whatever its record says. Nodes without a NodeState or
// with Alive false never count, nor do nodes that are not members.
func Count(p Policy, s Snapshot) Counts {
	members := map[string]bool{}
	for _, m := range s.Members {
		if m != "" {
			members[m] = true
		}
	}
	if s.Self != "" {
		members[s.Self] = true
	}
	c := Counts{Size: len(members)}
	if p.ExpectedNodes > 0 {
		c.Size = p.ExpectedNodes
	}

	good := map[string]bool{} // record says alive and healthy, every entry
	inSlot := map[string]bool{}
	overdue := map[string]bool{}
	for _, n := range s.Nodes {
		ok := n.Alive && n.Healthy
		if prev, seen := good[n.Name]; seen {
			ok = ok && prev
		}
		good[n.Name] = ok
		if n.InSlot {
			inSlot[n.Name] = true
		}
	}
	for _, sl := range s.Slots {
		inSlot[sl.Node] = true
		overdue[sl.Node] = overdue[sl.Node] || sl.Overdue
	}
	for n := range inSlot {
		c.Rebooting = append(c.Rebooting, n)
	}
	slices.Sort(c.Rebooting)

	healthy := func(name string) bool {
		if !members[name] {
			return false
		}
		if inSlot[name] {
			return p.AssumeSlotsReturn && !overdue[name]
		}
		return good[name]
	}
	for name := range members {
		if healthy(name) {
			c.HealthyNow++
			if name != s.Self {
				c.HealthyAfter++
			}
		}
	}
	seenFallback := map[string]bool{}
	for _, f := range p.FallbackNodes {
		if f != s.Self && !seenFallback[f] && healthy(f) {
			c.FallbackHealthyAfter++
		}
		seenFallback[f] = true
	}
	c.NeedFraction = needFraction(p.MinHealthyFraction, c.Size)
	return c
}

// needFraction is ceil(f × size) with a relative tolerance of 1e-9, so that
// 0.6 × 5 (3.0000000000000004 in floating point) needs 3 and not 4. f <= 0
// needs nothing; huge values are capped at math.MaxInt32 (never
// satisfiable) to avoid overflow.
func needFraction(f float64, size int) int {
	if !(f > 0) || size <= 0 {
		return 0
	}
	x := f * float64(size)
	if x >= math.MaxInt32 {
		return math.MaxInt32
	}
	return int(math.Ceil(x - 1e-9*math.Max(1, x)))
}

// ClusterHealth checks, in this order, that after Self goes down at least
// MinHealthyAbsolute nodes remain healthy (Rule "min_healthy_absolute"), at
// least ceil(MinHealthyFraction × size) remain healthy (Rule
// "min_healthy_fraction"), and, when FallbackNodes is non-empty and
// ForbidIfOnlyFallbackLeft is set, at least one fallback node other than
// Self remains healthy (Rule "fallback"). See Count for who counts as
// healthy and what the size is. Invalid values block (Rule "invalid").
func ClusterHealth(p Policy, s Snapshot) Verdict {
	switch {
	case s.Self == "":
		return Verdict{Rule: RuleInvalid, Reason: "snapshot names no node asking to reboot"}
	case p.MinHealthyAbsolute < 0:
		return Verdict{Rule: RuleInvalid, Reason: fmt.Sprintf("min_healthy_absolute %d is negative", p.MinHealthyAbsolute)}
	case math.IsNaN(p.MinHealthyFraction) || p.MinHealthyFraction < 0:
		return Verdict{Rule: RuleInvalid, Reason: fmt.Sprintf("min_healthy_fraction %s is not a number >= 0", fmtFraction(p.MinHealthyFraction))}
	}
	c := Count(p, s)
	prefix := fmt.Sprintf("%d healthy of %d would leave %d", c.HealthyNow, c.Size, c.HealthyAfter)
	if c.HealthyAfter < p.MinHealthyAbsolute {
		return Verdict{Rule: RuleMinHealthyAbsolute, Reason: fmt.Sprintf("%s < min_healthy_absolute %d", prefix, p.MinHealthyAbsolute)}
	}
	if c.HealthyAfter < c.NeedFraction {
		return Verdict{Rule: RuleMinHealthyFraction, Reason: fmt.Sprintf("%s < %d required by min_healthy_fraction %s",
			prefix, c.NeedFraction, fmtFraction(p.MinHealthyFraction))}
	}
	reason := fmt.Sprintf("%s (min_healthy_absolute %d, min_healthy_fraction %s needs %d)",
		prefix, p.MinHealthyAbsolute, fmtFraction(p.MinHealthyFraction), c.NeedFraction)
	rule := RuleMinHealthyFraction
	if len(p.FallbackNodes) > 0 && p.ForbidIfOnlyFallbackLeft {
		rule = RuleFallback
		set := strings.Join(p.FallbackNodes, ", ")
		if c.FallbackHealthyAfter == 0 {
			return Verdict{Rule: RuleFallback, Reason: "would leave no healthy fallback node (fallback set: " + set + ")"}
		}
		reason += fmt.Sprintf("; %d healthy fallback node(s) would remain (fallback set: %s)", c.FallbackHealthyAfter, set)
	}
	return Verdict{Allowed: true, Rule: rule, Reason: reason}
}

func fmtFraction(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func nodeLabel(name string) string {
	if name == "" {
		return "(unnamed)"
	}
	return name
}
