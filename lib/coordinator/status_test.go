package coordinator

import (
	"encoding/json"
	"maps"
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
		blockedReason cond = iota
		queued3
		queueOwner
		slotsFull
		frozen
		paused
		notNeeded
		errState
		noAlive
		slotHeld
		slotBack
		overdue
	)
	const window = `window closed: outside the allow windows ("Tue 22:00-23:00"); next possible start Tue 22:00`
	build := func(on ...cond) View {
		has := func(c cond) bool { return slices.Contains(on, c) }
		v := View{Members: []string{"n1", "n2", "n3"}}
		a := Alive{Node: "n1", BootID: "b1", Healthy: true, RebootRequired: true, State: StateWaiting}
		if has(blockedReason) {
			a.Blocked = window
		}
		if has(errState) {
			a.State, a.Blocked = StateError, "detector error: exit 9"
		}
		if has(notNeeded) {
			a.RebootRequired = false
		}
		if has(slotBack) {
			a.BootID, a.State, a.Blocked = "b1-new", StateVerifying, "post-boot health failed, slot kept: health script exit 1: db lagging"
		}
		if !has(noAlive) || has(slotBack) {
			v.Alive = append(v.Alive, a)
		}
		if has(paused) {
			v.Pause = &Pause{Reason: "freeze", By: "ops", At: t0.Add(-2 * time.Hour)}
		}
		if has(queued3) {
			v.Queue = []Waiter{{Node: "n2"}, {Node: "n3"}, {Node: "n1"}}
		}
		if has(queueOwner) {
			v.Queue = []Waiter{{Node: "n1"}, {Node: "n2"}}
		}
		if has(slotsFull) {
			v.Slots = append(v.Slots, Slot{Node: "n2", BootID: "b2", AcquiredAt: t0.Add(-5 * time.Minute), Deadline: t0.Add(time.Hour)})
			v.Alive = append(v.Alive, Alive{Node: "n2", BootID: "b2", State: StateRebooting})
		}
		if has(frozen) {
			v.Slots = append(v.Slots, Slot{Node: "n3", BootID: "b3", AcquiredAt: t0.Add(-3 * time.Hour), Deadline: t0.Add(-time.Hour)})
		}
		if has(slotHeld) || has(overdue) {
			s := Slot{Node: "n1", BootID: "b1", Reason: "kernel", AcquiredAt: t0.Add(-20 * time.Minute), Deadline: t0.Add(10 * time.Minute)}
			if has(overdue) {
				s.Deadline = t0.Add(-time.Hour)
			}
			v.Slots = append(v.Slots, s)
		}
		return v
	}
	tests := []struct {
		top  cond // the case's condition; every lower one is on too
		code string
		want string
	}{
		{-1, WhyWaitCheck, "reboot needed; waiting for the next check"},
		{blockedReason, WhyWindow, window},
		{queued3, WhyQueued, "queued for the lock, position 3 (behind n3)"},
		{queueOwner, WhyHoldingLock, "holds the lock: " + window},
		{slotsFull, WhyWaitingSlot, "holds the lock, waiting for n2 to come back from its reboot (slot held 5m)"},
		{frozen, WhyFrozen, "cluster frozen by n3's overdue slot (deadline passed 1h ago): run `clusterrebootd release --node n3` after checking it"},
		{paused, WhyPaused, "paused by ops 2h ago: freeze (clusterrebootd resume)"},
		{notNeeded, WhyNotNeeded, "no reboot needed"},
		{errState, WhyError, "detector error: exit 9"},
		{noAlive, WhyDown, "no alive record: node down or not checking (expired after alive_ttl)"},
		{slotHeld, WhyRebooting, "rebooting: slot held 20m (deadline in 10m)"},
		{slotBack, WhyVerifying, "back from reboot, slot held 20m: post-boot health failed, slot kept: health script exit 1: db lagging"},
		{overdue, WhySlotOverdue, "overdue slot (deadline passed 1h ago): check the node, then run `clusterrebootd release --node n1`"},
	}
	for _, tc := range tests {
		t.Run(tc.code, func(t *testing.T) {
			var on []cond
			for c := cond(0); c <= tc.top; c++ {
				on = append(on, c)
			}
			st := BuildStatus("c", build(on...), nil, 1, t0)
			i := slices.IndexFunc(st.Nodes, func(n NodeStatus) bool { return n.Node == "n1" })
			if i < 0 {
				t.Fatalf("n1 missing from %+v", st.Nodes)
			}
			if got := st.Nodes[i]; got.WhyCode != tc.code || got.Why != tc.want {
				t.Errorf("why = %s %q\nwant   %s %q", got.WhyCode, got.Why, tc.code, tc.want)
			}
		})
	}
}

