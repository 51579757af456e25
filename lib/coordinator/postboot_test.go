package coordinator

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// ownSlot puts this node's slot, taken in boot "boot-1" twenty minutes ago.
func ownSlot(e *env, mod func(*Slot)) Slot {
	s := Slot{Node: self, BootID: "boot-1", Reason: detYes.Reason,
		AcquiredAt: t0.Add(-20 * time.Minute), Deadline: t0.Add(10 * time.Minute)}
	if mod != nil {
		mod(&s)
	}
	return e.cl.putSlot(s)
}

func TestCheckPostBoot(t *testing.T) {
	tests := []struct {
		name     string
		setup    func(e *env)
		code     Code
		gate     string
		released string // history event of the release, "" when the slot must stay
		detected bool   // the run went on to detection
		check    func(t *testing.T, e *env)
	}{
		{
			name:     "new boot and healthy: released as completed",
			setup:    func(e *env) { ownSlot(e, nil); e.det.set(detNo) },
			code:     CodeOK,
			released: EventCompleted, detected: true,
			check: func(t *testing.T, e *env) {
				ev := e.cl.events()[0]
				if ev.Node != self || ev.BootID != "boot-2" || ev.Reason != detYes.Reason ||
					ev.DurationMS != (20*time.Minute).Milliseconds() || !ev.At.Equal(t0) {
					t.Errorf("completed event = %+v", ev)
				}
				pub := e.cl.publishes()
				if len(pub) != 2 || !pub[0].Healthy || pub[0].State != StateIdle || pub[0].Blocked != "" {
					t.Fatalf("alive records = %+v, want a healthy idle one first", pub)
				}
				if e.rec.first("cluster.PublishAlive") > e.rec.first("cluster.ReleaseSlot") {
					t.Errorf("slot released before alive said healthy: %v", e.rec.list())
				}
				if e.rec.count("script.Run") != 1 || !slices.Equal(e.script.seen(), []string{PhasePostBoot}) {
					t.Errorf("script phases = %v", e.script.seen())
				}
				if len(e.host.rebootedAt) != 1 || !e.host.rebootedAt[0].Equal(t0) {
					t.Errorf("rebooted marker = %v", e.host.rebootedAt)
				}
				if st := e.st.get(); !st.LastRebootAt.Equal(t0) || st.LastRebootReason != detYes.Reason {
					t.Errorf("state = %+v", st)
				}
				if e.rec.count("cluster.UpdateSlot") != 0 {
					t.Error("slot rewritten although post_boot_soak is 0")
				}
			},
		},
		{
			name: "released, then the same reason is still there: loop guard",
			setup: func(e *env) {
				ownSlot(e, nil)
				e.st.st = State{RebootsForReason: map[string]int{detYes.Reason: 1}}
			},
			code: CodeBlocked, gate: "reboot-loop-guard",
			released: EventCompleted, detected: true,
			check: func(t *testing.T, e *env) {
				// The gates ran against a fresh view without the released slot.
				if n := e.rec.count("cluster.View"); n != 4 {
					t.Errorf("cluster read %d times, want 4 (own keys, post-boot, own keys after release, the gates' whole view)", n)
				}
			},
		},
		{
			// The reboot-loop guard: the reason is still present right
			// after the coordinated reboot for it.
			name:  "new boot, same reason still present: counted, loop guard blocks",
			setup: func(e *env) { ownSlot(e, nil) },
			code:  CodeBlocked, gate: "reboot-loop-guard",
			released: EventCompleted, detected: true,
			check: func(t *testing.T, e *env) {
				if n := e.st.get().RebootsForReason[detYes.Reason]; n != 1 {
					t.Errorf("reboots counted for the reason = %d, want 1", n)
				}
				if e.rec.count("holder.Start") != 0 {
					t.Error("holder started despite the loop guard")
				}
			},
		},
		{
			name: "marker failure after the release is only logged",
			setup: func(e *env) {
				ownSlot(e, nil)
				e.det.set(detNo)
				e.host.rebootedErr = errBoom
			},
			code: CodeOK, released: EventCompleted, detected: true,
		},
		{
			// The reboot-loop guard could not count the reboot: the run
			// fails visibly instead of detecting and queueing again.
			// The loop guard must not fail open: no count, no release.
			name: "state file cannot be written: slot kept",
			setup: func(e *env) {
				ownSlot(e, nil)
				e.st.saveErr = errBoom
			},
			code: CodeInternal, gate: "state",
		},
		{
			// Counted, then the release fails: the next run releases
			// without counting the same reboot twice.
			name: "release fails after the count: retried, counted once",
			setup: func(e *env) {
				ownSlot(e, nil)
				e.cl.releaseErr = unavailable("txn")
			},
			code: CodeEtcd, gate: "etcd",
			check: func(t *testing.T, e *env) {
				e.cl.releaseErr = nil
				// The reason is still there: the guard (count 1) stops it.
				wantErr(t, e.coord(t).Check(t.Context()), CodeBlocked, "reboot-loop-guard")
				if _, has := e.cl.slot(self); has {
					t.Error("slot still held after the retried release")
				}
				if n := e.st.get().RebootsForReason[detYes.Reason]; n != 1 {
					t.Errorf("reboot counted %d times, want 1", n)
				}
			},
		},
		{
			name: "new boot, node unhealthy: kept, healthy_since reset",
			setup: func(e *env) {
				ownSlot(e, func(s *Slot) { s.HealthySince = t0.Add(-time.Minute) })
				e.nh.ok, e.nh.why = false, "degraded"
			},
			code: CodeHealth, gate: "post-boot",
			check: func(t *testing.T, e *env) {
				s, _ := e.cl.slot(self)
				if !s.HealthySince.IsZero() {
					t.Errorf("healthy_since = %v, want reset", s.HealthySince)
				}
				a, _ := lastAlive(t, e)
				if a.State != StateVerifying || a.Healthy || !strings.Contains(a.Blocked, "degraded") {
					t.Errorf("alive = %+v", a)
				}
				if e.rec.count("script.Run") != 0 {
					t.Error("health script run although the node is unhealthy")
				}
			},
		},
		{
			name: "new boot, node unhealthy, healthy_since already zero: no write",
			setup: func(e *env) {
				ownSlot(e, nil)
				e.nh.err = errors.New("bus unreachable")
			},
			code: CodeHealth, gate: "post-boot",
			check: func(t *testing.T, e *env) {
				if e.rec.count("cluster.UpdateSlot") != 0 {
					t.Error("slot rewritten for nothing")
				}
			},
		},
		{
			name: "reset of healthy_since fails: still kept",
			setup: func(e *env) {
				ownSlot(e, func(s *Slot) { s.HealthySince = t0.Add(-time.Minute) })
				e.nh.ok = false
				e.cl.updateErr = unavailable("put")
			},
			code: CodeHealth, gate: "post-boot",
		},
		{
			name: "new boot, health script refuses",
			setup: func(e *env) {
				ownSlot(e, nil)
				e.script.verdict = ScriptVerdict{ExitCode: 2, FirstLine: "quorum lost"}
			},
			code: CodeHealth, gate: "post-boot",
			check: func(t *testing.T, e *env) {
				a, _ := lastAlive(t, e)
				if !strings.Contains(a.Blocked, "health script exit 2: quorum lost") {
					t.Errorf("blocked = %q", a.Blocked)
				}
			},
		},
		{
			name:  "new boot, health script error",
			setup: func(e *env) { ownSlot(e, nil); e.script.err = errors.New("not owned by root") },
			code:  CodeHealth, gate: "post-boot",
		},
		{
			name:  "new boot, view fails",
			setup: func(e *env) { ownSlot(e, nil); e.cl.viewErr = failOnCall(2) },
			code:  CodeEtcd, gate: "etcd",
		},
		{
			name:  "new boot, alive publication fails: kept",
			setup: func(e *env) { ownSlot(e, nil); e.cl.publishErr = unavailable("put") },
			code:  CodeEtcd, gate: "etcd",
		},
		{
			name:  "new boot, release fails",
			setup: func(e *env) { ownSlot(e, nil); e.cl.releaseErr = unavailable("txn") },
			code:  CodeEtcd, gate: "etcd",
		},
		{
			name:  "released, re-read fails",
			setup: func(e *env) { ownSlot(e, nil); e.cl.viewErr = failOnCall(3) },
			code:  CodeEtcd, gate: "etcd", released: EventCompleted,
		},
		{
			name: "soak not finished: healthy_since recorded, held",
			setup: func(e *env) {
				e.opt.PostBootSoak = 10 * time.Minute
				ownSlot(e, nil)
			},
			code: CodeOK,
			check: func(t *testing.T, e *env) {
				s, _ := e.cl.slot(self)
				if !s.HealthySince.Equal(t0) {
					t.Errorf("healthy_since = %v, want %v", s.HealthySince, t0)
				}
				a, _ := lastAlive(t, e)
				if a.State != StateVerifying || !strings.Contains(a.Blocked, "post-boot soak: healthy for 0s of 10m0s") {
					t.Errorf("alive = %+v", a)
				}
			},
		},
		{
			name: "soak still running",
			setup: func(e *env) {
				e.opt.PostBootSoak = 10 * time.Minute
				ownSlot(e, func(s *Slot) { s.HealthySince = t0.Add(-5 * time.Minute) })
			},
			code: CodeOK,
			check: func(t *testing.T, e *env) {
				if e.rec.count("cluster.UpdateSlot") != 0 {
					t.Error("healthy_since rewritten while soaking")
				}
				if a, _ := lastAlive(t, e); !strings.Contains(a.Blocked, "healthy for 5m0s of 10m0s") {
					t.Errorf("blocked = %q", a.Blocked)
				}
			},
		},
		{
			name: "soak done",
			setup: func(e *env) {
				e.opt.PostBootSoak = 10 * time.Minute
				ownSlot(e, func(s *Slot) { s.HealthySince = t0.Add(-10 * time.Minute) })
				e.det.set(detNo)
			},
			code: CodeOK, released: EventCompleted, detected: true,
		},
		{
			name: "soak: recording healthy_since fails",
			setup: func(e *env) {
				e.opt.PostBootSoak = time.Minute
				ownSlot(e, nil)
				e.cl.updateErr = unavailable("put")
			},
			code: CodeEtcd, gate: "etcd",
		},
		{
			name:  "same boot, holder active: kept",
			setup: func(e *env) { ownSlot(e, func(s *Slot) { s.BootID = "boot-2" }); e.holder.active = true },
			code:  CodeOK,
			check: func(t *testing.T, e *env) {
				a, _ := lastAlive(t, e)
				if a.State != StateRebooting || a.Blocked != "reboot in progress" {
					t.Errorf("alive = %+v", a)
				}
			},
		},
		{
			name: "same boot, reboot requested: kept",
			setup: func(e *env) {
				ownSlot(e, func(s *Slot) { s.BootID = "boot-2" })
				e.host.requested["boot-2"] = true
			},
			code: CodeOK,
		},
		{
			// The holder died between the marker and the reboot call: past
			// the deadline, freeze keeps the slot for an operator...
			name: "same boot, reboot requested, overdue, freeze: kept for an operator",
			setup: func(e *env) {
				ownSlot(e, func(s *Slot) { s.BootID = "boot-2"; s.Deadline = t0.Add(-time.Minute) })
				e.host.requested["boot-2"] = true
			},
			code: CodeOK,
			check: func(t *testing.T, e *env) {
				if a, _ := lastAlive(t, e); !strings.Contains(a.Blocked, "clusterrebootd release") {
					t.Errorf("alive = %+v, want it to name the operator's release", a)
				}
			},
		},
		{
			// ... and slot_expiry = release frees it, so the node retries.
			name: "same boot, reboot requested, overdue, release: expired",
			setup: func(e *env) {
				e.opt.SlotExpiryRelease = true
				ownSlot(e, func(s *Slot) { s.BootID = "boot-2"; s.Deadline = t0.Add(-time.Minute) })
				e.host.requested["boot-2"] = true
				e.det.set(detNo)
			},
			code: CodeOK, released: EventExpired, detected: true,
			check: func(t *testing.T, e *env) {
				if e.host.marked("boot-2") {
					t.Error("marker kept after the slot expired")
				}
			},
		},
		{
			name: "same boot, marker of another boot does not count",
			setup: func(e *env) {
				ownSlot(e, func(s *Slot) { s.BootID = "boot-2" })
				e.host.requested["boot-1"] = true
				e.det.set(detNo)
			},
			code: CodeOK, released: EventAborted, detected: true,
		},
		{
			name:  "same boot, no holder, no marker: aborted",
			setup: func(e *env) { ownSlot(e, func(s *Slot) { s.BootID = "boot-2" }) },
			code:  CodeOK, released: EventAborted, detected: true,
			check: func(t *testing.T, e *env) {
				ev := e.cl.events()[0]
				if ev.BootID != "boot-2" || !strings.Contains(ev.Reason, "never happened") || !strings.Contains(ev.Reason, detYes.Reason) {
					t.Errorf("aborted event = %+v", ev)
				}
				if e.rec.count("host.MarkRebooted") != 0 {
					t.Error("rebooted marker written for a reboot that never happened")
				}
				// The run goes on: reboot still needed, gates pass, holder starts.
				if e.rec.count("holder.Start") != 1 {
					t.Errorf("holder not started after the aborted slot: %v", e.rec.list())
				}
			},
		},
		{
			name:  "same boot, holder state unknown: kept",
			setup: func(e *env) { ownSlot(e, func(s *Slot) { s.BootID = "boot-2" }); e.holder.activeErr = errBoom },
			code:  CodeInternal, gate: "holder",
		},
		{
			name: "same boot, marker unreadable: kept",
			setup: func(e *env) {
				ownSlot(e, func(s *Slot) { s.BootID = "boot-2" })
				e.host.requestedErr = errBoom
			},
			code: CodeInternal, gate: "marker",
		},
		{
			name: "same boot, release fails",
			setup: func(e *env) {
				ownSlot(e, func(s *Slot) { s.BootID = "boot-2" })
				e.cl.releaseErr = unavailable("txn")
			},
			code: CodeEtcd, gate: "etcd",
		},
		{
			name: "same boot, slot changed concurrently",
			setup: func(e *env) {
				ownSlot(e, func(s *Slot) { s.BootID = "boot-2" })
				e.cl.releaseErr = ErrConflict
			},
			code: CodeInternal, gate: "etcd",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv()
			tc.setup(e)
			err := e.coord(t).Check(t.Context())
			wantErr(t, err, tc.code, tc.gate)
			_, has := e.cl.slot(self)
			if tc.released == "" {
				if !has {
					t.Error("own slot released, want kept")
				}
				if n := len(e.cl.events()); n != 0 {
					t.Errorf("history written for a kept slot: %v", e.cl.eventNames())
				}
			} else {
				if has {
					t.Error("own slot kept, want released")
				}
				if got := e.cl.eventNames(); !slices.Equal(got, []string{tc.released}) {
					t.Errorf("history = %v, want [%s]", got, tc.released)
				}
			}
			if got := e.rec.count("detector.Detect") > 0; got != tc.detected {
				t.Errorf("detection ran = %v, want %v", got, tc.detected)
			}
			if tc.released == "" && e.rec.count("holder.Start") != 0 {
				t.Error("holder started while the own slot is held")
			}
			if e.rec.count("cluster.PublishAlive") == 0 {
				t.Error("no alive record published")
			}
			if tc.check != nil {
				tc.check(t, e)
			}
		})
	}
}

