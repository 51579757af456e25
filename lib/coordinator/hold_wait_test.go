package coordinator

// Hold tests that wait: backoff after a blocked gate, the slot wait under
// the mutex, the queue behind another lock owner, and how each wait ends.

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestHoldGateBlocksUntilMaxHoldWait: a gate that keeps blocking under the
// lock makes the holder unlock, back off and retry until max_hold_wait,
// then end with that gate's code.
func TestHoldGateBlocksUntilMaxHoldWait(t *testing.T) {
	tests := []struct {
		name  string
		setup func(e *env)
		code  Code
		gate  string
	}{
		{"kill switch", func(e *env) { e.host.kill = true }, CodeBlocked, "kill-switch"},
		{"kill switch unreadable", func(e *env) { e.host.killErr = errBoom }, CodeBlocked, "kill-switch"},
		{"pause", func(e *env) { e.cl.pause = &Pause{Reason: "freeze", By: "ops"} }, CodeBlocked, "pause"},
		{"window", func(e *env) { e.win.verdict = WindowVerdict{Reason: "closed"} }, CodeBlocked, "window"},
		{"overdue slot, freeze", func(e *env) {
			e.cl.putSlot(Slot{Node: "n2", Deadline: time.Now().Add(-time.Minute)})
		}, CodeBusy, "slots"},
		{"policy", func(e *env) { e.pol.health = PolicyVerdict{Reason: "too few healthy"} }, CodeHealth, "policy"},
		{"reboot-loop guard", func(e *env) {
			e.st.st = State{RebootsForReason: map[string]int{detYes.Reason: 1}}
		}, CodeBlocked, "reboot-loop-guard"},
		{"health script refuses", func(e *env) { e.script.verdict = ScriptVerdict{ExitCode: 1} }, CodeHealth, "health-script"},
		{"health script error", func(e *env) { e.script.err = errBoom }, CodeHealth, "health-script"},
		{"inhibitor", func(e *env) { e.inh.by = "backup (pid 42)" }, CodeBlocked, "inhibitors"},
		{"inhibitors unreadable", func(e *env) { e.inh.err = errBoom }, CodeBlocked, "inhibitors"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := holdEnv()
				e.opt.MaxHoldWait = 2 * time.Minute
				tc.setup(e)
				start := time.Now()
				ce := wantErr(t, e.coord(t).Hold(t.Context()), tc.code, tc.gate)
				if !strings.HasPrefix(ce.Reason, "max_hold_wait passed; last blocked by: ") {
					t.Errorf("reason = %q", ce.Reason)
				}
				if waited := time.Since(start); waited != 2*time.Minute {
					t.Errorf("gave up after %v, want max_hold_wait 2m", waited)
				}
				holdInvariants(t, e)
				acquired, _, _ := e.cl.session(t).counts()
				// Backoff 1s..10s within 2 minutes: at least 12 attempts.
				if acquired < 12 {
					t.Errorf("only %d attempts in 2 minutes with backoff_max 10s", acquired)
				}
				if len(e.cl.events()) != 0 || len(e.rb.calls()) != 0 {
					t.Errorf("blocked holder wrote history %v or rebooted", e.cl.eventNames())
				}
				pub := e.cl.publishes()
				if !slices.ContainsFunc(pub, func(a Alive) bool { return a.State == StateBlocked && a.Blocked != "" }) {
					t.Error("blocked state never published")
				}
			})
		})
	}
}