// TestStatusWaitingForSlots: the lock owner names what each slot holder is
// doing, and an anonymous lock owner is named as such.
func TestStatusWaitingForSlots(t *testing.T) {
	v := View{
		Members: []string{"n1", "n2", "n3", "n4", "n5"},
		Alive: []Alive{
			{Node: "n1", RebootRequired: true, State: StateWaiting, Blocked: "1 of 1 slots in use (n2)"},
			{Node: "n2", BootID: "after", State: StateVerifying},
			{Node: "n4", RebootRequired: true, State: StateWaiting},
			{Node: "n5", RebootRequired: true, State: StateWaiting, Blocked: "2 of 2 slots in use (n2, n3)"},
		},
		Slots: []Slot{
			{Node: "n2", BootID: "before", AcquiredAt: t0.Add(-14 * time.Minute), Deadline: t0.Add(time.Hour)},
			{Node: "n3", BootID: "b3", AcquiredAt: t0.Add(-4 * time.Minute), Deadline: t0.Add(time.Hour)},
		},
		Queue: []Waiter{{Node: "n1"}, {Node: ""}, {Node: "n4"}},
	}
	st := BuildStatus("c", v, nil, 2, t0)
	want := map[string]string{
		"n1": "holds the lock, waiting for n2's post-boot health (slot held 14m); n3 to come back from its reboot (slot held 4m)",
		"n2": "back from reboot, slot held 14m: the next check verifies health and releases the slot",
		"n3": "rebooting: slot held 4m (deadline in 1h)",
		"n4": "queued for the lock, position 3 (behind a lock without a node name, e.g. `etcdctl lock`)",
		"n5": "waiting for n2's post-boot health (slot held 14m); n3 to come back from its reboot (slot held 4m)",
	}
	for _, n := range st.Nodes {
		if n.Why != want[n.Node] {
			t.Errorf("%s: why = %q\nwant %q", n.Node, n.Why, want[n.Node])
		}
	}
	if n2 := st.Nodes[1]; n2.Slot == nil || !n2.Slot.Back || st.Nodes[2].Slot.Back {
		t.Errorf("slot back: n2 %+v, n3 %+v", st.Nodes[1].Slot, st.Nodes[2].Slot)
	}
}