// failOnCall makes the n-th View fail with ErrUnavailable.
func failOnCall(n int) func(int) error {
	return func(i int) error {
		if i == n {
			return unavailable("view")
		}
		return nil
	}
}

// TestCheckPostBootSoakAcrossTicks runs two check ticks: the first starts
// the soak, the second, post_boot_soak later, releases the slot.
func TestCheckPostBootSoakAcrossTicks(t *testing.T) {
	e := newEnv()
	e.opt.PostBootSoak = 10 * time.Minute
	ownSlot(e, nil)
	e.det.set(detNo)
	c := e.coord(t)

	wantErr(t, c.Check(t.Context()), CodeOK, "")
	if _, ok := e.cl.slot(self); !ok {
		t.Fatal("slot released before the soak")
	}
	e.clk.Advance(9 * time.Minute)
	wantErr(t, c.Check(t.Context()), CodeOK, "")
	if _, ok := e.cl.slot(self); !ok {
		t.Fatal("slot released after 9 of 10 minutes")
	}
	e.clk.Advance(time.Minute)
	wantErr(t, c.Check(t.Context()), CodeOK, "")
	if _, ok := e.cl.slot(self); ok {
		t.Fatal("slot kept after the soak")
	}
	if got := e.cl.eventNames(); !slices.Equal(got, []string{EventCompleted}) {
		t.Errorf("history = %v", got)
	}
	if n := e.rec.count("cluster.UpdateSlot"); n != 1 {
		t.Errorf("UpdateSlot called %d times, want once (healthy_since)", n)
	}

	// A failed health check in between restarts the soak.
	e2 := newEnv()
	e2.opt.PostBootSoak = 10 * time.Minute
	ownSlot(e2, nil)
	c2 := e2.coord(t)
	wantErr(t, c2.Check(t.Context()), CodeOK, "")
	e2.clk.Advance(8 * time.Minute)
	e2.nh.ok = false
	wantErr(t, c2.Check(t.Context()), CodeHealth, "post-boot")
	e2.clk.Advance(5 * time.Minute)
	e2.nh.ok = true
	wantErr(t, c2.Check(t.Context()), CodeOK, "")
	s, ok := e2.cl.slot(self)
	if !ok || !s.HealthySince.Equal(t0.Add(13*time.Minute)) {
		t.Fatalf("after an unhealthy tick the soak must restart: slot %+v present %v", s, ok)
	}
}

