package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

var errBoom = errors.New("boom")

func unavailable(what string) error { return fmt.Errorf("%s: %w", what, ErrUnavailable) }

// lastAlive returns the final published alive record and how many there were.
func lastAlive(t *testing.T, e *env) (Alive, int) {
	t.Helper()
	pub := e.cl.publishes()
	if len(pub) == 0 {
		t.Fatal("no alive record published")
	}
	return pub[len(pub)-1], len(pub)
}

func TestCheckBeforeDetection(t *testing.T) {
	tests := []struct {
		name  string
		setup func(e *env)
		code  Code
		gate  string
		check func(t *testing.T, e *env)
	}{
		{
			name:  "kill switch present",
			setup: func(e *env) { e.host.kill = true },
			code:  CodeBlocked, gate: "kill-switch",
			check: func(t *testing.T, e *env) {
				if n := len(e.rec.only("cluster.", "session.")); n != 0 {
					t.Errorf("kill switch on but %d etcd calls: %v", n, e.rec.list())
				}
			},
		},
		{
			name:  "kill switch unreadable fails closed",
			setup: func(e *env) { e.host.killErr = errors.New("permission denied") },
			code:  CodeBlocked, gate: "kill-switch",
			check: func(t *testing.T, e *env) {
				if n := len(e.rec.only("cluster.", "detector.", "holder.")); n != 0 {
					t.Errorf("kill switch unknown but calls were made: %v", e.rec.list())
				}
			},
		},
		{
			name:  "boot id unreadable",
			setup: func(e *env) { e.host.bootErr = errBoom },
			code:  CodeInternal, gate: "boot-id",
		},
		{
			name:  "etcd unavailable",
			setup: func(e *env) { e.cl.viewErr = func(int) error { return unavailable("view") } },
			code:  CodeEtcd, gate: "etcd",
			check: func(t *testing.T, e *env) {
				if e.rec.count("holder.Start") != 0 || e.rec.count("detector.Detect") != 0 {
					t.Errorf("went on after etcd failed: %v", e.rec.list())
				}
			},
		},
		{
			name:  "registration fails",
			setup: func(e *env) { e.cl.members = []string{"n2"}; e.cl.registerErr = unavailable("register") },
			code:  CodeEtcd, gate: "etcd",
		},
		{
			name:  "registers when not a member",
			setup: func(e *env) { e.cl.members = []string{"n2", "n3"} },
			code:  CodeOK,
			check: func(t *testing.T, e *env) {
				if e.rec.count("cluster.Register") != 1 || !slices.Contains(e.cl.members, self) {
					t.Errorf("not registered: members %v, calls %v", e.cl.members, e.rec.list())
				}
			},
		},
		{
			name:  "member is not registered again",
			setup: func(e *env) {},
			code:  CodeOK,
			check: func(t *testing.T, e *env) {
				if e.rec.count("cluster.Register") != 0 {
					t.Errorf("registered although already a member")
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv()
			tc.setup(e)
			err := e.coord(t).Check(t.Context())
			wantErr(t, err, tc.code, tc.gate)
			if tc.code != CodeOK && e.rec.count("holder.Start") != 0 {
				t.Error("holder started on a failed run")
			}
			if tc.check != nil {
				tc.check(t, e)
			}
		})
	}
}

func TestCheckDecision(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(e *env)
		code    Code
		gate    string
		state   string // final alive state
		blocked string // substring of the final alive Blocked
		started bool   // Holder.Start called
		check   func(t *testing.T, e *env, a Alive)
	}{
		{
			name:  "detector unknown",
			setup: func(e *env) { e.det.set(detUnknown) },
			code:  CodeDetector, gate: "detector", state: StateError, blocked: "detector error: exit code 9",
			check: func(t *testing.T, e *env, a Alive) {
				if a.RebootRequired {
					t.Error("reboot_required published for an unknown detection")
				}
				if e.rec.count("holder.Active") != 0 {
					t.Error("holder consulted after a detector error")
				}
			},
		},
		{
			name: "not needed clears the loop guard",
			setup: func(e *env) {
				e.det.set(detNo)
				e.st.st = State{RebootsForReason: map[string]int{"old reason": 1}, LastRebootReason: "old reason"}
			},
			code: CodeOK, state: StateIdle,
			check: func(t *testing.T, e *env, a Alive) {
				st := e.st.get()
				if len(st.RebootsForReason) != 0 || st.LastRebootReason != "old reason" {
					t.Errorf("state after not-needed = %+v", st)
				}
				if a.RebootRequired || a.Reason != "" || a.Detector != "file" {
					t.Errorf("alive = %+v", a)
				}
			},
		},
		{
			name:  "not needed with nothing counted does not write",
			setup: func(e *env) { e.det.set(detNo) },
			code:  CodeOK, state: StateIdle,
			check: func(t *testing.T, e *env, a Alive) {
				if e.rec.count("state.Save") != 0 {
					t.Error("state file written although nothing changed")
				}
			},
		},
		{
			name:  "not needed, state unreadable",
			setup: func(e *env) { e.det.set(detNo); e.st.loadErr = errBoom },
			code:  CodeInternal, gate: "state", state: StateIdle,
		},
		{
			name: "not needed, state unwritable",
			setup: func(e *env) {
				e.det.set(detNo)
				e.st.st = State{RebootsForReason: map[string]int{"r": 1}}
				e.st.saveErr = errBoom
			},
			code: CodeInternal, gate: "state", state: StateIdle,
		},
		{
			name:  "holder already active",
			setup: func(e *env) { e.holder.active = true },
			code:  CodeOK, state: StateWaiting,
			check: func(t *testing.T, e *env, a Alive) {
				if !a.RebootRequired || a.Reason != detYes.Reason {
					t.Errorf("alive = %+v", a)
				}
				if e.rec.count("windows.Check") != 0 {
					t.Error("gates evaluated although a holder runs")
				}
			},
		},
		{
			// The running holder said it is blocked: the check refreshes
			// the record's lease but keeps what the holder said.
			name: "holder already active keeps the holder's state",
			setup: func(e *env) {
				e.holder.active = true
				_ = e.cl.PublishAlive(context.Background(), Alive{Node: self, BootID: "boot-2", State: StateBlocked, Blocked: "window closed"})
			},
			code: CodeOK, state: StateBlocked, blocked: "window closed",
		},
		{
			name:  "holder state unknown",
			setup: func(e *env) { e.holder.activeErr = errBoom },
			code:  CodeInternal, gate: "holder", state: StateError, blocked: "cannot tell whether a holder runs",
		},
		{
			name:  "paused",
			setup: func(e *env) { e.cl.pause = &Pause{Reason: "change freeze", By: "ops", At: t0} },
			code:  CodeBlocked, gate: "pause", state: StateBlocked, blocked: "change freeze",
		},
		{
			name: "window closed",
			setup: func(e *env) {
				e.win.verdict = WindowVerdict{Reason: "outside allow windows", NextOpen: t0.Add(time.Hour)}
			},
			code: CodeBlocked, gate: "window", state: StateBlocked, blocked: "next open 2025-03-04T23:30:00Z",
		},
		{
			name:  "cluster policy refuses",
			setup: func(e *env) { e.pol.health = PolicyVerdict{Rule: "min_healthy_absolute", Reason: "1 healthy < 2"} },
			code:  CodeHealth, gate: "policy", state: StateBlocked, blocked: "1 healthy < 2",
			check: func(t *testing.T, e *env, a Alive) {
				if !slices.Equal(e.pol.assume, []bool{true}) {
					t.Errorf("pre-lock ClusterHealth assumeSlotsReturn = %v, want [true]", e.pol.assume)
				}
			},
		},
		{
			name:  "reboot-loop guard",
			setup: func(e *env) { e.st.st = State{RebootsForReason: map[string]int{detYes.Reason: 1}} },
			code:  CodeBlocked, gate: "reboot-loop-guard", state: StateBlocked, blocked: "clusterrebootd ack",
		},
		{
			name: "reboot-loop guard below the limit",
			setup: func(e *env) {
				e.opt.MaxRebootsPerReason = 2
				e.st.st = State{RebootsForReason: map[string]int{detYes.Reason: 1, "other": 5}}
			},
			code: CodeOK, state: StateWaiting, started: true,
		},
		{
			name:  "reboot-loop guard, state unreadable",
			setup: func(e *env) { e.st.loadErr = errBoom },
			code:  CodeBlocked, gate: "reboot-loop-guard", state: StateBlocked, blocked: "cannot read the state file",
		},
		{
			name:  "health script refuses",
			setup: func(e *env) { e.script.verdict = ScriptVerdict{ExitCode: 1, FirstLine: "ceph not HEALTH_OK"} },
			code:  CodeHealth, gate: "health-script", state: StateBlocked, blocked: "exit 1: ceph not HEALTH_OK",
		},
		{
			name:  "health script error",
			setup: func(e *env) { e.script.err = errors.New("timed out after 30s") },
			code:  CodeHealth, gate: "health-script", state: StateBlocked, blocked: "timed out after 30s",
		},
		{
			name:  "all gates pass",
			setup: func(e *env) {},
			code:  CodeOK, state: StateWaiting, started: true,
			check: func(t *testing.T, e *env, a Alive) {
				if !slices.Equal(e.script.seen(), []string{"pre-lock"}) {
					t.Errorf("script phases = %v", e.script.seen())
				}
				for _, c := range []string{"inhibitors.Blocking", "policies.SlotLimit", "session.Lock", "cluster.NewSession"} {
					if e.rec.count(c) != 0 {
						t.Errorf("%s called pre-lock", c)
					}
				}
				if e.rec.count("host.KillSwitch") != 1 || e.rec.count("detector.Detect") != 1 {
					t.Errorf("kill switch or detector not asked exactly once: %v", e.rec.list())
				}
				if !a.RebootRequired || a.Blocked != "" || a.Detector != "file" || a.Reason != detYes.Reason ||
					a.BootID != "boot-2" || a.Kernel != "6.1.0-29" || a.Version != "1.0.0" || a.MaxConcurrent != 1 ||
					!a.Healthy || !a.UpdatedAt.Equal(t0) {
					t.Errorf("alive = %+v", a)
				}
				// Published once, before the holder starts: from then on the
				// holder's own states are the record and must not be
				// overwritten by this run.
				if e.rec.last("cluster.PublishAlive") > e.rec.first("holder.Start") {
					t.Error("alive published after the holder started")
				}
			},
		},
		{
			name:  "node unhealthy is published but does not block",
			setup: func(e *env) { e.nh.err = errBoom },
			code:  CodeOK, state: StateWaiting, started: true,
			check: func(t *testing.T, e *env, a Alive) {
				if a.Healthy {
					t.Error("node health error published as healthy")
				}
			},
		},
		{
			name:  "holder fails to start",
			setup: func(e *env) { e.holder.startErr = errors.New("dbus: no such unit") },
			code:  CodeInternal, gate: "holder", state: StateError, blocked: "holder: dbus: no such unit", started: true,
		},
		{
			name:  "holder exited 6 before it was ready: the check exits 6",
			setup: func(e *env) { e.holder.startErr = holderExit{status: 6} },
			code:  CodeEtcd, gate: "holder", state: StateError, blocked: "holder: holder exited with status 6", started: true,
		},
		{
			name:  "holder exited 2 before it was ready: the check exits 2",
			setup: func(e *env) { e.holder.startErr = holderExit{status: 2} },
			code:  CodeConfig, gate: "holder", state: StateError, blocked: "holder: holder exited with status 2", started: true,
		},
		{
			name:  "holder exit status outside DESIGN's codes stays internal",
			setup: func(e *env) { e.holder.startErr = holderExit{status: 137} },
			code:  CodeInternal, gate: "holder", state: StateError, blocked: "holder: holder exited with status 137", started: true,
		},
		{
			name:  "holder killed (no exit status) stays internal",
			setup: func(e *env) { e.holder.startErr = holderExit{status: 0} },
			code:  CodeInternal, gate: "holder", state: StateError, blocked: "holder: holder exited with status 0", started: true,
		},
		{
			name:  "alive publication failure is not fatal",
			setup: func(e *env) { e.cl.publishErr = unavailable("put") },
			code:  CodeOK, state: StateWaiting, started: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv()
			tc.setup(e)
			err := e.coord(t).Check(t.Context())
			wantErr(t, err, tc.code, tc.gate)
			if got := e.rec.count("holder.Start") == 1; got != tc.started {
				t.Errorf("holder started = %v, want %v", got, tc.started)
			}
			a, n := lastAlive(t, e)
			wantN := 1
			switch {
			case tc.gate == "holder" && tc.started:
				wantN = 2 // "waiting" before the start, "error" after it failed
			case tc.name == "holder already active keeps the holder's state":
				wantN = 2 // the holder's own record, then this run's refresh
			}
			if n != wantN {
				t.Errorf("alive published %d times, want %d", n, wantN)
			}
			if a.Node != self || a.State != tc.state {
				t.Errorf("alive node %q state %q, want %q %q", a.Node, a.State, self, tc.state)
			}
			if tc.blocked == "" && a.State != StateError && a.Blocked != "" {
				t.Errorf("alive blocked = %q, want empty", a.Blocked)
			}
			if !strings.Contains(a.Blocked, tc.blocked) {
				t.Errorf("alive blocked = %q, want it to contain %q", a.Blocked, tc.blocked)
			}
			if tc.code != CodeOK && tc.code != CodeInternal && tc.code != CodeDetector && a.Blocked == "" {
				t.Error("blocked run published no reason")
			}
			if len(e.rec.only("session.", "rebooter.")) != 0 {
				t.Errorf("check touched the lock or rebooted: %v", e.rec.list())
			}
			if tc.check != nil {
				tc.check(t, e, a)
			}
		})
	}
}