// TestBlockedCode: the reasons the gates publish are classified; the texts
// come from the real gates where the coordinator writes them.
func TestBlockedCode(t *testing.T) {
	e := newEnv()
	c := e.coord(t)
	in := &gateInput{phase: phasePreLock, now: t0, det: detYes,
		view: View{Pause: &Pause{By: "alice", Reason: "kernel regression", At: t0}}}
	reasonOf := func(r GateResult) string {
		if r.Pass {
			t.Fatalf("gate passed: %+v", r)
		}
		return r.Reason
	}
	e.st.st = State{RebootsForReason: map[string]int{detYes.Reason: 1}}
	e.script.verdict = ScriptVerdict{ExitCode: 2, FirstLine: "replication lag 40s"}
	e.inh.by = `"backup" (pid 42): nightly backup`
	e.host.kill = true
	tests := []struct{ reason, want string }{
		{reasonOf(c.gatePause(t.Context(), in)), WhyPaused},
		{reasonOf(c.gateLoopGuard(t.Context(), in)), WhyLoopGuard},
		{reasonOf(c.gateScript(t.Context(), in)), WhyHealth},
		{reasonOf(c.gateInhibitors(t.Context(), in)), WhyInhibitor},
		{reasonOf(c.gateKillSwitch(t.Context(), in)), WhyKillSwitch},
		// lib/gate's texts (window, policies, slots):
		{`window closed: deny "Fri 18:00-Mon 08:00" until Mon 08:00; next possible start Mon 08:00`, WhyWindow},
		{"window closed: reboot of 10m would run past the allow window end 23:00; next possible start Wed 22:00", WhyWindow},
		{"2 healthy after this node goes down < min_healthy_absolute 3", WhyPolicy},
		{"would leave no healthy fallback node (fallback set: a, b)", WhyPolicy},
		{"overdue slot of n3: cluster frozen until an operator releases it (clusterrebootd release --node n3)", WhyFrozen},
		{"1 of 1 slots in use (n3)", WhySlots},
		{"queued for the cluster lock, position 2", WhyQueued},
		{"something new", WhyBlocked},
	}
	for _, tc := range tests {
		if got := blockedCode(tc.reason); got != tc.want {
			t.Errorf("blockedCode(%q) = %s, want %s", tc.reason, got, tc.want)
		}
	}
	// A node whose record says paused after the resume waits for its check.
	v0 := View{Members: []string{"n1"}, Alive: []Alive{{Node: "n1", RebootRequired: true, State: StateBlocked, Blocked: tests[0].reason}}}
	if n := BuildStatus("c", v0, nil, 1, t0).Nodes[0]; n.WhyCode != WhyWaitCheck || !strings.Contains(n.Why, "resumed") {
		t.Errorf("stale pause row = %s %q", n.WhyCode, n.Why)
	}
	// As a whole row: a node blocked by the loop guard says so and how to
	// clear it.
	v := View{Members: []string{"n1"}, Alive: []Alive{{Node: "n1", RebootRequired: true, State: StateBlocked, Blocked: tests[1].reason}}}
	if n := BuildStatus("c", v, nil, 1, t0).Nodes[0]; n.WhyCode != WhyLoopGuard || !strings.Contains(n.Why, "clusterrebootd ack") {
		t.Errorf("loop-guard row = %s %q", n.WhyCode, n.Why)
	}
}

func TestSetNextCheck(t *testing.T) {
	v := View{Members: []string{"n1", "n2"}, Alive: []Alive{
		{Node: "n1", RebootRequired: true, State: StateIdle},
		{Node: "n2", RebootRequired: true, State: StateIdle},
	}}
	st := BuildStatus("c", v, nil, 1, t0)
	st.SetNextCheck("n1", time.Time{})
	if !st.NextCheck.IsZero() || st.Nodes[0].Why != "reboot needed; waiting for the next check" {
		t.Fatalf("zero next check changed the status: %+v", st)
	}
	st.SetNextCheck("n1", t0.Add(3*time.Minute))
	if want := "reboot needed; next check in 3m (2025-03-04 22:33:00 UTC)"; st.Nodes[0].Why != want {
		t.Errorf("n1 why = %q, want %q", st.Nodes[0].Why, want)
	}
	if st.Nodes[1].Why != "reboot needed; waiting for the next check" || !st.NextCheck.Equal(t0.Add(3*time.Minute)) {
		t.Errorf("n2 (another node) why = %q, next %v", st.Nodes[1].Why, st.NextCheck)
	}
}

// TestStatusJSONShape pins the documented JSON keys of `status --json`.
func TestStatusJSONShape(t *testing.T) {
	v := View{Revision: 7, Members: []string{"n1"}, Pause: &Pause{By: "a", Reason: "r", At: t0},
		Alive: []Alive{{Node: "n1", BootID: "new", RebootRequired: true, State: StateVerifying, Version: "1", Blocked: "x", UpdatedAt: t0}},
		Slots: []Slot{{Node: "n1", BootID: "old", AcquiredAt: t0, Deadline: t0.Add(time.Hour), HealthySince: t0}},
		Queue: []Waiter{{Node: "n1"}}}
	st := BuildStatus("c", v, []HistoryEvent{{Event: EventCompleted, Node: "n1", At: t0}}, 1, t0)
	st.Self = "n1"
	st.SetNextCheck("n1", t0.Add(time.Minute))
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	keys := func(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }
	node := m["nodes"].([]any)[0].(map[string]any)
	for _, tc := range []struct {
		got, want []string
	}{
		{keys(m), []string{"cluster", "frozen", "max_concurrent", "next_check", "nodes", "now", "paused", "revision", "schema", "self", "slots_used"}},
		{keys(node), []string{"alive", "blocked", "healthy", "last_reboot", "node", "queue_position", "reboot_required", "slot", "state", "updated_at", "version", "why", "why_code"}},
		{keys(node["slot"].(map[string]any)), []string{"age_ns", "back", "deadline", "healthy_since", "overdue", "reason", "since"}},
		{keys(m["paused"].(map[string]any)), []string{"At", "By", "Reason"}},
	} {
		if !slices.Equal(tc.got, tc.want) {
			t.Errorf("keys = %q\nwant   %q", tc.got, tc.want)
		}
	}
	if m["schema"] != float64(StatusSchema) {
		t.Errorf("schema = %v", m["schema"])
	}
}

