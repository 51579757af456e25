package coordinator

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestPause(t *testing.T) {
	tests := []struct {
		name, reason string
		err          error
		code         Code
	}{
		{"reason required", "", nil, CodeConfig},
		{"paused", "kernel regression", nil, CodeOK},
		{"longest reason", strings.Repeat("é", MaxPauseReason/2), nil, CodeOK},
		{"reason too long", strings.Repeat("x", MaxPauseReason+1), nil, CodeConfig},
		{"newline forges a status line", "x\nn2  yes  yes  no  idle", nil, CodeConfig},
		{"carriage return", "x\ry", nil, CodeConfig},
		{"escape sequence", "x\x1b[2Jy", nil, CodeConfig},
		{"C1 control", "x\u0085y", nil, CodeConfig},
		{"line separator", "x\u2028y", nil, CodeConfig},
		{"invalid UTF-8", "x\xffy", nil, CodeConfig},
		{"tab", "x\ty", nil, CodeConfig},
		{"etcd down", "x", unavailable("put"), CodeEtcd},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv()
			e.cl.setPauseErr = tc.err
			err := e.coord(t).Pause(t.Context(), tc.reason, "alice")
			wantErr(t, err, tc.code, "")
			if tc.code == CodeConfig && e.rec.count("cluster.SetPause") != 0 {
				t.Error("SetPause called with a refused reason")
			}
			if tc.code == CodeOK {
				if p := e.cl.pause; p == nil || p.Reason != tc.reason || p.By != "alice" || !p.At.Equal(t0) {
					t.Errorf("pause = %+v", p)
				}
			}
		})
	}
}

func TestResume(t *testing.T) {
	e := newEnv()
	c := e.coord(t)
	if was, err := c.Resume(t.Context(), "bob"); err != nil || was {
		t.Errorf("resume without pause = %v, %v", was, err)
	}
	e.cl.pause = &Pause{Reason: "x"}
	if was, err := c.Resume(t.Context(), "bob"); err != nil || !was || e.cl.pause != nil {
		t.Errorf("resume = %v, %v, pause %+v", was, err, e.cl.pause)
	}
	e.cl.clearPauseErr = unavailable("delete")
	_, err := c.Resume(t.Context(), "bob")
	wantErr(t, err, CodeEtcd, "etcd")
}

func TestSetMax(t *testing.T) {
	for _, tc := range []struct {
		n    int
		err  error
		code Code
	}{
		{0, nil, CodeConfig},
		{-3, nil, CodeConfig},
		{MaxSetMax + 1, nil, CodeConfig},
		{MaxSetMax, nil, CodeOK},
		{1, nil, CodeOK},
		{5, nil, CodeOK},
		{2, unavailable("put"), CodeEtcd},
	} {
		e := newEnv()
		e.cl.setMaxErr = tc.err
		err := e.coord(t).SetMax(t.Context(), tc.n, "ops")
		wantErr(t, err, tc.code, "")
		if tc.code == CodeConfig && e.rec.count("cluster.SetMaxConcurrent") != 0 {
			t.Errorf("SetMax(%d) reached etcd", tc.n)
		}
		if tc.code == CodeOK && e.cl.settings != tc.n {
			t.Errorf("SetMax(%d): settings = %d", tc.n, e.cl.settings)
		}
	}
}

func TestRelease(t *testing.T) {
	t.Run("no slot", func(t *testing.T) {
		e := newEnv()
		_, err := e.coord(t).Release(t.Context(), "n2", "ops")
		ce := wantErr(t, err, CodeConfig, "release")
		if !errors.Is(err, ErrNoSlot) || !strings.Contains(ce.Reason, `"n2"`) {
			t.Errorf("err = %v", err)
		}
		if e.rec.count("cluster.ReleaseSlot") != 0 {
			t.Error("released a slot that does not exist")
		}
	})
	t.Run("released with history", func(t *testing.T) {
		e := newEnv()
		want := e.cl.putSlot(Slot{Node: "n2", BootID: "b-n2", Reason: "kernel", Deadline: t0.Add(-time.Hour)})
		got, err := e.coord(t).Release(t.Context(), "n2", "ops")
		if err != nil || got != want {
			t.Fatalf("Release = %+v, %v; want %+v", got, err, want)
		}
		if _, ok := e.cl.slot("n2"); ok {
			t.Error("slot still there")
		}
		ev := e.cl.events()
		if len(ev) != 1 || ev[0].Event != EventReleased || ev[0].Node != "n2" || ev[0].By != "ops" ||
			ev[0].BootID != "b-n2" || ev[0].Reason != "released by operator: kernel" || !ev[0].At.Equal(t0) {
			t.Errorf("history = %+v", ev)
		}
	})
	t.Run("view fails", func(t *testing.T) {
		e := newEnv()
		e.cl.viewErr = func(int) error { return unavailable("range") }
		_, err := e.coord(t).Release(t.Context(), "n2", "ops")
		wantErr(t, err, CodeEtcd, "etcd")
	})
	t.Run("release fails", func(t *testing.T) {
		e := newEnv()
		e.cl.putSlot(Slot{Node: "n2"})
		e.cl.releaseErr = unavailable("txn")
		s, err := e.coord(t).Release(t.Context(), "n2", "ops")
		wantErr(t, err, CodeEtcd, "etcd")
		if s.Node != "n2" {
			t.Errorf("slot not reported: %+v", s)
		}
	})
}

func TestAck(t *testing.T) {
	e := newEnv()
	e.st.st = State{RebootsForReason: map[string]int{"a": 1, "b": 2}, LastRebootReason: "a", LastRebootAt: t0}
	c := e.coord(t)
	cleared, err := c.Ack()
	if err != nil || !maps.Equal(cleared, map[string]int{"a": 1, "b": 2}) {
		t.Fatalf("Ack = %v, %v", cleared, err)
	}
	if st := e.st.get(); len(st.RebootsForReason) != 0 || st.LastRebootReason != "a" || !st.LastRebootAt.Equal(t0) {
		t.Errorf("state after ack = %+v", st)
	}
	if cleared, err := c.Ack(); err != nil || len(cleared) != 0 {
		t.Errorf("second Ack = %v, %v", cleared, err)
	}

	e.st.loadErr = errBoom
	_, err = c.Ack()
	wantErr(t, err, CodeInternal, "state")
	e.st.loadErr, e.st.saveErr = nil, errBoom
	_, err = c.Ack()
	wantErr(t, err, CodeInternal, "state")
}

func TestForget(t *testing.T) {
	e := newEnv()
	c := e.coord(t)
	if err := c.Forget(t.Context(), "n3"); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(e.cl.members, "n3") {
		t.Error("n3 still a member")
	}
	e.cl.forgetErr = errors.Join(errors.New("holds a slot"), ErrConflict)
	err := c.Forget(t.Context(), "n2")
	wantErr(t, err, CodeInternal, "etcd")
	if !errors.Is(err, ErrConflict) {
		t.Errorf("cause lost: %v", err)
	}
	e.cl.forgetErr = unavailable("txn")
	wantErr(t, c.Forget(t.Context(), "n2"), CodeEtcd, "etcd")
}