// The kill switch stops this node's reboots, never the cluster: the slot of
// a reboot that finished is still released; without the state file's note
// of a requested reboot, etcd is not contacted at all.
func TestKillSwitchStillReleasesAfterReboot(t *testing.T) {
	tests := []struct {
		name     string
		setup    func(e *env)
		released bool
		etcd     bool   // any cluster call expected
		hint     string // SlotBootID afterwards
	}{
		{"reboot done, healthy: released", func(e *env) {
			ownSlot(e, nil)
			e.st.st.SlotBootID = "boot-1"
		}, true, true, ""},
		{"no note: etcd untouched", func(e *env) { ownSlot(e, nil) }, false, false, ""},
		{"note of this boot: reboot not yet happened", func(e *env) {
			ownSlot(e, func(s *Slot) { s.BootID = "boot-2" })
			e.st.st.SlotBootID = "boot-2"
		}, false, false, "boot-2"},
		{"slot already gone: note forgotten", func(e *env) { e.st.st.SlotBootID = "boot-1" }, false, true, ""},
		{"unhealthy: slot kept", func(e *env) {
			ownSlot(e, nil)
			e.st.st.SlotBootID = "boot-1"
			e.script.verdict = ScriptVerdict{ExitCode: 1, FirstLine: "degraded"}
		}, false, true, "boot-1"},
		{"etcd down: still exit 5, slot kept", func(e *env) {
			ownSlot(e, nil)
			e.st.st.SlotBootID = "boot-1"
			e.cl.viewErr = func(int) error { return unavailable("view") }
		}, false, true, "boot-1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv()
			e.host.kill = true
			tc.setup(e)
			_, had := e.cl.slot(self)
			wantErr(t, e.coord(t).Check(t.Context()), CodeBlocked, "kill-switch")
			if n := len(e.rec.only("cluster.")); (n > 0) != tc.etcd {
				t.Errorf("%d etcd calls, want any: %v (%v)", n, tc.etcd, e.rec.list())
			}
			if _, has := e.cl.slot(self); has != (had && !tc.released) {
				t.Errorf("own slot present = %v (before: %v), want released = %v", has, had, tc.released)
			}
			if got := e.st.get().SlotBootID; got != tc.hint {
				t.Errorf("SlotBootID = %q, want %q", got, tc.hint)
			}
			if e.rec.count("detector.Detect")+e.rec.count("holder.Start") != 0 {
				t.Errorf("went on past the kill switch: %v", e.rec.list())
			}
		})
	}
}
