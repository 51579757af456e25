package coordinator

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestStatusWhyPriority: each case turns on one condition together with
// every condition of lower priority; the reason shown must be the case's.
func TestStatusWhyPriority(t *testing.T) {
	type cond int
	const (
		paused cond = iota
		notNeeded
		errState
		queued3
		queueOwner
		blockedReason
		noAlive
		slotHeld
		overdue
	)
	build := func(on ...cond) View {
		has := func(c cond) bool { return slices.Contains(on, c) }
		v := View{Members: []string{"n1", "n2", "n3"}}
		a := Alive{Node: "n1", Healthy: true, RebootRequired: true, State: StateWaiting}
		if has(blockedReason) {
			a.Blocked = "window closed"
		}
		if has(errState) {
			a.State, a.Blocked = StateError, "detector error: exit 9"
		}
		if has(notNeeded) {
			a.RebootRequired = false
		}
		if !has(noAlive) {
			v.Alive = append(v.Alive, a)
		}
		if has(paused) {
			v.Pause = &Pause{Reason: "freeze", By: "ops", At: t0}
		}
		if has(queueOwner) {
			v.Queue = []Waiter{{Node: "n1"}, {Node: "n2"}}
		}
		if has(queued3) {
			v.Queue = []Waiter{{Node: "n2"}, {Node: "n3"}, {Node: "n1"}}
		}
		if has(slotHeld) || has(overdue) {
			s := Slot{Node: "n1", Reason: "kernel", AcquiredAt: t0.Add(-20 * time.Minute), Deadline: t0.Add(10 * time.Minute)}
			if has(overdue) {
				s.Deadline = t0.Add(-time.Hour)
			}
			v.Slots = append(v.Slots, s)
		}
		return v
	}
	tests := []struct {
		name string
		on   []cond
		want string
	}{
		{"reboot needed, nothing else", nil, "reboot needed; waiting for the next check"},
		{"blocked reason", []cond{blockedReason}, "window closed"},
		{"queued position 3 beats the blocked reason", []cond{queued3, blockedReason}, "queued for the lock, position 3"},
		{"queue owner, no reason", []cond{queueOwner}, "holds the lock, deciding"},
		{"queue owner with reason", []cond{queueOwner, blockedReason}, "holds the lock: window closed"},
		{"paused beats the queue", []cond{paused, queueOwner, blockedReason}, "cluster paused by ops: freeze"},
		{"not needed beats paused", []cond{notNeeded, paused, queueOwner, blockedReason}, "no reboot needed"},
		{"error beats not needed", []cond{errState, notNeeded, paused, queueOwner}, "detector error: exit 9"},
		{"no alive beats everything node-reported", []cond{noAlive, paused, queueOwner}, "no alive record: node down or not checking"},
		{"slot held, no alive", []cond{slotHeld, noAlive, paused}, "holds a reboot slot for 20m0s"},
		{"slot held with alive reason", []cond{slotHeld, blockedReason, paused, queueOwner}, "holds a reboot slot for 20m0s: window closed"},
		{"overdue beats slot held", []cond{overdue, noAlive, paused, errState}, "slot overdue by 1h0m0s: operator must check the node and 'clusterrebootd release --node n1'"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := BuildStatus("c", build(tc.on...), nil, 1, t0)
			i := slices.IndexFunc(st.Nodes, func(n NodeStatus) bool { return n.Node == "n1" })
			if i < 0 {
				t.Fatalf("n1 missing from %+v", st.Nodes)
			}
			if got := st.Nodes[i].Why; !strings.HasPrefix(got, tc.want) {
				t.Errorf("why = %q, want %q", got, tc.want)
			}
			if strings.HasPrefix(tc.want, "holds a reboot slot for 20m0s") && !strings.Contains(tc.want, ":") && st.Nodes[i].Why != tc.want {
				t.Errorf("why = %q, want exactly %q", st.Nodes[i].Why, tc.want)
			}
		})
	}
}

