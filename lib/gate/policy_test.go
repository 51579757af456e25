package gate

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

func up(names ...string) []NodeState {
	var out []NodeState
	for _, n := range names {
		out = append(out, NodeState{Name: n, Alive: true, Healthy: true})
	}
	return out
}

func nodes(n int) []string {
	var out []string
	for i := 1; i <= n; i++ {
		out = append(out, fmt.Sprintf("n%d", i))
	}
	return out
}

func TestSlotLimit(t *testing.T) {
	for _, tc := range []struct {
		name    string
		p       Policy
		s       Snapshot
		allowed bool
		rule    string
		reason  string
	}{
		{"no slots", Policy{MaxConcurrent: 1}, Snapshot{Self: "a"}, true, RuleSlots, "0 of 1 slots in use"},
		{"one of one", Policy{MaxConcurrent: 1}, Snapshot{Self: "a", Slots: []SlotState{{Node: "b"}}}, false, RuleSlots, "1 of 1 slots in use (b)"},
		{"self's own slot not counted", Policy{MaxConcurrent: 1}, Snapshot{Self: "a", Slots: []SlotState{{Node: "a"}}}, true, RuleSlots, "0 of 1"},
		{"self's overdue slot not counted", Policy{MaxConcurrent: 1}, Snapshot{Self: "a", Slots: []SlotState{{Node: "a", Overdue: true}}}, true, RuleSlots, "0 of 1"},
		{"max 2, one in use", Policy{MaxConcurrent: 2}, Snapshot{Self: "a", Slots: []SlotState{{Node: "b"}}}, true, RuleSlots, "1 of 2 slots in use (b)"},
		{"max 2, two in use", Policy{MaxConcurrent: 2}, Snapshot{Self: "a", Slots: []SlotState{{Node: "c"}, {Node: "b"}}}, false, RuleSlots, "2 of 2 slots in use (b, c)"},
		{"max 2, duplicate slot entries", Policy{MaxConcurrent: 2}, Snapshot{Self: "a", Slots: []SlotState{{Node: "b"}, {Node: "b"}}}, true, RuleSlots, "1 of 2"},
		{"InSlot flag without slot entry counts", Policy{MaxConcurrent: 1}, Snapshot{Self: "a", Nodes: []NodeState{{Name: "b", InSlot: true}}}, false, RuleSlots, "1 of 1 slots in use (b)"},
		{"overdue freezes", Policy{MaxConcurrent: 2, SlotExpiry: "freeze"}, Snapshot{Self: "a", Slots: []SlotState{{Node: "b", Overdue: true}}}, false, RuleOverdue,
			"overdue slot of b: cluster frozen until an operator releases it (clusterrebootd release --node b)"},
		{"overdue freezes by default", Policy{MaxConcurrent: 5}, Snapshot{Self: "a", Slots: []SlotState{{Node: "b", Overdue: true}}}, false, RuleOverdue, "frozen"},
		{"overdue released", Policy{MaxConcurrent: 1, SlotExpiry: "release"}, Snapshot{Self: "a", Slots: []SlotState{{Node: "b", Overdue: true}}, Nodes: []NodeState{{Name: "b", InSlot: true}}},
			true, RuleSlots, "0 of 1 slots in use; overdue slots not counted (slot_expiry release): b"},
		{"release still counts fresh slots", Policy{MaxConcurrent: 1, SlotExpiry: "release"}, Snapshot{Self: "a", Slots: []SlotState{{Node: "b", Overdue: true}, {Node: "c"}}}, false, RuleSlots, "1 of 1 slots in use (c)"},
		{"max 0 invalid", Policy{MaxConcurrent: 0}, Snapshot{Self: "a"}, false, RuleInvalid, "max_concurrent 0"},
		{"unknown expiry", Policy{MaxConcurrent: 1, SlotExpiry: "whenever"}, Snapshot{Self: "a"}, false, RuleInvalid, `unknown slot_expiry "whenever"`},
		{"unnamed slot counts", Policy{MaxConcurrent: 1}, Snapshot{Self: "a", Slots: []SlotState{{Node: ""}}}, false, RuleSlots, "(unnamed)"},
	} {
		v := SlotLimit(tc.p, tc.s)
		if v.Allowed != tc.allowed || v.Rule != tc.rule || !strings.Contains(v.Reason, tc.reason) {
			t.Errorf("%s: got %+v, want allowed %v rule %s reason ~%q", tc.name, v, tc.allowed, tc.rule, tc.reason)
		}
	}
}

