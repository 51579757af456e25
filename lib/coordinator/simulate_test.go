package coordinator

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSimulate(t *testing.T) {
	allGates := []string{"own-slot", "kill-switch", "detector", "pause", "window", "policy",
		"reboot-loop-guard", "health-script", "lock", "slots", "policy-under-lock", "inhibitors"}
	tests := []struct {
		name    string
		setup   func(e *env)
		code    Code
		verdict string
		need    string
		failed  []string // gates that do not pass
		gates   []string // reported gates when not allGates
		check   func(t *testing.T, e *env, r Report)
	}{
		{
			name:    "everything passes",
			setup:   func(e *env) {},
			code:    CodeOK,
			verdict: "a real run would start the holder and reboot now",
			need:    "yes",
			check: func(t *testing.T, e *env, r Report) {
				if r.Detector != "file" || r.Reason != detYes.Reason || r.Node != self || !r.Evaluated.Equal(t0) {
					t.Errorf("report = %+v", r)
				}
				if !slices.Equal(e.script.seen(), []string{"pre-lock"}) {
					t.Errorf("script phases = %v, want [pre-lock]", e.script.seen())
				}
			},
		},
		{
			name: "several gates fail: all reported, code of the first",
			setup: func(e *env) {
				e.cl.pause = &Pause{Reason: "freeze", By: "ops", At: t0}
				e.script.verdict = ScriptVerdict{ExitCode: 1, FirstLine: "degraded"}
				e.inh.by = "apt"
				e.pol.health = PolicyVerdict{Reason: "too few"}
			},
			code:    CodeBlocked,
			verdict: "blocked by pause: cluster paused by ops",
			need:    "yes",
			failed:  []string{"pause", "policy", "health-script", "policy-under-lock", "inhibitors"},
		},
		{
			// A real check detects before it looks at pause or window.
			name: "paused but nothing needed: a real run exits 0",
			setup: func(e *env) {
				e.cl.pause = &Pause{Reason: "freeze", By: "ops", At: t0}
				e.det.set(detNo)
			},
			code:    CodeOK,
			verdict: "no reboot needed",
			need:    "no",
			failed:  []string{"detector", "pause"},
		},
		{
			name: "paused and detector error: a real run exits 7",
			setup: func(e *env) {
				e.cl.pause = &Pause{Reason: "freeze", By: "ops", At: t0}
				e.det.set(Detection{Need: NeedUnknown, Detector: "command", Reason: "exit 9"})
			},
			code:    CodeDetector,
			verdict: "blocked by detector",
			need:    "unknown",
			failed:  []string{"detector", "pause"},
		},
		{
			name: "first failure decides even when a later one has a higher code",
			setup: func(e *env) {
				e.win.verdict = WindowVerdict{Reason: "closed"}
				e.st.st.RebootsForReason = map[string]int{detYes.Reason: 1}
				e.cl.putSlot(Slot{Node: "n2", Deadline: t0.Add(time.Hour)})
			},
			code:    CodeBlocked,
			verdict: "blocked by window: closed",
			need:    "yes",
			failed:  []string{"window", "reboot-loop-guard", "slots"},
		},
		{
			name:    "policy first",
			setup:   func(e *env) { e.pol.health = PolicyVerdict{Reason: "too few"} },
			code:    CodeHealth,
			verdict: "blocked by policy: too few",
			need:    "yes",
			failed:  []string{"policy", "policy-under-lock"},
		},
		{
			// A real check stops at the pre-lock script (3) before its
			// holder would queue for the busy slot (4).
			name: "slot busy and script refuses: the script's code",
			setup: func(e *env) {
				e.cl.putSlot(Slot{Node: "n2", Deadline: t0.Add(time.Hour)})
				e.script.verdict = ScriptVerdict{ExitCode: 1, FirstLine: "degraded"}
			},
			code:    CodeHealth,
			verdict: "blocked by health-script",
			need:    "yes",
			failed:  []string{"health-script", "slots"},
		},
		{
			// `etcdctl lock P/lock`: a holder would wait until max_hold_wait.
			name:    "lock held without a node name",
			setup:   func(e *env) { e.cl.foreign = []Waiter{{Key: "/clusterrebootd/c/lock/abc"}} },
			code:    CodeBusy,
			verdict: "blocked by lock: the cluster lock is held by a lock without a node name at /clusterrebootd/c/lock/abc",
			need:    "yes",
			failed:  []string{"lock"},
		},
		{
			// One of ours deciding: the queue moves, a holder queues behind it.
			name:    "lock held by another node",
			setup:   func(e *env) { e.cl.foreign = []Waiter{{Node: "n2", Key: "/clusterrebootd/c/lock/abc"}} },
			code:    CodeOK,
			verdict: "a real run would start the holder and reboot now",
			need:    "yes",
			check: func(t *testing.T, e *env, r Report) {
				if g := r.Gates[slices.IndexFunc(r.Gates, func(g GateResult) bool { return g.Gate == "lock" })]; !strings.Contains(g.Reason, "position 2 behind n2") {
					t.Errorf("lock gate = %+v", g)
				}
			},
		},
		{
			// The pre-lock script blocks first: its code, not the lock's.
			name: "lock held without a node name and script refuses",
			setup: func(e *env) {
				e.cl.foreign = []Waiter{{Key: "/clusterrebootd/c/lock/abc"}}
				e.script.verdict = ScriptVerdict{ExitCode: 1, FirstLine: "degraded"}
			},
			code:    CodeHealth,
			verdict: "blocked by health-script",
			need:    "yes",
			failed:  []string{"health-script", "lock"},
		},
		{
			name:    "slots full",
			setup:   func(e *env) { e.cl.putSlot(Slot{Node: "n2", Deadline: t0.Add(time.Hour)}) },
			code:    CodeBusy,
			verdict: "blocked by slots",
			need:    "yes",
			failed:  []string{"slots"},
		},
		{
			// Like a real check: no etcd contact, no other gate.
			name:    "kill switch",
			setup:   func(e *env) { e.host.kill = true },
			code:    CodeBlocked,
			verdict: "blocked by kill-switch",
			need:    "unknown",
			failed:  []string{"kill-switch"},
			gates:   []string{"kill-switch"},
			check: func(t *testing.T, e *env, r Report) {
				if n := e.rec.count("cluster.View"); n != 0 {
					t.Errorf("etcd read %d times despite the kill switch", n)
				}
			},
		},
		{
			name:    "not needed",
			setup:   func(e *env) { e.det.set(detNo) },
			code:    CodeOK,
			verdict: "no reboot needed",
			need:    "no",
			failed:  []string{"detector"},
		},
		{
			name:    "detector error",
			setup:   func(e *env) { e.det.set(detUnknown) },
			code:    CodeDetector,
			verdict: "blocked by detector: detector error: exit code 9",
			need:    "unknown",
			failed:  []string{"detector"},
		},
		{
			name: "own slot held",
			setup: func(e *env) {
				e.cl.putSlot(Slot{Node: self, Reason: "kernel", AcquiredAt: t0.Add(-time.Minute), Deadline: t0.Add(time.Hour)})
				e.win.verdict = WindowVerdict{Reason: "closed"}
			},
			code:    CodeOK,
			verdict: "no new reboot: this node holds a slot since 2025-03-04T22:29:00Z (kernel)",
			need:    "yes",
			failed:  []string{"own-slot", "window"},
			check: func(t *testing.T, e *env, r Report) {
				if r.Gates[0].Code != CodeBusy {
					t.Errorf("own-slot gate = %+v", r.Gates[0])
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv()
			tc.setup(e)
			before := len(e.rec.list())
			r, err := e.coord(t).Simulate(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if r.Code != tc.code || !strings.HasPrefix(r.Verdict, tc.verdict) || r.Need != tc.need {
				t.Errorf("code %d verdict %q need %q; want %d %q %q", r.Code, r.Verdict, r.Need, tc.code, tc.verdict, tc.need)
			}
			want := allGates
			if tc.gates != nil {
				want = tc.gates
			}
			if got := names(r.Gates); !slices.Equal(got, want) {
				t.Errorf("gates = %v, want %v", got, want)
			}
			var failed []string
			for _, g := range r.Gates {
				if !g.Pass {
					failed = append(failed, g.Gate)
					if g.Reason == "" {
						t.Errorf("gate %s failed without a reason", g.Gate)
					}
				}
			}
			if !slices.Equal(failed, tc.failed) {
				t.Errorf("failed gates = %v, want %v", failed, tc.failed)
			}
			for _, c := range e.rec.list()[before:] {
				if slices.Contains(mutating, c) {
					t.Errorf("simulate made a mutating call: %s", c)
				}
			}
			if tc.check != nil {
				tc.check(t, e, r)
			}
		})
	}
}

func TestSimulateEtcdDown(t *testing.T) {
	e := newEnv()
	e.cl.viewErr = func(int) error { return unavailable("range") }
	r, err := e.coord(t).Simulate(t.Context())
	wantErr(t, err, CodeEtcd, "etcd")
	if r.Code != CodeEtcd || !strings.Contains(r.Verdict, "etcd unavailable") || len(r.Gates) != 0 {
		t.Errorf("report = %+v", r)
	}
	if calls := e.rec.only(gateCalls...); !slices.Equal(calls, []string{"host.KillSwitch"}) {
		t.Errorf("gates evaluated without a view (only the kill switch may be): %v", calls)
	}
}

func TestNeedText(t *testing.T) {
	for n, want := range map[Need]string{NeedYes: "yes", NeedNo: "no", NeedUnknown: "unknown", Need(42): "unknown"} {
		if got := needText(n); got != want {
			t.Errorf("needText(%d) = %q, want %q", n, got, want)
		}
	}
}