// TestHoldRetryAfterBackoff: a gate blocks once; the holder unlocks, sleeps
// a backoff within [backoff_min/2, backoff_min] and succeeds on attempt 2.
func TestHoldRetryAfterBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := holdEnv()
		e.win.closedN = 1
		start := time.Now()
		wantErr(t, e.coord(t).Hold(t.Context()), CodeOK, "")
		if d := time.Since(start); d < 500*time.Millisecond || d > time.Second {
			t.Errorf("first backoff %v, want within [500ms, 1s]", d)
		}
		holdInvariants(t, e)
		acquired, unlocks, _ := e.cl.session(t).counts()
		if acquired != 2 || unlocks != 2 {
			t.Errorf("lock taken %d, released %d; want 2 and 2", acquired, unlocks)
		}
		// The first unlock happened before the backoff, not after the retry.
		calls := e.rec.only("session.Lock", "session.Unlock", "windows.Check")
		want := []string{"session.Lock", "windows.Check", "session.Unlock", "session.Lock", "windows.Check", "session.Unlock"}
		if !slices.Equal(calls, want) {
			t.Errorf("calls = %v\nwant    %v", calls, want)
		}
		if len(e.rb.calls()) != 1 {
			t.Error("no reboot after the retry")
		}
	})
}

// TestHoldWaitsForSlot: with the slot table full the holder keeps the mutex
// and watches P/slots/; when the other node's slot goes it proceeds.
func TestHoldWaitsForSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := holdEnv()
		e.opt.MaxHoldWait = time.Hour
		e.cl.putSlot(Slot{Node: "n2", Reason: "other", AcquiredAt: time.Now(), Deadline: time.Now().Add(time.Hour)})
		done := make(chan error, 1)
		go func() { done <- e.coord(t).Hold(t.Context()) }()
		synctest.Wait()

		s := e.cl.session(t)
		if acquired, unlocks, _ := s.counts(); acquired != 1 || unlocks != 0 || !s.isLocked() {
			t.Fatalf("while waiting for a slot: acquired %d, unlocks %d, locked %v; want the mutex kept", acquired, unlocks, s.isLocked())
		}
		if e.rec.last("cluster.WaitChange") < 0 {
			t.Fatal("not waiting on P/slots/")
		}
		if a, _ := lastAlive(t, e); a.State != StateWaiting || !strings.Contains(a.Blocked, "1 of 1 slots in use") {
			t.Errorf("alive while waiting = %+v", a)
		}
		// Nobody was queued ahead: the full view is read at once.
		e.cl.mu.Lock()
		gv := e.cl.gateViews
		e.cl.mu.Unlock()
		if gv != 1 {
			t.Errorf("%d full reads of the cluster while the slots were full, want 1", gv)
		}
		// Changes elsewhere (alive records) do not wake the wait.
		views := e.rec.count("cluster.View")
		e.cl.PublishAlive(t.Context(), Alive{Node: "n3", Healthy: true})
		synctest.Wait()
		if e.rec.count("cluster.View") != views {
			t.Error("woken by a change outside P/slots/")
		}
		time.Sleep(20 * time.Minute) // longer than any backoff: still waiting, no retries
		if e.rec.count("cluster.View") != views || len(done) != 0 {
			t.Error("holder stopped waiting without a slot change")
		}

		e.cl.dropSlot("n2")
		wantErr(t, <-done, CodeOK, "")
		holdInvariants(t, e)
		if e.cl.gateViews != 2 {
			t.Errorf("%d full reads of the cluster, want 2 (before the wait and after the slot freed)", e.cl.gateViews)
		}
		if acquired, unlocks, _ := s.counts(); acquired != 1 || unlocks != 1 {
			t.Errorf("acquired %d, unlocks %d; want one of each", acquired, unlocks)
		}
		if _, ok := e.cl.slot(self); !ok || len(e.rb.calls()) != 1 {
			t.Error("no slot or no reboot after the wait")
		}
	})
}