// TestCheckPreLockGateStops checks that the first blocking pre-lock gate
// stops the evaluation: later gates' adapters are not asked.
func TestCheckPreLockGateStops(t *testing.T) {
	e := newEnv()
	e.cl.pause = &Pause{Reason: "x", By: "y", At: t0}
	wantErr(t, e.coord(t).Check(t.Context()), CodeBlocked, "pause")
	for _, c := range []string{"windows.Check", "policies.ClusterHealth", "script.Run"} {
		if e.rec.count(c) != 0 {
			t.Errorf("%s called after the pause gate blocked", c)
		}
	}
}

// An idle check reads only this node's keys; a needed reboot reads the
// whole cluster before the gates, and fails closed when it cannot.
func TestCheckReadsWholeClusterOnlyWhenNeeded(t *testing.T) {
	e := newEnv()
	e.det.set(detNo)
	if err := e.coord(t).Check(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := e.rec.count("cluster.View"); n != 1 {
		t.Errorf("idle check read the cluster %d times, want 1 (own keys)", n)
	}

	e = newEnv()
	e.cl.viewErr = func(n int) error {
		if n == 2 {
			return unavailable("range")
		}
		return nil
	}
	wantErr(t, e.coord(t).Check(t.Context()), CodeEtcd, "etcd")
	if e.rec.count("holder.Start") != 0 {
		t.Errorf("holder started without the cluster view: %v", e.rec.list())
	}
	if a := e.cl.alive[self]; a.State != StateError || !strings.Contains(a.Blocked, "cannot read the cluster") {
		t.Errorf("alive = %+v", a)
	}
}