func TestBuildStatus(t *testing.T) {
	v := View{
		Revision: 42,
		Members:  []string{"n1", "n2", "n3"},
		Alive: []Alive{
			{Node: "n1", Healthy: true, State: StateIdle, MaxConcurrent: 1, Version: "1.0"},
			{Node: "n2", Healthy: false, RebootRequired: true, State: StateRebooting, MaxConcurrent: 2},
			{Node: "n4", Healthy: true, State: StateIdle, MaxConcurrent: 1}, // alive but not (yet) a member
		},
		Slots: []Slot{
			{Node: "n2", Reason: "kernel", AcquiredAt: t0.Add(-time.Hour), Deadline: t0.Add(-time.Minute)},
			{Node: "n3", Reason: "libc", AcquiredAt: t0.Add(-5 * time.Minute), Deadline: t0.Add(25 * time.Minute)},
		},
		MaxConcurrent: 2,
	}
	hist := []HistoryEvent{
		{Event: EventCompleted, Node: "n1", At: t0.Add(-48 * time.Hour)},
		{Event: EventCompleted, Node: "n1", At: t0.Add(-2 * time.Hour)},
		{Event: EventCompleted, Node: "n1", At: t0.Add(-24 * time.Hour)},
		{Event: EventSlotTaken, Node: "n1", At: t0.Add(-time.Minute)},
		{Event: EventRebootRequested, Node: "n3", At: t0.Add(-4 * time.Minute)},
	}
	st := BuildStatus("prod", v, hist, 3, t0)
	if st.Cluster != "prod" || st.Revision != 42 || !st.Now.Equal(t0) || st.MaxConcurrent != 2 || st.SlotsUsed != 2 || !st.Frozen {
		t.Errorf("status header = %+v", st)
	}
	if got := []string{st.Nodes[0].Node, st.Nodes[1].Node, st.Nodes[2].Node, st.Nodes[3].Node}; !slices.Equal(got, []string{"n1", "n2", "n3", "n4"}) {
		t.Fatalf("nodes = %v", got)
	}
	n1, n2, n3 := st.Nodes[0], st.Nodes[1], st.Nodes[2]
	if !n1.LastReboot.Equal(t0.Add(-2*time.Hour)) || !n2.LastReboot.IsZero() {
		t.Errorf("last reboot n1 %v n2 %v: want the latest completed only", n1.LastReboot, n2.LastReboot)
	}
	if !n1.Alive || !n1.Healthy || n1.Version != "1.0" || n1.Slot != nil || n1.Why != "no reboot needed" {
		t.Errorf("n1 = %+v", n1)
	}
	if n2.Slot == nil || !n2.Slot.Overdue || n2.Slot.Age != time.Hour || n2.Slot.Reason != "kernel" || n2.State != StateRebooting {
		t.Errorf("n2 = %+v slot %+v", n2, n2.Slot)
	}
	if n3.Alive || n3.Slot == nil || n3.Slot.Overdue || n3.Why != "holds a reboot slot for 5m0s" {
		t.Errorf("n3 = %+v", n3)
	}
	wantWarn := []string{
		"nodes disagree on max_concurrent: 1 ([n1 n4]) 2 ([n2])",
		"cluster-wide max_concurrent set to 2 (clusterrebootd set-max)",
		"slot of n2 is OVERDUE (deadline 2025-03-04T22:29:00Z): the cluster is frozen until 'clusterrebootd release --node n2'",
	}
	if !slices.Equal(st.Warnings, wantWarn) {
		t.Errorf("warnings =\n%q\nwant\n%q", st.Warnings, wantWarn)
	}

	// Agreement, no settings, nothing overdue: no warnings, not frozen.
	calm := View{Members: []string{"n1", "n2"}, Alive: []Alive{{Node: "n1", MaxConcurrent: 1}, {Node: "n2", MaxConcurrent: 1}, {Node: "n3"}}}
	st = BuildStatus("prod", calm, nil, 1, t0)
	if len(st.Warnings) != 0 || st.Frozen || st.MaxConcurrent != 1 {
		t.Errorf("calm cluster: %+v", st)
	}
}

func TestStatus(t *testing.T) {
	e := newEnv()
	e.opt.MaxConcurrent = 2
	e.cl.settings = 1
	e.cl.history = []HistoryEvent{
		{Event: EventCompleted, Node: "n2", At: t0.Add(-3 * time.Hour)},
		{Event: EventCompleted, Node: "n2", At: t0.Add(-30 * time.Hour)}, // before the window
	}
	st, err := e.coord(t).Status(t.Context(), 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !e.cl.historySince.Equal(t0.Add(-24 * time.Hour)) {
		t.Errorf("history since %v", e.cl.historySince)
	}
	if st.Cluster != "test" || st.MaxConcurrent != 1 || len(st.Nodes) != 3 {
		t.Errorf("status = %+v", st)
	}
	if !st.Nodes[1].LastReboot.Equal(t0.Add(-3 * time.Hour)) {
		t.Errorf("n2 last reboot = %v", st.Nodes[1].LastReboot)
	}
	if n := len(e.rec.only(mutating...)); n != 0 {
		t.Errorf("status wrote: %v", e.rec.list())
	}

	for name, set := range map[string]func(e *env){
		"view":    func(e *env) { e.cl.viewErr = func(int) error { return unavailable("range") } },
		"history": func(e *env) { e.cl.historyErr = unavailable("range") },
	} {
		t.Run(name+" fails", func(t *testing.T) {
			e := newEnv()
			set(e)
			_, err := e.coord(t).Status(t.Context(), time.Hour)
			wantErr(t, err, CodeEtcd, "etcd")
		})
	}
}
