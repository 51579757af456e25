package systemd

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	sd "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"
)

// Without a reachable system bus the answer is an error, never a state.
func TestSystemStateNoBus(t *testing.T) {
	if _, err := os.Stat("/run/systemd/system"); err == nil {
		t.Skip("host runs systemd; covered by the e2e suite")
	}
	t.Setenv("DBUS_SYSTEM_BUS_ADDRESS", "unix:path="+t.TempDir()+"/none")
	st, err := Manager{Timeout: time.Second}.SystemState(context.Background())
	if !errors.Is(err, ErrNoBus) || st != "" {
		t.Fatalf("SystemState = %q, %v; want ErrNoBus", st, err)
	}
}

func TestSystemState(t *testing.T) {
	addr := startBus(t)
	f := newFakeSystemd(t, addr)
	m := Manager{Timeout: 5 * time.Second, Dial: dialer(addr)}
	tests := []struct {
		name    string
		value   any
		err     *dbus.Error
		want    string
		wantErr string
	}{
		{"running", "running", nil, "running", ""},
		{"degraded", "degraded", nil, "degraded", ""},
		{"quoted", `"starting"`, nil, "starting", ""},
		{"bus error", "running", busErr("org.freedesktop.DBus.Error.AccessDenied", "denied"), "", "AccessDenied"},
		{"wrong type", uint32(3), nil, "", "want string"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f.set(func(f *fakeSystemd) { f.systemState, f.stateErr = tc.value, tc.err })
			got, err := m.SystemState(context.Background())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || got != "" {
					t.Fatalf("SystemState = %q, %v; want error with %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("SystemState = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// The default dial reaches whatever DBUS_SYSTEM_BUS_ADDRESS names.
func TestSystemStateDefaultDial(t *testing.T) {
	addr := startBus(t)
	f := newFakeSystemd(t, addr)
	f.set(func(f *fakeSystemd) { f.systemState = "maintenance" })
	t.Setenv("DBUS_SYSTEM_BUS_ADDRESS", addr)
	got, err := Manager{}.SystemState(context.Background())
	if err != nil || got != "maintenance" {
		t.Fatalf("SystemState = %q, %v", got, err)
	}
}

// A systemd that never answers is an error once the timeout passed.
func TestSystemStateTimeout(t *testing.T) {
	addr := startBus(t)
	f := newFakeSystemd(t, addr)
	f.set(func(f *fakeSystemd) { f.systemState = "hang" })
	_, err := Manager{Timeout: 200 * time.Millisecond, Dial: dialer(addr)}.SystemState(context.Background())
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want deadline exceeded", err)
	}
}

// A dial that does not complete within the timeout is ErrNoBus.
func TestDialTimeout(t *testing.T) {
	stuck := func(ctx context.Context) (*sd.Conn, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	_, err := Manager{Timeout: 50 * time.Millisecond, Dial: stuck}.SystemState(context.Background())
	if !errors.Is(err, ErrNoBus) {
		t.Fatalf("err = %v, want ErrNoBus", err)
	}
	// A dial that succeeds only after the deadline is closed and refused.
	addr := startBus(t)
	late := func(ctx context.Context) (*sd.Conn, error) {
		<-ctx.Done()
		return dialer(addr)(context.Background())
	}
	_, err = Manager{Timeout: 50 * time.Millisecond, Dial: late}.SystemState(context.Background())
	if !errors.Is(err, ErrNoBus) {
		t.Fatalf("late dial: err = %v, want ErrNoBus", err)
	}
}