func TestClusterHealth(t *testing.T) {
	five := nodes(5)
	for _, tc := range []struct {
		name    string
		p       Policy
		s       Snapshot
		allowed bool
		rule    string
		reason  string
	}{
		{"absolute exactly at minimum", Policy{MinHealthyAbsolute: 4}, Snapshot{Self: "n1", Members: five, Nodes: up(five...)},
			true, RuleMinHealthyFraction, "5 healthy of 5 would leave 4 (min_healthy_absolute 4"},
		{"absolute one below", Policy{MinHealthyAbsolute: 3}, Snapshot{Self: "n1", Members: five, Nodes: up("n1", "n2", "n3")},
			false, RuleMinHealthyAbsolute, "3 healthy of 5 would leave 2 < min_healthy_absolute 3"},
		{"fraction 0.6 of 5 needs 3: met", Policy{MinHealthyFraction: 0.6}, Snapshot{Self: "n1", Members: five, Nodes: up("n1", "n2", "n3", "n4")},
			true, RuleMinHealthyFraction, "would leave 3 (min_healthy_absolute 0, min_healthy_fraction 0.6 needs 3)"},
		{"fraction 0.6 of 5 needs 3: missed", Policy{MinHealthyFraction: 0.6}, Snapshot{Self: "n1", Members: five, Nodes: up("n1", "n2", "n3")},
			false, RuleMinHealthyFraction, "3 healthy of 5 would leave 2 < 3 required by min_healthy_fraction 0.6"},
		{"fraction 0.7 of 10 needs 7", Policy{MinHealthyFraction: 0.7}, Snapshot{Self: "n1", Members: nodes(10), Nodes: up(nodes(8)...)},
			true, RuleMinHealthyFraction, "needs 7"},
		{"fraction 0.61 of 5 needs 4", Policy{MinHealthyFraction: 0.61}, Snapshot{Self: "n1", Members: five, Nodes: up("n1", "n2", "n3", "n4")},
			false, RuleMinHealthyFraction, "< 4 required"},
		{"fraction 1 needs everyone else: impossible", Policy{MinHealthyFraction: 1}, Snapshot{Self: "n1", Members: five, Nodes: up(five...)},
			false, RuleMinHealthyFraction, "4 < 5 required"},
		{"expected nodes overrides members", Policy{MinHealthyFraction: 0.5, ExpectedNodes: 8}, Snapshot{Self: "n1", Members: five, Nodes: up(five...)},
			true, RuleMinHealthyFraction, "5 healthy of 8 would leave 4"},
		{"expected nodes larger: blocks", Policy{MinHealthyFraction: 0.6, ExpectedNodes: 8}, Snapshot{Self: "n1", Members: five, Nodes: up(five...)},
			false, RuleMinHealthyFraction, "4 < 5 required"},
		{"single node, no minimum", Policy{}, Snapshot{Self: "solo", Nodes: up("solo")}, true, RuleMinHealthyFraction, "1 healthy of 1 would leave 0"},
		{"single node, absolute 1", Policy{MinHealthyAbsolute: 1}, Snapshot{Self: "solo", Members: []string{"solo"}, Nodes: up("solo")},
			false, RuleMinHealthyAbsolute, "1 healthy of 1 would leave 0 < min_healthy_absolute 1"},
		{"self not in members still sized", Policy{MinHealthyFraction: 0.5}, Snapshot{Self: "x", Members: []string{"n1"}, Nodes: up("x", "n1")},
			true, RuleMinHealthyFraction, "2 healthy of 2 would leave 1"},
		{"stale alive never healthy", Policy{MinHealthyAbsolute: 2}, Snapshot{Self: "n1", Members: nodes(3),
			Nodes: []NodeState{{Name: "n1", Alive: true, Healthy: true}, {Name: "n2", Alive: true, Healthy: true}, {Name: "n3", Alive: false, Healthy: true}}},
			false, RuleMinHealthyAbsolute, "would leave 1 < min_healthy_absolute 2"},
		{"missing record never healthy", Policy{MinHealthyAbsolute: 2}, Snapshot{Self: "n1", Members: nodes(3), Nodes: up("n1", "n2")},
			false, RuleMinHealthyAbsolute, "would leave 1"},
		{"unhealthy not counted", Policy{MinHealthyAbsolute: 2}, Snapshot{Self: "n1", Members: nodes(3),
			Nodes: append(up("n1", "n2"), NodeState{Name: "n3", Alive: true})}, false, RuleMinHealthyAbsolute, "would leave 1"},
		{"duplicate record, one bad", Policy{MinHealthyAbsolute: 2}, Snapshot{Self: "n1", Members: nodes(3),
			Nodes: append(up("n1", "n2", "n3"), NodeState{Name: "n3"})}, false, RuleMinHealthyAbsolute, "would leave 1"},
		{"non-member never counts", Policy{MinHealthyAbsolute: 2}, Snapshot{Self: "n1", Members: nodes(2), Nodes: up("n1", "n2", "ghost")},
			false, RuleMinHealthyAbsolute, "2 healthy of 2 would leave 1"},
		{"node in slot not counted", Policy{MinHealthyAbsolute: 2}, Snapshot{Self: "n1", Members: nodes(3), Nodes: up("n1", "n2", "n3"), Slots: []SlotState{{Node: "n3"}}},
			false, RuleMinHealthyAbsolute, "would leave 1"},
		{"InSlot flag not counted", Policy{MinHealthyAbsolute: 2}, Snapshot{Self: "n1", Members: nodes(3),
			Nodes: append(up("n1", "n2"), NodeState{Name: "n3", Alive: true, Healthy: true, InSlot: true})}, false, RuleMinHealthyAbsolute, "would leave 1"},
		{"assume slots return (pre-lock)", Policy{MinHealthyAbsolute: 2, AssumeSlotsReturn: true}, Snapshot{Self: "n1", Members: nodes(3), Nodes: up("n1", "n2"), Slots: []SlotState{{Node: "n3"}}},
			true, RuleMinHealthyFraction, "would leave 2"},
		{"assume slots return: not overdue ones", Policy{MinHealthyAbsolute: 2, AssumeSlotsReturn: true}, Snapshot{Self: "n1", Members: nodes(3), Nodes: up("n1", "n2"), Slots: []SlotState{{Node: "n3", Overdue: true}}},
			false, RuleMinHealthyAbsolute, "would leave 1"},
		{"fallback: one remains", Policy{FallbackNodes: []string{"lb-1", "lb-2"}, ForbidIfOnlyFallbackLeft: true},
			Snapshot{Self: "lb-1", Members: []string{"lb-1", "lb-2", "n1"}, Nodes: up("lb-1", "lb-2", "n1")},
			true, RuleFallback, "1 healthy fallback node(s) would remain (fallback set: lb-1, lb-2)"},
		{"fallback: self is the only fallback", Policy{FallbackNodes: []string{"lb-1"}, ForbidIfOnlyFallbackLeft: true},
			Snapshot{Self: "lb-1", Members: []string{"lb-1", "n1", "n2"}, Nodes: up("lb-1", "n1", "n2")},
			false, RuleFallback, "would leave no healthy fallback node (fallback set: lb-1)"},
		{"fallback: all fallbacks down", Policy{FallbackNodes: []string{"lb-1", "lb-2"}, ForbidIfOnlyFallbackLeft: true},
			Snapshot{Self: "n1", Members: []string{"lb-1", "lb-2", "n1", "n2"}, Nodes: append(up("n1", "n2"), NodeState{Name: "lb-1", Alive: true}), Slots: []SlotState{{Node: "lb-2"}}},
			false, RuleFallback, "would leave no healthy fallback node (fallback set: lb-1, lb-2)"},
		{"fallback: other fallback rebooting, self fallback", Policy{FallbackNodes: []string{"lb-1", "lb-2"}, ForbidIfOnlyFallbackLeft: true},
			Snapshot{Self: "lb-1", Members: []string{"lb-1", "lb-2"}, Nodes: up("lb-1", "lb-2"), Slots: []SlotState{{Node: "lb-2"}}},
			false, RuleFallback, "no healthy fallback"},
		{"fallback: rule off", Policy{FallbackNodes: []string{"lb-1"}, ForbidIfOnlyFallbackLeft: false},
			Snapshot{Self: "lb-1", Members: []string{"lb-1", "n1"}, Nodes: up("lb-1", "n1")}, true, RuleMinHealthyFraction, ""},
		{"fallback: duplicate names counted once", Policy{FallbackNodes: []string{"lb-2", "lb-2"}, ForbidIfOnlyFallbackLeft: true},
			Snapshot{Self: "lb-1", Members: []string{"lb-1", "lb-2"}, Nodes: up("lb-1", "lb-2")}, true, RuleFallback, "1 healthy fallback node(s)"},
		{"absolute checked before fallback", Policy{MinHealthyAbsolute: 5, FallbackNodes: []string{"lb-1"}, ForbidIfOnlyFallbackLeft: true},
			Snapshot{Self: "lb-1", Members: []string{"lb-1"}, Nodes: up("lb-1")}, false, RuleMinHealthyAbsolute, ""},
		{"no self", Policy{}, Snapshot{Members: five}, false, RuleInvalid, "names no node"},
		{"negative absolute", Policy{MinHealthyAbsolute: -1}, Snapshot{Self: "a"}, false, RuleInvalid, "negative"},
		{"NaN fraction", Policy{MinHealthyFraction: math.NaN()}, Snapshot{Self: "a"}, false, RuleInvalid, "NaN"},
		{"negative fraction", Policy{MinHealthyFraction: -0.5}, Snapshot{Self: "a"}, false, RuleInvalid, "-0.5"},
		{"infinite fraction", Policy{MinHealthyFraction: math.Inf(1)}, Snapshot{Self: "n1", Members: five, Nodes: up(five...)}, false, RuleMinHealthyFraction, "4 < 2147483647 required"},
		{"huge fraction, more members than expected", Policy{MinHealthyFraction: 10, ExpectedNodes: 2}, Snapshot{Self: "n1", Members: five, Nodes: up(five...)}, false, RuleMinHealthyFraction, "< 20 required"},
	} {
		v := ClusterHealth(tc.p, tc.s)
		if v.Allowed != tc.allowed || v.Rule != tc.rule || !strings.Contains(v.Reason, tc.reason) {
			t.Errorf("%s: got %+v, want allowed %v rule %s reason ~%q", tc.name, v, tc.allowed, tc.rule, tc.reason)
		}
	}
}