func TestHoldSlotWaitEnds(t *testing.T) {
	tests := []struct {
		name   string
		act    func(e *env, cancel context.CancelFunc)
		code   Code
		gate   string
		reason string
	}{
		{
			name: "SIGTERM: unlock, revoke, exit 5",
			act:  func(e *env, cancel context.CancelFunc) { cancel() },
			code: CodeBlocked, gate: "hold", reason: "stopped while waiting for a free slot",
		},
		{
			name: "session lost: exit 4",
			act:  func(e *env, cancel context.CancelFunc) { e.cl.sess0().kill() },
			code: CodeBusy, gate: "session", reason: "etcd session lost while waiting for a free slot",
		},
		{
			name: "max_hold_wait: code of the slot gate",
			act:  func(e *env, cancel context.CancelFunc) { time.Sleep(time.Hour) },
			code: CodeBusy, gate: "slots", reason: "max_hold_wait passed; last blocked by: 1 of 1 slots in use",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := holdEnv()
				e.cl.putSlot(Slot{Node: "n2", Deadline: time.Now().Add(24 * time.Hour)})
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				done := make(chan error, 1)
				go func() { done <- e.coord(t).Hold(ctx) }()
				synctest.Wait()
				tc.act(e, cancel)
				ce := wantErr(t, <-done, tc.code, tc.gate)
				if !strings.Contains(ce.Reason, tc.reason) {
					t.Errorf("reason = %q, want %q", ce.Reason, tc.reason)
				}
				holdInvariants(t, e)
				if e.rec.count("session.Unlock") != 1 {
					t.Errorf("Unlock called %d times, want 1", e.rec.count("session.Unlock"))
				}
				if len(e.rb.calls()) != 0 || len(e.cl.events()) != 0 {
					t.Error("reboot or history after the wait ended")
				}
			})
		})
	}
}

func TestHoldSlotWaitError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := holdEnv()
		e.cl.putSlot(Slot{Node: "n2", Deadline: time.Now().Add(time.Hour)})
		e.cl.waitErr = unavailable("watch")
		ce := wantErr(t, e.coord(t).Hold(t.Context()), CodeEtcd, "etcd")
		if !errors.Is(ce, ErrUnavailable) || !strings.Contains(ce.Error(), "waiting for a free slot") {
			t.Errorf("err = %v", ce)
		}
		holdInvariants(t, e)
	})
}

// TestHoldLockWaitEnds: the holder queues behind an operator's lock (the
// test owns the mutex) and the wait ends in different ways; it never
// reboots.
func TestHoldLockWaitEnds(t *testing.T) {
	tests := []struct {
		name   string
		act    func(e *env, cancel context.CancelFunc)
		code   Code
		gate   string
		reason string
	}{
		{
			name: "session Done closes while queued",
			act:  func(e *env, cancel context.CancelFunc) { e.cl.sess0().kill() },
			code: CodeBusy, gate: "session", reason: "etcd session lost while waiting for the cluster lock",
		},
		{
			name: "stopped while queued",
			act:  func(e *env, cancel context.CancelFunc) { cancel() },
			code: CodeBlocked, gate: "hold", reason: "stopped while waiting for the cluster lock",
		},
		{
			name: "max_hold_wait while queued",
			act:  func(e *env, cancel context.CancelFunc) {},
			code: CodeBusy, gate: "lock", reason: "max_hold_wait passed while waiting for the cluster lock",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := holdEnv()
				e.cl.lockTok <- struct{}{} // an operator holds P/lock
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				done := make(chan error, 1)
				go func() { done <- e.coord(t).Hold(ctx) }()
				synctest.Wait()
				if len(done) != 0 {
					t.Fatal("holder did not queue behind the operator's lock")
				}
				tc.act(e, cancel)
				ce := wantErr(t, <-done, tc.code, tc.gate)
				if !strings.Contains(ce.Reason, tc.reason) {
					t.Errorf("reason = %q, want %q", ce.Reason, tc.reason)
				}
				s := e.cl.session(t)
				acquired, unlocks, closes := s.counts()
				if acquired != 0 || unlocks != 0 || closes != 1 {
					t.Errorf("acquired %d unlocks %d closes %d; want 0 0 1", acquired, unlocks, closes)
				}
				if n := len(e.rec.only("session.AcquireSlot", "rebooter.", "detector.")); n != 0 {
					t.Errorf("decided without the lock: %v", e.rec.list())
				}
				<-e.cl.lockTok // the operator's lock is still there
			})
		})
	}
}

