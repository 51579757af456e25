package coordinator

import (
	"slices"
	"strings"
	"testing"
	"time"
)

var underLockOrder = []string{"kill-switch", "pause", "window", "detector", "slots", "policy",
	"reboot-loop-guard", "health-script", "inhibitors"}

// adapterOf is the adapter call each gate makes ("" for the pause gate,
// which reads the view).
var adapterOf = map[string]string{
	"kill-switch": "host.KillSwitch", "pause": "", "window": "windows.Check", "detector": "detector.Detect",
	"slots": "policies.SlotLimit", "policy": "policies.ClusterHealth", "reboot-loop-guard": "state.Load",
	"health-script": "script.Run", "inhibitors": "inhibitors.Blocking",
}

var gateCalls = []string{"host.KillSwitch", "windows.Check", "detector.Detect", "policies.", "state.Load", "script.Run", "inhibitors.Blocking"}

func names(rs []GateResult) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Gate)
	}
	return out
}

func gateNames(gs []gate) []string {
	var out []string
	for _, g := range gs {
		out = append(out, g.name)
	}
	return out
}

func TestGateLists(t *testing.T) {
	c := newEnv().coord(t)
	if got := gateNames(c.gates(phaseUnderLock)); !slices.Equal(got, underLockOrder) {
		t.Errorf("under-lock gates = %v\nwant %v", got, underLockOrder)
	}
	// Simulate: what a real check meets, then what only its holder checks.
	sim := []string{"kill-switch", "detector", "pause", "window", "policy", "reboot-loop-guard", "health-script",
		"slots", "policy-under-lock", "inhibitors"}
	if got := gateNames(c.gates(phaseSimulate)); !slices.Equal(got, sim) {
		t.Errorf("simulate gates = %v\nwant %v", got, sim)
	}
	pre := []string{"pause", "window", "policy", "reboot-loop-guard", "health-script"}
	if got := gateNames(c.gates(phasePreLock)); !slices.Equal(got, pre) {
		t.Errorf("pre-lock gates = %v\nwant %v", got, pre)
	}
}

// TestGateOrderUnderLock checks the adapters are asked in the order of
// DESIGN §3 when every gate passes.
func TestGateOrderUnderLock(t *testing.T) {
	e := newEnv()
	c := e.coord(t)
	in := &gateInput{phase: phaseUnderLock, view: View{Members: []string{"n1"}}, now: t0}
	res, first := c.evaluate(t.Context(), in)
	if first != nil {
		t.Fatalf("blocked by %+v", first)
	}
	if got := names(res); !slices.Equal(got, underLockOrder) {
		t.Errorf("results = %v", got)
	}
	for _, r := range res {
		if !r.Pass || r.Code != CodeOK {
			t.Errorf("gate %s: %+v", r.Gate, r)
		}
	}
	want := []string{"host.KillSwitch", "windows.Check", "detector.Detect", "policies.SlotLimit",
		"policies.ClusterHealth", "state.Load", "script.Run", "inhibitors.Blocking"}
	if got := e.rec.only(gateCalls...); !slices.Equal(got, want) {
		t.Errorf("adapter calls = %v\nwant %v", got, want)
	}
	if in.det != detYes {
		t.Errorf("detection not kept for the later gates: %+v", in.det)
	}
	if !e.win.lastTime.Equal(t0) {
		t.Errorf("window asked about %v, want the run's now", e.win.lastTime)
	}
}

// TestGateFirstFailureStops makes each gate block in turn: evaluation stops
// there (outside Simulate) and no later gate's adapter is asked.
func TestGateFirstFailureStops(t *testing.T) {
	blockers := map[string]struct {
		set  func(e *env, v *View)
		code Code
	}{
		"kill-switch":       {func(e *env, v *View) { e.host.kill = true }, CodeBlocked},
		"pause":             {func(e *env, v *View) { v.Pause = &Pause{Reason: "r", By: "b", At: t0} }, CodeBlocked},
		"window":            {func(e *env, v *View) { e.win.verdict = WindowVerdict{Reason: "closed"} }, CodeBlocked},
		"detector":          {func(e *env, v *View) { e.det.set(detUnknown) }, CodeDetector},
		"slots":             {func(e *env, v *View) { v.Slots = []Slot{{Node: "n2", Deadline: t0.Add(time.Hour)}} }, CodeBusy},
		"policy":            {func(e *env, v *View) { e.pol.health = PolicyVerdict{Reason: "no"} }, CodeHealth},
		"reboot-loop-guard": {func(e *env, v *View) { e.st.st.RebootsForReason = map[string]int{detYes.Reason: 9} }, CodeBlocked},
		"health-script":     {func(e *env, v *View) { e.script.verdict = ScriptVerdict{ExitCode: 3, FirstLine: "no"} }, CodeHealth},
		"inhibitors":        {func(e *env, v *View) { e.inh.by = "apt" }, CodeBlocked},
	}
	for i, name := range underLockOrder {
		t.Run(name, func(t *testing.T) {
			e := newEnv()
			v := View{Members: []string{"n1", "n2"}}
			b := blockers[name]
			b.set(e, &v)
			res, first := e.coord(t).evaluate(t.Context(), &gateInput{phase: phaseUnderLock, view: v, now: t0})
			if first == nil || first.Gate != name || first.Code != b.code || first.Pass || first.Reason == "" {
				t.Fatalf("first failure = %+v, want gate %s code %d", first, name, b.code)
			}
			if got := names(res); !slices.Equal(got, underLockOrder[:i+1]) {
				t.Errorf("evaluated %v, want %v", got, underLockOrder[:i+1])
			}
			for _, later := range underLockOrder[i+1:] {
				if a := adapterOf[later]; a != "" && e.rec.count(a) != 0 {
					t.Errorf("%s asked after %s blocked", a, name)
				}
			}
		})
	}
}

