package coordinator

import (
	"context"
	"errors"
	"testing"
)

// The session dies while the detector re-runs under the lock, so the
// detector's context is cancelled and it reports an error: that is a lost
// lock (exit 4, no reboot), not a detector error (exit 7) — found by a
// randomized safety batch, where the detector said "context canceled".
func TestHoldSessionLostDuringDetector(t *testing.T) {
	e := newEnv()
	e.det.hook = func(ctx context.Context) Detection {
		e.cl.mu.Lock()
		s := e.cl.sessions[len(e.cl.sessions)-1]
		e.cl.mu.Unlock()
		s.kill()
		<-ctx.Done()
		return Detection{Need: NeedUnknown, Detector: "file", Reason: "detect: file: " + ctx.Err().Error()}
	}
	err := e.coord(t).Hold(t.Context())
	wantErr(t, err, CodeBusy, "session")
	if !errors.Is(err, ErrLockLost) {
		t.Errorf("err = %v, want it to wrap ErrLockLost", err)
	}
	if e.rec.count("rebooter.Reboot") != 0 || e.rec.count("session.AcquireSlot") != 0 {
		t.Errorf("a dead session went on to the slot or the reboot: %v", e.rec.list())
	}
}
