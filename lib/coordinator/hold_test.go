package coordinator

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// holdEnv is an env for Hold inside a synctest bubble: the bubble's clock
// drives Now, backoff sleeps and max_hold_wait.
func holdEnv() *env {
	e := newEnv()
	e.now = time.Now
	e.opt.MaxHoldWait = 10 * time.Minute
	return e
}

// holdInvariants are checked after every Hold that got a session: the
// mutex was released as often as it was taken, the lease was revoked once,
// and a reboot call only ever happened with the slot written and the mutex
// free.
func holdInvariants(t *testing.T, e *env) {
	t.Helper()
	s := e.cl.session(t)
	acquired, unlocks, closes := s.counts()
	if unlocks != acquired {
		t.Errorf("mutex taken %d times but unlocked %d times", acquired, unlocks)
	}
	if closes != 1 {
		t.Errorf("session closed %d times, want 1 (lease revoked on every path)", closes)
	}
	if !e.cl.lockFree() {
		t.Error("mutex still held after Hold returned")
	}
	if s.info.Node != self || s.info.BootID != "boot-2" || s.info.PID == 0 {
		t.Errorf("lock info = %+v", s.info)
	}
	if len(e.rb.calls()) > 0 && (!e.rb.hadSlot || !e.rb.lockWasFree) {
		t.Errorf("reboot called with slot=%v, mutex free=%v; want both", e.rb.hadSlot, e.rb.lockWasFree)
	}
	if e.rec.count("holder.Start") != 0 {
		t.Error("the holder started a holder")
	}
}