func TestStatusWhyShortened(t *testing.T) {
	long := "health script exit 1: " + strings.Repeat("é", 1000)
	v := View{Members: []string{"n1"}, Alive: []Alive{{Node: "n1", RebootRequired: true, State: StateBlocked, Blocked: long}}}
	n := BuildStatus("c", v, nil, 1, t0).Nodes[0]
	if r := []rune(n.Why); len(r) != maxWhy || r[maxWhy-1] != '…' || !strings.HasPrefix(long, string(r[:maxWhy-1])) {
		t.Errorf("why = %d runes %q…", len(r), string(r[:40]))
	}
	if n.Blocked != long || n.WhyCode != WhyHealth {
		t.Errorf("blocked shortened too, or code %s", n.WhyCode)
	}
	if got := shorten("abc", 3); got != "abc" {
		t.Errorf("shorten at the limit = %q", got)
	}
}

func TestRoundDur(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0s", 1500 * time.Millisecond: "2s", 9*time.Minute + 59*time.Second: "9m59s", 12 * time.Minute: "12m",
		2 * time.Hour: "2h", 2*time.Hour + 5*time.Minute + 20*time.Second: "2h5m", -3 * time.Second: "3s", 4 * time.Minute: "4m",
	} {
		if got := roundDur(d); got != want {
			t.Errorf("roundDur(%s) = %q, want %q", d, got, want)
		}
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
	if !n1.Alive || !n1.Healthy || n1.Version != "1.0" || n1.Slot != nil || n1.Why != "no reboot needed" || n1.WhyCode != WhyNotNeeded {
		t.Errorf("n1 = %+v", n1)
	}
	if n2.Slot == nil || !n2.Slot.Overdue || n2.Slot.Age != time.Hour || n2.Slot.Reason != "kernel" || n2.State != StateRebooting {
		t.Errorf("n2 = %+v slot %+v", n2, n2.Slot)
	}
	if n3.Alive || n3.Slot == nil || n3.Slot.Overdue || n3.Slot.Back || n3.Why != "rebooting: slot held 5m (deadline in 25m)" {
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
	if st.Cluster != "test" || st.Self != self || st.Schema != StatusSchema || st.MaxConcurrent != 1 || len(st.Nodes) != 3 {
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

// A mutex owner without our annotation (`etcdctl lock P/lock`) blocks every
// reboot: status names its key in a warning; a node owning it is no warning.
func TestStatusForeignLockOwner(t *testing.T) {
	for _, tc := range []struct {
		owner Waiter
		warn  bool
	}{
		{Waiter{Key: "/clusterrebootd/test/lock/694d"}, true},
		{Waiter{Node: "n2", Key: "/clusterrebootd/test/lock/694d"}, false},
	} {
		e := newEnv()
		e.cl.foreign = []Waiter{tc.owner}
		st, err := e.coord(t).Status(t.Context(), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		found := slices.ContainsFunc(st.Warnings, func(w string) bool {
			return strings.Contains(w, "the cluster lock is held by a lock without a node name at /clusterrebootd/test/lock/694d")
		})
		if found != tc.warn {
			t.Errorf("owner %+v: warnings %q, want the lock warning: %v", tc.owner, st.Warnings, tc.warn)
		}
	}
}
