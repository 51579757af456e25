package systemd

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"
)

func TestNextElapse(t *testing.T) {
	addr := startBus(t)
	f := newFakeSystemd(t, addr)
	at := time.Date(2031, 5, 6, 7, 8, 9, 123456000, time.UTC)
	f.set(func(f *fakeSystemd) {
		f.timers["next.timer"] = uint64(at.UnixMicro())
		f.timers["idle.timer"] = uint64(0)
		f.timers["inf.timer"] = uint64(math.MaxUint64)
		f.timers["huge.timer"] = uint64(math.MaxInt64) + 1
		f.timers["odd.timer"] = "soon"
	})
	m := Manager{Timeout: 5 * time.Second, Dial: dialer(addr)}
	tests := []struct {
		unit    string
		want    time.Time
		wantErr string
	}{
		{"next.timer", at, ""},
		{"idle.timer", time.Time{}, ""},
		{"inf.timer", time.Time{}, ""},
		{"huge.timer", time.Time{}, "out of range"},
		{"odd.timer", time.Time{}, "want uint64"},
		{"missing.timer", time.Time{}, "UnknownInterface"},
	}
	for _, tc := range tests {
		t.Run(tc.unit, func(t *testing.T) {
			got, err := m.NextElapse(context.Background(), tc.unit)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("NextElapse = %v, %v; want error with %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || !got.Equal(tc.want) {
				t.Fatalf("NextElapse = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
	f.set(func(f *fakeSystemd) { f.unitErr = busErr("org.freedesktop.DBus.Error.AccessDenied", "denied") })
	if _, err := m.NextElapse(context.Background(), "next.timer"); err == nil || !strings.Contains(err.Error(), "AccessDenied") {
		t.Fatalf("bus error: %v", err)
	}
}

func TestNextElapseNoBus(t *testing.T) {
	m := Manager{Timeout: time.Second, Dial: dialer("unix:path=" + t.TempDir() + "/none")}
	if _, err := m.NextElapse(context.Background(), "x.timer"); err == nil {
		t.Fatal("want an error without a bus")
	}
}