func TestHold(t *testing.T) {
	tests := []struct {
		name   string
		setup  func(e *env)
		code   Code
		gate   string
		reason string   // substring of the error's reason
		hist   []string // history events, in order
		slot   bool     // own slot present afterwards
		reboot bool
		check  func(t *testing.T, e *env)
	}{
		{
			name:  "happy path",
			setup: func(e *env) {},
			code:  CodeOK,
			hist:  []string{EventSlotTaken, EventRebootRequested},
			slot:  true, reboot: true,
			check: func(t *testing.T, e *env) {
				// After the fenced write, the unlock, the marker, the state
				// file, the alive record and the history record run at the
				// same time; all of them before the reboot call.
				order := e.rec.only("session.Lock", "policies.ClusterHealth", "session.AcquireSlot", "rebooter.Reboot", "session.Close")
				want := []string{"session.Lock", "policies.ClusterHealth", "session.AcquireSlot", "rebooter.Reboot", "session.Close"}
				if !slices.Equal(order, want) {
					t.Errorf("order = %v\nwant    %v", order, want)
				}
				acq, rb := e.rec.first("session.AcquireSlot"), e.rec.first("rebooter.Reboot")
				for _, call := range []string{"session.Unlock", "host.MarkRebootRequested", "state.Save", "cluster.AppendHistory"} {
					if i := e.rec.last(call); i < acq || i > rb {
						t.Errorf("%s at %d, want between the fenced write (%d) and the reboot call (%d): %v", call, i, acq, rb, e.rec.list())
					}
				}
				if e.rec.last("cluster.PublishAlive") > rb {
					t.Errorf("alive published after the reboot call: %v", e.rec.list())
				}
				if st, _ := e.st.Load(); st.SlotBootID != "boot-2" {
					t.Errorf("state file slot boot id = %q, want boot-2", st.SlotBootID)
				}
				s, _ := e.cl.slot(self)
				now := time.Now()
				if s.BootID != "boot-2" || s.Reason != detYes.Reason || !s.AcquiredAt.Equal(now) ||
					!s.Deadline.Equal(now.Add(30*time.Minute)) || s.FenceRevision == 0 {
					t.Errorf("slot = %+v", s)
				}
				ev := e.cl.events()
				if ev[0].BootID != "boot-2" || ev[0].Reason != detYes.Reason || ev[1].Node != self || ev[1].Reason != detYes.Reason {
					t.Errorf("history = %+v", ev)
				}
				if !e.host.marked("boot-2") {
					t.Error("reboot-requested marker not written")
				}
				if got := e.rb.calls(); !slices.Equal(got, []string{detYes.Reason}) {
					t.Errorf("reboot reasons = %v", got)
				}
				if !slices.Equal(e.script.seen(), []string{"under-lock"}) {
					t.Errorf("script phases = %v", e.script.seen())
				}
				if !slices.Equal(e.pol.assume, []bool{false}) {
					t.Errorf("under-lock ClusterHealth assumeSlotsReturn = %v, want [false]", e.pol.assume)
				}
				pub := e.cl.publishes()
				if a := pub[len(pub)-1]; a.State != StateRebooting || !a.RebootRequired {
					t.Errorf("last alive = %+v", a)
				}
				if pub[0].State != StateWaiting || pub[0].Blocked != "queued for the cluster lock, position 1" {
					t.Errorf("first alive = %+v", pub[0])
				}
			},
		},
		{
			name:  "dry run releases the slot and never reboots",
			setup: func(e *env) { e.opt.DryRun = true },
			code:  CodeOK,
			hist:  []string{EventSlotTaken, EventDryRun},
			check: func(t *testing.T, e *env) {
				if e.host.marked("boot-2") {
					t.Error("marker written in a dry run")
				}
				if a, _ := lastAlive(t, e); a.State != StateIdle {
					t.Errorf("alive after dry run = %+v", a)
				}
				if ev := e.cl.events()[1]; !strings.Contains(ev.Reason, "dry run") || ev.BootID != "boot-2" {
					t.Errorf("dry-run event = %+v", ev)
				}
			},
		},
		{
			name:  "dry run, release fails",
			setup: func(e *env) { e.opt.DryRun = true; e.cl.releaseErr = unavailable("txn") },
			code:  CodeEtcd, gate: "etcd",
			hist: []string{EventSlotTaken}, slot: true,
		},
		{
			name:  "reboot refused: slot released, marker cleared",
			setup: func(e *env) { e.rb.err = fmt.Errorf("%w: logind: access denied", ErrRebootRefused) },
			code:  CodeInternal, gate: "reboot", reason: "reboot refused",
			hist:   []string{EventSlotTaken, EventRebootRequested, EventRebootFailed},
			reboot: true,
			check: func(t *testing.T, e *env) {
				if e.host.marked("boot-2") {
					t.Error("marker left behind after a failed reboot")
				}
				if ev := e.cl.events()[2]; !strings.HasSuffix(ev.Reason, "logind: access denied") {
					t.Errorf("reboot-failed event = %+v", ev)
				}
				if e.rec.first("cluster.ReleaseSlot") < e.rec.first("rebooter.Reboot") {
					t.Error("slot released before the reboot call")
				}
			},
		},
		{
			name: "reboot refused and the release fails too",
			setup: func(e *env) {
				e.rb.err = fmt.Errorf("%w: logind: access denied", ErrRebootRefused)
				e.cl.releaseErr = unavailable("txn")
			},
			code: CodeInternal, gate: "reboot",
			hist: []string{EventSlotTaken, EventRebootRequested}, slot: true, reboot: true,
		},
		{
			name: "reboot refused: loop-guard counts untouched",
			setup: func(e *env) {
				e.opt.MaxRebootsPerReason = 3
				e.st.st = State{RebootsForReason: map[string]int{detYes.Reason: 1, "other": 2}}
				e.rb.err = fmt.Errorf("%w: %w", ErrRebootRefused, errBoom)
			},
			code: CodeInternal, gate: "reboot",
			hist: []string{EventSlotTaken, EventRebootRequested, EventRebootFailed}, reboot: true,
			check: func(t *testing.T, e *env) {
				if n := e.st.get().RebootsForReason["other"]; n != 2 {
					t.Errorf("other reason count = %d, want 2", n)
				}
			},
		},
		{
			// The stop of this holder by the very shutdown it asked for,
			// or a timeout: no answer means the reboot may be under way.
			name:  "reboot call without an answer: slot and marker kept",
			setup: func(e *env) { e.rb.err = context.DeadlineExceeded },
			code:  CodeInternal, gate: "reboot", reason: "no answer",
			hist:   []string{EventSlotTaken, EventRebootRequested},
			slot:   true,
			reboot: true,
			check: func(t *testing.T, e *env) {
				if !e.host.marked("boot-2") {
					t.Error("marker cleared although the reboot may be under way")
				}
			},
		},
		{
			name:  "history append failure does not stop the reboot",
			setup: func(e *env) { e.cl.appendErr = unavailable("put") },
			code:  CodeOK,
			hist:  []string{EventSlotTaken}, slot: true, reboot: true,
		},
		{
			name:  "fenced write: lock lost",
			setup: func(e *env) { e.cl.acquireErr = errors.Join(errors.New("txn compare failed"), ErrLockLost) },
			code:  CodeBusy, gate: "fence", reason: "lock lost",
		},
		{
			name:  "fenced write: etcd down",
			setup: func(e *env) { e.cl.acquireErr = unavailable("txn") },
			code:  CodeEtcd, gate: "etcd",
		},
		{
			name:  "reboot-requested marker cannot be written",
			setup: func(e *env) { e.host.markErr = errors.New("read-only file system") },
			code:  CodeInternal, gate: "marker",
			hist: []string{EventSlotTaken, EventAborted},
			check: func(t *testing.T, e *env) {
				for _, a := range e.cl.publishes() {
					if a.State == StateRebooting {
						t.Errorf("published %+v although the marker failed", a)
					}
				}
				if e.rec.count("state.Save") != 0 {
					t.Error("slot noted in the state file although the marker failed")
				}
			},
		},
		{
			name:  "alive publication failures do not stop the holder",
			setup: func(e *env) { e.cl.publishErr = unavailable("put") },
			code:  CodeOK,
			hist:  []string{EventSlotTaken, EventRebootRequested}, slot: true, reboot: true,
		},
		{
			name:  "no longer needed under the lock",
			setup: func(e *env) { e.det.set(detNo) },
			code:  CodeOK,
			check: func(t *testing.T, e *env) {
				if a, _ := lastAlive(t, e); a.State != StateIdle || a.RebootRequired {
					t.Errorf("alive = %+v", a)
				}
				if e.rec.count("policies.SlotLimit") != 0 {
					t.Error("gates after the detector were evaluated")
				}
			},
		},
		{
			name:  "detector error under the lock",
			setup: func(e *env) { e.det.set(detUnknown) },
			code:  CodeDetector, gate: "detector", reason: "exit code 9",
		},
		{
			name:  "view fails under the lock",
			setup: func(e *env) { e.cl.viewErr = func(int) error { return unavailable("range") } },
			code:  CodeEtcd, gate: "etcd", reason: "",
		},
		{
			name:  "lock fails",
			setup: func(e *env) { e.cl.lockErr = unavailable("lock") },
			code:  CodeEtcd, gate: "etcd",
		},
		{
			name:  "lock refused as lost",
			setup: func(e *env) { e.cl.lockErr = ErrLockLost },
			code:  CodeBusy, gate: "session",
		},
		{
			name:  "lease revocation failure is only logged",
			setup: func(e *env) { e.cl.closeErr = unavailable("revoke"); e.cl.unlockErr = unavailable("unlock") },
			code:  CodeOK,
			hist:  []string{EventSlotTaken, EventRebootRequested}, slot: true, reboot: true,
		},
		{
			name: "overdue slot released with slot_expiry = release",
			setup: func(e *env) {
				e.opt.SlotExpiryRelease = true
				e.cl.putSlot(Slot{Node: "n2", Reason: "old", AcquiredAt: time.Now().Add(-2 * time.Hour), Deadline: time.Now().Add(-time.Hour)})
			},
			code: CodeOK,
			hist: []string{EventExpired, EventSlotTaken, EventRebootRequested}, slot: true, reboot: true,
			check: func(t *testing.T, e *env) {
				if _, ok := e.cl.slot("n2"); ok {
					t.Error("overdue slot not released")
				}
				ev := e.cl.events()[0]
				if ev.Node != "n2" || ev.By != self || !strings.Contains(ev.Reason, "overdue since") || !strings.Contains(ev.Reason, "old") {
					t.Errorf("expired event = %+v", ev)
				}
			},
		},
		{
			name: "slot_expiry = release keeps slots that are not overdue",
			setup: func(e *env) {
				e.opt.SlotExpiryRelease = true
				e.opt.MaxConcurrent = 2
				e.cl.putSlot(Slot{Node: "n2", Deadline: time.Now().Add(time.Hour)})
			},
			code: CodeOK,
			hist: []string{EventSlotTaken, EventRebootRequested}, slot: true, reboot: true,
			check: func(t *testing.T, e *env) {
				if _, ok := e.cl.slot("n2"); !ok {
					t.Error("a slot that is not overdue was released")
				}
			},
		},
		{
			name: "overdue slot changed concurrently: conflict ignored",
			setup: func(e *env) {
				e.opt.SlotExpiryRelease = true
				e.cl.putSlot(Slot{Node: "n2", Deadline: time.Now().Add(-time.Hour)})
				e.cl.releaseErr = ErrConflict
			},
			code: CodeOK,
			hist: []string{EventSlotTaken, EventRebootRequested}, slot: true, reboot: true,
		},
		{
			name: "overdue slot cannot be released",
			setup: func(e *env) {
				e.opt.SlotExpiryRelease = true
				e.cl.putSlot(Slot{Node: "n2", Deadline: time.Now().Add(-time.Hour)})
				e.cl.releaseErr = unavailable("txn")
			},
			code: CodeEtcd, gate: "etcd", reason: "",
		},
		{
			name: "effective max from P/settings",
			setup: func(e *env) {
				e.opt.MaxConcurrent = 3
				e.cl.settings = 2
			},
			code: CodeOK,
			hist: []string{EventSlotTaken, EventRebootRequested}, slot: true, reboot: true,
			check: func(t *testing.T, e *env) {
				if !slices.Equal(e.pol.maxes, []int{2}) {
					t.Errorf("SlotLimit max = %v, want [2]", e.pol.maxes)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := holdEnv()
				tc.setup(e)
				stateBefore := e.st.get()
				err := e.coord(t).Hold(t.Context())
				ce := wantErr(t, err, tc.code, tc.gate)
				if ce != nil && !strings.Contains(ce.Reason, tc.reason) {
					t.Errorf("reason = %q, want it to contain %q", ce.Reason, tc.reason)
				}
				holdInvariants(t, e)
				if got := e.cl.eventNames(); !slices.Equal(got, tc.hist) {
					t.Errorf("history = %v, want %v", got, tc.hist)
				}
				if _, has := e.cl.slot(self); has != tc.slot {
					t.Errorf("own slot present = %v, want %v", has, tc.slot)
				}
				if got := len(e.rb.calls()) > 0; got != tc.reboot {
					t.Errorf("reboot called = %v, want %v", got, tc.reboot)
				}
				// Only a completed reboot (post-boot release) counts for
				// the reboot-loop guard; the holder never changes it. It
				// notes the boot of a requested reboot, and only then.
				got := e.st.get()
				if requested := tc.reboot || slices.Contains(tc.hist, EventRebootRequested); requested != (got.SlotBootID != "") {
					t.Errorf("slot boot id %q noted, reboot requested: %v", got.SlotBootID, requested)
				}
				got.SlotBootID = stateBefore.SlotBootID
				if !reflect.DeepEqual(got, stateBefore) {
					t.Errorf("holder changed the state file: %+v, was %+v", got, stateBefore)
				}
				if tc.check != nil {
					tc.check(t, e)
				}
			})
		})
	}
}

func TestHoldBeforeSession(t *testing.T) {
	tests := []struct {
		name  string
		setup func(e *env)
		code  Code
		gate  string
	}{
		{"boot id unreadable", func(e *env) { e.host.bootErr = errBoom }, CodeInternal, "boot-id"},
		{"session cannot be created", func(e *env) { e.cl.sessionErr = unavailable("grant") }, CodeEtcd, "etcd"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := holdEnv()
				tc.setup(e)
				wantErr(t, e.coord(t).Hold(t.Context()), tc.code, tc.gate)
				if n := len(e.rec.only("session.", "rebooter.")); n != 0 {
					t.Errorf("calls without a session: %v", e.rec.list())
				}
			})
		})
	}
}