// TestHoldStoppedDuringBackoff: SIGTERM while backing off after a blocked
// gate ends the holder with exit 5; the mutex was already released.
func TestHoldStoppedDuringBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := holdEnv()
		e.cl.pause = &Pause{Reason: "freeze", By: "ops"}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- e.coord(t).Hold(ctx) }()
		synctest.Wait()
		if !e.cl.lockFree() {
			t.Fatal("mutex held while backing off")
		}
		cancel()
		ce := wantErr(t, <-done, CodeBlocked, "hold")
		if !strings.Contains(ce.Reason, "stopped while backing off") {
			t.Errorf("reason = %q", ce.Reason)
		}
		holdInvariants(t, e)
	})
}

// TestHoldSessionLostDuringBackoff: the lease expires while backing off.
func TestHoldSessionLostDuringBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := holdEnv()
		e.win.verdict = WindowVerdict{Reason: "closed"}
		done := make(chan error, 1)
		go func() { done <- e.coord(t).Hold(t.Context()) }()
		synctest.Wait()
		e.cl.sess0().kill()
		wantErr(t, <-done, CodeBusy, "session")
		holdInvariants(t, e)
	})
}

// TestHoldTwoHoldersSerialise: two nodes with max_concurrent 1; the second
// waits for the first node's slot, which its post-boot check releases.
func TestHoldTwoHoldersSerialise(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := holdEnv()
		b := holdEnv()
		// b shares a's cluster, as node n2.
		b.cl, b.rec = a.cl, a.rec
		b.opt.Node = "n2"
		b.rb = &fakeRebooter{rec: a.rec, cl: a.cl, node: "n2"}
		b.host = &fakeHost{rec: a.rec, bootID: "boot-n2", requested: map[string]bool{}}

		if err := a.coord(t).Hold(t.Context()); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- b.coord(t).Hold(t.Context()) }()
		synctest.Wait()
		if len(done) != 0 || len(b.rb.calls()) != 0 {
			t.Fatal("second node rebooted while the first holds its slot")
		}
		// n1 comes back: its check releases the slot.
		a.host.bootID = "boot-3"
		a.det.set(detNo)
		if err := a.coord(t).Check(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if len(b.rb.calls()) != 1 || !b.rb.hadSlot || !b.rb.lockWasFree {
			t.Errorf("second node's reboot: calls %v slot %v free %v", b.rb.calls(), b.rb.hadSlot, b.rb.lockWasFree)
		}
		want := []string{EventSlotTaken, EventRebootRequested, EventCompleted, EventSlotTaken, EventRebootRequested}
		if got := a.cl.eventNames(); !slices.Equal(got, want) {
			t.Errorf("history = %v\nwant      %v", got, want)
		}
	})
}

// The service manager hears READY once the session exists, a STATUS line per
// state a human reads in `systemctl status`, and the watchdog is started.
func TestHoldNotifies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := holdEnv()
		e.notify = &fakeNotifier{}
		if err := e.coord(t).Hold(t.Context()); err != nil {
			t.Fatalf("Hold: %v", err)
		}
		synctest.Wait()
		n := e.notify
		if n.ready != 1 || n.watchdog != 1 {
			t.Errorf("ready %d, watchdog %d; want 1 and 1", n.ready, n.watchdog)
		}
		lines := n.lines()
		want := []string{"waiting: queued for the cluster lock, position 1", "rebooting: " + detYes.Reason}
		if len(lines) < 2 || lines[0] != want[0] || lines[len(lines)-1] != want[1] {
			t.Errorf("status lines = %q, want first %q and last %q", lines, want[0], want[1])
		}
	})
}

