package coordinator

import (
	"testing"
)

// The post-boot health script's view is read once per post-boot check:
// started together with the check's own read when the state file notes a
// reboot of ours from an earlier boot, else after it. An idle check (no
// slot, no note) never reads the whole cluster.
func TestCheckPrefetchesPostBootView(t *testing.T) {
	tests := []struct {
		name      string
		slot      bool
		note      string // SlotBootID in the state file
		gateViews int
		released  bool
	}{
		{"post-boot, noted in the state file", true, "boot-1", 1, true},
		{"post-boot, no note (state file lost)", true, "", 1, true},
		{"idle, no note", false, "", 0, false},
		{"idle, note of this boot (reboot still pending)", false, "boot-2", 0, false},
		{"note but the slot is gone (released by an operator)", false, "boot-1", 1, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv()
			e.det.set(detNo)
			if tc.slot {
				ownSlot(e, nil)
			}
			e.st.st.SlotBootID = tc.note
			wantErr(t, e.coord(t).Check(t.Context()), CodeOK, "")
			if e.cl.gateViews != tc.gateViews {
				t.Errorf("%d full reads, want %d", e.cl.gateViews, tc.gateViews)
			}
			if _, has := e.cl.slot(self); tc.slot && has == tc.released {
				t.Errorf("slot present = %v, want released = %v", has, tc.released)
			}
			if tc.released && e.rec.count("script.Run") != 1 {
				t.Errorf("script runs = %d, want 1", e.rec.count("script.Run"))
			}
		})
	}
}