func TestGatePreLock(t *testing.T) {
	e := newEnv()
	res, first := e.coord(t).evaluate(t.Context(), &gateInput{phase: phasePreLock, now: t0, det: detYes})
	if first != nil {
		t.Fatalf("blocked: %+v", first)
	}
	if len(res) != 5 {
		t.Errorf("results = %v", names(res))
	}
	for _, skipped := range []string{"host.KillSwitch", "detector.Detect", "policies.SlotLimit", "inhibitors.Blocking"} {
		if e.rec.count(skipped) != 0 {
			t.Errorf("%s asked pre-lock", skipped)
		}
	}
	if !slices.Equal(e.script.seen(), []string{"pre-lock"}) || !slices.Equal(e.pol.assume, []bool{true}) {
		t.Errorf("script phases %v, assumeSlotsReturn %v", e.script.seen(), e.pol.assume)
	}
}

func TestGateInhibitors(t *testing.T) {
	tests := []struct {
		name    string
		respect bool
		none    bool // nil Inhibitors port
		by      string
		err     error
		pass    bool
		asked   bool
		reason  string
	}{
		{name: "not respected", respect: false, by: "apt", pass: true, reason: "not consulted"},
		{name: "no logind", respect: true, none: true, pass: true, reason: "not consulted"},
		{name: "nothing blocks", respect: true, pass: true, asked: true, reason: "no blocking inhibitor"},
		{name: "blocked", respect: true, by: "apt (pid 7)", asked: true, reason: "shutdown blocked by inhibitor: apt (pid 7)"},
		{name: "error blocks", respect: true, err: errBoom, asked: true, reason: "cannot list logind inhibitors: boom"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv()
			e.opt.RespectInhibitors = tc.respect
			e.noInhibitors = tc.none
			e.inh.by, e.inh.err = tc.by, tc.err
			r := e.coord(t).gateInhibitors(t.Context(), nil)
			if r.Pass != tc.pass || (!tc.pass && r.Code != CodeBlocked) || !strings.Contains(r.Reason, tc.reason) {
				t.Errorf("result = %+v", r)
			}
			if got := e.rec.count("inhibitors.Blocking") == 1; got != tc.asked {
				t.Errorf("inhibitors asked = %v, want %v", got, tc.asked)
			}
		})
	}
}

func TestGateVerdicts(t *testing.T) {
	t.Run("detector", func(t *testing.T) {
		for _, tc := range []struct {
			det         Detection
			pass, abort bool
			code        Code
		}{
			{detYes, true, false, CodeOK},
			{detNo, false, true, CodeOK},
			{detUnknown, false, false, CodeDetector},
		} {
			e := newEnv()
			e.det.set(tc.det)
			in := &gateInput{}
			r := e.coord(t).gateDetector(t.Context(), in)
			if r.Pass != tc.pass || r.Abort != tc.abort || r.Code != tc.code || in.det != tc.det {
				t.Errorf("%v: %+v", tc.det, r)
			}
		}
	})
	t.Run("slots wait only when full, not when frozen", func(t *testing.T) {
		e := newEnv()
		c := e.coord(t)
		full := View{Slots: []Slot{{Node: "n2", Deadline: t0.Add(time.Hour)}}}
		if r := c.gateSlots(t.Context(), &gateInput{view: full, now: t0}); r.Pass || !r.Wait || r.Code != CodeBusy {
			t.Errorf("full: %+v", r)
		}
		frozen := View{Slots: []Slot{{Node: "n2", Deadline: t0.Add(-time.Hour)}}}
		if r := c.gateSlots(t.Context(), &gateInput{view: frozen, now: t0}); r.Pass || r.Wait || r.Code != CodeBusy {
			t.Errorf("frozen: %+v", r)
		}
		free := View{Slots: []Slot{{Node: self, Deadline: t0.Add(time.Hour)}}}
		if r := c.gateSlots(t.Context(), &gateInput{view: free, now: t0}); !r.Pass {
			t.Errorf("own slot counted: %+v", r)
		}
	})
	t.Run("window reason names the next opening only when known", func(t *testing.T) {
		e := newEnv()
		e.win.verdict = WindowVerdict{Reason: "deny Fri 18:00-Mon 08:00"}
		r := e.coord(t).gateWindow(t.Context(), &gateInput{now: t0})
		if r.Pass || r.Code != CodeBlocked || r.Reason != "deny Fri 18:00-Mon 08:00" {
			t.Errorf("%+v", r)
		}
	})
	t.Run("loop guard reason", func(t *testing.T) {
		e := newEnv()
		e.opt.MaxRebootsPerReason = 2
		e.st.st.RebootsForReason = map[string]int{"r": 2}
		r := e.coord(t).gateLoopGuard(t.Context(), &gateInput{det: Detection{Need: NeedYes, Reason: "r"}})
		if r.Pass || r.Code != CodeBlocked || !strings.Contains(r.Reason, `2 coordinated reboot(s) already done for "r"`) ||
			!strings.Contains(r.Reason, "max_reboots_per_reason 2") {
			t.Errorf("%+v", r)
		}
	})
	t.Run("health status", func(t *testing.T) {
		if healthStatus(&GateResult{Code: CodeHealth}) != "unhealthy" || healthStatus(&GateResult{Code: CodeBlocked}) != "n/a" {
			t.Error("healthStatus")
		}
	})
}