func TestNeedFraction(t *testing.T) {
	for _, tc := range []struct {
		f    float64
		size int
		want int
	}{
		{0.6, 5, 3}, {0.7, 10, 7}, {0.1, 3, 1}, {0.5, 4, 2}, {0.51, 100, 51}, {1.0 / 3, 3, 1}, {0.34, 3, 2},
		{2.0 / 3, 3, 2}, {0.2, 5, 1}, {0.3, 10, 3}, {0.6, 1, 1}, {0, 5, 0}, {-1, 5, 0}, {1, 7, 7},
		{1.5, 4, 6}, {1e300, 4, math.MaxInt32}, {math.Inf(1), 4, math.MaxInt32}, {0.9, 0, 0}, {0.001, 1000000, 1000}, {0.1, 1000000, 100000},
	} {
		if got := needFraction(tc.f, tc.size); got != tc.want {
			t.Errorf("needFraction(%v, %d) = %d, want %d", tc.f, tc.size, got, tc.want)
		}
	}
}

func TestCountRebooting(t *testing.T) {
	c := Count(Policy{}, Snapshot{Self: "a", Members: []string{"a", "b", "c"}, Nodes: []NodeState{{Name: "c", InSlot: true}}, Slots: []SlotState{{Node: "b"}}})
	if fmt.Sprint(c.Rebooting) != "[b c]" || c.Size != 3 || c.HealthyNow != 0 {
		t.Errorf("%+v", c)
	}
}