// A slot whose deadline passed before the reboot call is given back and
// the node does not reboot (others may free an overdue slot).
func TestHoldNoRebootPastSlotDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := holdEnv()
		e.opt.MaxRebootDuration = 0 // the deadline is the moment the slot was taken
		err := e.coord(t).Hold(t.Context())
		wantErr(t, err, CodeBusy, "slot")
		if n := len(e.rb.calls()); n != 0 {
			t.Fatalf("rebooted %d times on an overdue slot", n)
		}
		if _, has := e.cl.slot(self); has {
			t.Error("overdue slot kept")
		}
		if got := e.cl.eventNames(); !slices.Equal(got, []string{EventSlotTaken, EventRebootRequested, EventAborted}) {
			t.Errorf("history = %v", got)
		}
		holdInvariants(t, e)
	})
}

// The shutdown the holder asked for stops it (SIGTERM cancels its context)
// while the reboot call is still in flight: the call must not be cut short,
// and a successful call keeps the slot (the e2e suite saw two nodes down at
// once when it was).
func TestHoldRebootCallSurvivesStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := holdEnv()
		ctx, stop := context.WithCancel(t.Context())
		defer stop()
		e.rb.during = stop
		if err := e.coord(t).Hold(ctx); err != nil {
			t.Fatalf("Hold = %v, want nil (the reboot was requested)", err)
		}
		if e.rb.ctxErr != nil {
			t.Fatalf("reboot call's context ended with the holder's: %v", e.rb.ctxErr)
		}
		if _, has := e.cl.slot(self); !has {
			t.Fatal("slot released although the reboot was requested")
		}
	})
}

// A holder that queued behind at least max_concurrent others learns that
// the slots are full from its own view (slots, pause, settings) and waits
// without reading every member and alive record; when a slot frees it reads
// the whole cluster once, runs every gate and takes the slot.
func TestHoldFullSlotsFromOwnView(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := holdEnv()
		e.opt.MaxHoldWait = time.Hour
		e.cl.foreign = []Waiter{{Node: "n3"}} // queued ahead of us
		e.cl.putSlot(Slot{Node: "n2", Reason: "other", AcquiredAt: time.Now(), Deadline: time.Now().Add(time.Hour)})
		done := make(chan error, 1)
		go func() { done <- e.coord(t).Hold(t.Context()) }()
		synctest.Wait()
		e.cl.mu.Lock()
		gv := e.cl.gateViews
		e.cl.mu.Unlock()
		if gv != 0 || e.rec.last("cluster.WaitChange") < 0 {
			t.Fatalf("%d full reads before waiting (want 0), waiting: %v", gv, e.rec.last("cluster.WaitChange") >= 0)
		}
		if a, _ := lastAlive(t, e); a.State != StateWaiting || !strings.Contains(a.Blocked, "1 of 1 slots in use") {
			t.Errorf("alive while waiting = %+v", a)
		}
		e.cl.dropSlot("n2")
		wantErr(t, <-done, CodeOK, "")
		holdInvariants(t, e)
		if e.cl.gateViews != 1 || e.rec.count("policies.ClusterHealth") != 1 {
			t.Errorf("%d full reads and %d policy checks after the slot freed, want 1 and 1", e.cl.gateViews, e.rec.count("policies.ClusterHealth"))
		}
		if _, ok := e.cl.slot(self); !ok || len(e.rb.calls()) != 1 {
			t.Error("no slot or no reboot after the wait")
		}
	})
}

// A paused cluster is not waited out under the lock, whatever the slots:
// the full gate list blocks on the pause and the holder backs off.
func TestHoldFullSlotsPausedBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := holdEnv()
		e.opt.MaxHoldWait = time.Minute
		e.cl.foreign = []Waiter{{Node: "n3"}}
		e.cl.putSlot(Slot{Node: "n2", Reason: "other", AcquiredAt: time.Now(), Deadline: time.Now().Add(time.Hour)})
		e.cl.pause = &Pause{Reason: "maintenance", By: "op", At: time.Now()}
		err := e.coord(t).Hold(t.Context())
		wantErr(t, err, CodeBlocked, "pause")
		holdInvariants(t, e)
		if e.rec.count("cluster.WaitChange") != 0 {
			t.Error("waited for a slot although the cluster is paused")
		}
	})
}
