package coordinator

import (
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fakeRecorder records the metrics hooks.
type fakeRecorder struct {
	mu        sync.Mutex
	waits     []time.Duration
	completed int
	observed  []Observation
}

func (r *fakeRecorder) LockAcquired(d time.Duration) {
	r.mu.Lock()
	r.waits = append(r.waits, d)
	r.mu.Unlock()
}

func (r *fakeRecorder) RebootCompleted() {
	r.mu.Lock()
	r.completed++
	r.mu.Unlock()
}

func (r *fakeRecorder) Observed(o Observation) {
	r.mu.Lock()
	r.observed = append(r.observed, o)
	r.mu.Unlock()
}

func (r *fakeRecorder) last() Observation {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.observed) == 0 {
		return Observation{OverdueSlots: -1}
	}
	return r.observed[len(r.observed)-1]
}

func TestCheckRecords(t *testing.T) {
	tests := []struct {
		name      string
		setup     func(e *env)
		code      Code
		completed int
		observed  Observation
	}{
		{"nothing needed", func(e *env) { e.det.set(detNo) }, CodeOK, 0, Observation{}},
		{"needed, holder started", func(e *env) {}, CodeOK, 0, Observation{RebootRequired: true}},
		{"needed, blocked, another node's slot overdue", func(e *env) {
			e.cl.putSlot(Slot{Node: "n2", BootID: "x", AcquiredAt: t0.Add(-2 * time.Hour), Deadline: t0.Add(-time.Hour)})
			e.cl.putSlot(Slot{Node: "n3", BootID: "y", AcquiredAt: t0.Add(-time.Minute), Deadline: t0.Add(time.Hour)})
			e.win.closedN = 1
		}, CodeBlocked, 0, Observation{RebootRequired: true, OverdueSlots: 1}},
		{"detector error", func(e *env) { e.det.set(Detection{Need: NeedUnknown, Reason: "exit 9"}) }, CodeDetector, 0, Observation{}},
		{"post-boot: released", func(e *env) { ownSlot(e, nil); e.det.set(detNo) }, CodeOK, 1, Observation{}},
		{"post-boot: state file fails, slot kept", func(e *env) { ownSlot(e, nil); e.st.saveErr = errBoom }, CodeInternal, 0, Observation{SlotHeld: true}},
		{"post-boot: unhealthy, slot kept", func(e *env) { ownSlot(e, nil); e.nh.ok = false }, CodeHealth, 0, Observation{SlotHeld: true}},
		{"own slot, same boot, reboot never happened", func(e *env) {
			ownSlot(e, func(s *Slot) { s.BootID = "boot-2" })
			e.det.set(detNo)
		}, CodeOK, 0, Observation{}},
		{"own slot, same boot, reboot in progress", func(e *env) {
			ownSlot(e, func(s *Slot) { s.BootID = "boot-2" })
			e.host.requested["boot-2"] = true
		}, CodeOK, 0, Observation{SlotHeld: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv()
			tc.setup(e)
			c := e.coord(t)
			r := &fakeRecorder{}
			c.Recorder = r
			wantErr(t, c.Check(t.Context()), tc.code, "")
			if r.completed != tc.completed {
				t.Errorf("reboots completed = %d, want %d", r.completed, tc.completed)
			}
			if got := r.last(); got != tc.observed {
				t.Errorf("last observation = %+v, want %+v (all: %+v)", got, tc.observed, r.observed)
			}
			if len(r.waits) != 0 {
				t.Errorf("check recorded lock waits %v", r.waits)
			}
		})
	}
}

func TestCheckWithoutRecorder(t *testing.T) {
	e := newEnv()
	ownSlot(e, nil)
	wantErr(t, e.coord(t).Check(t.Context()), CodeBlocked, "reboot-loop-guard")
	r := e.coord(t).recorder()
	if _, ok := r.(noRecorder); !ok {
		t.Fatalf("default recorder = %T", r)
	}
	r.LockAcquired(time.Second) // records nothing, never blocks
	r.RebootCompleted()
	r.Observed(Observation{})
}

func TestHoldRecordsLockWaits(t *testing.T) {
	t.Run("one wait per attempt", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := holdEnv()
			e.win.closedN = 1 // the first attempt is blocked under the lock
			c := e.coord(t)
			r := &fakeRecorder{}
			c.Recorder = r
			wantErr(t, c.Hold(t.Context()), CodeOK, "")
			if !slices.Equal(r.waits, []time.Duration{0, 0}) {
				t.Errorf("lock waits = %v, want two of 0s", r.waits)
			}
			if r.completed != 0 || len(r.observed) != 0 {
				t.Errorf("holder recorded %d reboots, %d observations", r.completed, len(r.observed))
			}
		})
	})
	t.Run("the time spent queued", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := holdEnv()
			e.cl.lockTok <- struct{}{} // another holder owns the mutex
			c := e.coord(t)
			r := &fakeRecorder{}
			c.Recorder = r
			done := make(chan error)
			go func() { done <- c.Hold(t.Context()) }()
			time.Sleep(7 * time.Second)
			synctest.Wait()
			<-e.cl.lockTok
			wantErr(t, <-done, CodeOK, "")
			if !slices.Equal(r.waits, []time.Duration{7 * time.Second}) {
				t.Errorf("lock waits = %v, want [7s]", r.waits)
			}
		})
	})
}