// refCounts recomputes healthyAfter independently of Count, node by node.
func refHealthyAfter(p Policy, s Snapshot, only []string) int {
	isMember := func(n string) bool {
		if n == s.Self {
			return true
		}
		for _, m := range s.Members {
			if m == n && m != "" {
				return true
			}
		}
		return false
	}
	healthy := func(n string) bool {
		if n == s.Self || !isMember(n) {
			return false
		}
		slot, overdue := false, false
		for _, sl := range s.Slots {
			if sl.Node == n {
				slot = true
				overdue = overdue || sl.Overdue
			}
		}
		rec, good := false, true
		for _, ns := range s.Nodes {
			if ns.Name == n {
				rec = true
				slot = slot || ns.InSlot
				good = good && ns.Alive && ns.Healthy
			}
		}
		if slot {
			return p.AssumeSlotsReturn && !overdue
		}
		return rec && good
	}
	count := 0
	seen := map[string]bool{}
	for _, n := range only {
		if !seen[n] && healthy(n) {
			count++
		}
		seen[n] = true
	}
	return count
}

func FuzzPolicy(f *testing.F) {
	f.Add([]byte{5, 1, 3, 60, 0, 1, 0xff, 0x0f, 0x33}, uint8(2), false)
	f.Add([]byte{1, 0, 1, 100, 1, 0, 1, 2, 3, 4}, uint8(1), true)
	f.Fuzz(func(t *testing.T, data []byte, maxConc uint8, release bool) {
		at := func(i int) int {
			if len(data) == 0 {
				return 0
			}
			return int(data[i%len(data)])
		}
		names := []string{"a", "b", "c", "d", "e", "f", ""}
		name := func(i int) string { return names[at(i)%len(names)] }
		p := Policy{
			MaxConcurrent:            int(maxConc % 4),
			MinHealthyAbsolute:       at(0)%6 - 1,
			MinHealthyFraction:       float64(at(1)) / 100,
			ExpectedNodes:            at(2) % 8,
			ForbidIfOnlyFallbackLeft: at(3)%2 == 0,
			AssumeSlotsReturn:        at(4)%2 == 0,
		}
		if release {
			p.SlotExpiry = SlotExpiryRelease
		}
		s := Snapshot{Self: name(5)}
		for i := 0; i < at(6)%8; i++ {
			s.Members = append(s.Members, name(7+i))
		}
		for i := 0; i < at(15)%9; i++ {
			b := at(16 + i)
			s.Nodes = append(s.Nodes, NodeState{Name: name(24 + i), Alive: b&1 != 0, Healthy: b&2 != 0, InSlot: b&4 != 0})
		}
		for i := 0; i < at(33)%4; i++ {
			s.Slots = append(s.Slots, SlotState{Node: name(34 + i), Overdue: at(38+i)%3 == 0})
		}
		for i := 0; i < at(42)%3; i++ {
			p.FallbackNodes = append(p.FallbackNodes, name(43+i))
		}

		v := ClusterHealth(p, s)
		if v.Rule == "" || v.Reason == "" {
			t.Fatalf("verdict without rule or reason: %+v", v)
		}
		if v.Allowed {
			all := append(append([]string{}, s.Members...), s.Self)
			after := refHealthyAfter(p, s, all)
			size := p.ExpectedNodes
			if size == 0 {
				set := map[string]bool{}
				for _, n := range all {
					if n != "" {
						set[n] = true
					}
				}
				size = len(set)
			}
			// healthy after >= fraction, checked as integers: after*100 >= f*100*size
			if s.Self == "" || after < p.MinHealthyAbsolute || after*100 < at(1)*size {
				t.Fatalf("allowed with %d healthy after of %d: %+v %+v -> %+v", after, size, p, s, v)
			}
			if len(p.FallbackNodes) > 0 && p.ForbidIfOnlyFallbackLeft && refHealthyAfter(p, s, p.FallbackNodes) == 0 {
				t.Fatalf("allowed with no healthy fallback: %+v %+v -> %+v", p, s, v)
			}
		}
		if c := Count(p, s); c.HealthyAfter != refHealthyAfter(p, s, append(append([]string{}, s.Members...), s.Self)) {
			t.Fatalf("Count %+v disagrees with reference", c)
		}

		sv := SlotLimit(p, s)
		if sv.Allowed {
			inUse := map[string]bool{}
			for _, sl := range s.Slots {
				if sl.Node != s.Self && !(release && sl.Overdue) {
					inUse[sl.Node] = true
				}
				if sl.Node != s.Self && sl.Overdue && !release {
					t.Fatalf("allowed despite overdue slot under freeze: %+v", s)
				}
			}
			for _, ns := range s.Nodes {
				if ns.InSlot && ns.Name != s.Self {
					listed := false
					for _, sl := range s.Slots {
						listed = listed || sl.Node == ns.Name
					}
					if !listed {
						inUse[ns.Name] = true
					}
				}
			}
			if p.MaxConcurrent < 1 || len(inUse) >= p.MaxConcurrent {
				t.Fatalf("slots allowed with %d in use of %d: %+v", len(inUse), p.MaxConcurrent, s)
			}
		}
	})
}
