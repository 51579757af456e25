package systemd

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
)

const holdUnit = "clusterrebootd-hold.service"

func newHolder(addr string) *TransientHolder {
	return &TransientHolder{
		Unit:     holdUnit,
		Argv:     []string{"/usr/bin/clusterrebootd", "--config", "/etc/clusterrebootd/config.toml", "hold"},
		Watchdog: 30 * time.Second,
		Timeout:  5 * time.Second,
		Dial:     dialer(addr),
	}
}

func TestActive(t *testing.T) {
	addr := startBus(t)
	tests := []struct {
		name       string
		state      string // "" → no such unit
		noSuchUnit bool
		unitErr    *dbus.Error
		want       bool
		wantErr    error
	}{
		{name: "active", state: "active", want: true},
		{name: "activating", state: "activating", want: true},
		{name: "deactivating", state: "deactivating", want: true},
		{name: "reloading", state: "reloading", want: true},
		{name: "refreshing", state: "refreshing", want: true},
		{name: "inactive", state: "inactive", want: false},
		{name: "failed", state: "failed", want: false},
		{name: "not loaded (systemd loads it: inactive)", want: false},
		{name: "not loaded (NoSuchUnit)", noSuchUnit: true, want: false},
		{name: "unknown state", state: "maintenance", wantErr: ErrUnitState},
		{name: "bus error", state: "inactive", unitErr: busErr("org.freedesktop.DBus.Error.AccessDenied", "denied")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeSystemd(t, addr)
			if tc.state != "" {
				f.setUnit(holdUnit, tc.state)
			}
			f.set(func(f *fakeSystemd) { f.noSuchUnit, f.unitErr = tc.noSuchUnit, tc.unitErr })
			got, err := newHolder(addr).Active(context.Background())
			switch {
			case tc.unitErr != nil:
				if err == nil || !strings.Contains(err.Error(), tc.unitErr.Name) {
					t.Fatalf("Active = %v, %v; want the bus error", got, err)
				}
			case tc.wantErr != nil:
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Active = %v, %v; want %v", got, err, tc.wantErr)
				}
			default:
				if err != nil || got != tc.want {
					t.Fatalf("Active = %v, %v; want %v", got, err, tc.want)
				}
			}
			if err != nil && got {
				t.Fatal("an error must not come with true")
			}
		})
	}
}

func TestActiveNoBus(t *testing.T) {
	h := newHolder("unix:path=" + t.TempDir() + "/none")
	if _, err := h.Active(context.Background()); !errors.Is(err, ErrNoBus) {
		t.Fatalf("err = %v, want ErrNoBus", err)
	}
}

func TestStartProperties(t *testing.T) {
	addr := startBus(t)
	f := newFakeSystemd(t, addr)
	h := newHolder(addr)
	h.StopTimeout = 45 * time.Second
	if err := h.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	starts, _ := f.calls()
	if len(starts) != 1 {
		t.Fatalf("%d StartTransientUnit calls, want 1", len(starts))
	}
	c := starts[0]
	if c.Name != holdUnit || c.Mode != "fail" {
		t.Fatalf("StartTransientUnit(%q, %q)", c.Name, c.Mode)
	}
	want := map[string]any{
		"Description":  "clusterrebootd lock holder",
		"Type":         "notify",
		"NotifyAccess": "main",
		"KillMode":     "mixed",
		// (aiai): exit statuses 3 4 5 (blocked) count as success.
		"SuccessExitStatus": []any{[]int32{3, 4, 5}, []int32{}},
		"TimeoutStopUSec":   uint64(45_000_000),
		"WatchdogUSec":      uint64(30_000_000),
	}
	for k, v := range want {
		if !reflect.DeepEqual(c.Props[k], v) {
			t.Errorf("%s = %#v, want %#v", k, c.Props[k], v)
		}
	}
	// ExecStart is a(sasb): path, argv, ignore-failure (must be false).
	exec, ok := c.Props["ExecStart"].([][]any)
	if !ok || len(exec) != 1 || len(exec[0]) != 3 {
		t.Fatalf("ExecStart = %#v", c.Props["ExecStart"])
	}
	if exec[0][0] != h.Argv[0] || !reflect.DeepEqual(exec[0][1], h.Argv) || exec[0][2] != false {
		t.Fatalf("ExecStart = %#v", exec[0])
	}
	// The rest is the sandbox (TestSandbox*).
	if len(c.Props) != len(want)+1+len(h.sandbox()) {
		t.Fatalf("unexpected properties: %v", c.Props)
	}
	if c.Props["ProtectSystem"] != "strict" || c.Props["NoNewPrivileges"] != true {
		t.Fatalf("the started unit is not sandboxed: %v", c.Props)
	}

}

func TestStartDefaults(t *testing.T) {
	addr := startBus(t)
	f := newFakeSystemd(t, addr)
	h := newHolder(addr)
	h.Watchdog, h.Description = 0, "custom"
	if err := h.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	starts, _ := f.calls()
	p := starts[0].Props
	if _, ok := p["WatchdogUSec"]; ok {
		t.Fatal("WatchdogUSec set without a watchdog")
	}
	if p["TimeoutStopUSec"] != uint64(DefaultStopTimeout/time.Microsecond) || p["Description"] != "custom" {
		t.Fatalf("props = %v", p)
	}
}

func TestStart(t *testing.T) {
	addr := startBus(t)
	denied := busErr("org.freedesktop.DBus.Error.AccessDenied", "Access denied")
	tests := []struct {
		name       string
		existing   string // ActiveState of a unit already there; "" → none
		result     string // JobRemoved result
		startErr   *dbus.Error
		unitErr    *dbus.Error
		resetKeeps bool
		timeout    time.Duration
		wantErr    error
		wantText   string
		wantStarts int
		wantResets int
		wantLog    string
		mainExit   *mainExit // the failed holder's main process, as systemd reports it
		wantStatus int       // JobError.ExitStatus
	}{
		{name: "done", result: "done", wantStarts: 1, wantLog: "holder-started"},
		{name: "failed", result: "failed", wantErr: ErrJob, wantText: `"failed"`, wantStarts: 1},
		{name: "failed: holder exited 6", result: "failed", mainExit: &mainExit{result: "exit-code", code: 1, status: 6},
			wantErr: ErrJob, wantText: "exited with status 6 before it was ready (journalctl -u " + holdUnit + ")", wantStarts: 1, wantStatus: 6},
		{name: "failed: holder exited 2", result: "failed", mainExit: &mainExit{result: "exit-code", code: 1, status: 2},
			wantErr: ErrJob, wantText: "status 2", wantStarts: 1, wantStatus: 2},
		{name: "failed: holder killed by SIGKILL", result: "failed", mainExit: &mainExit{result: "signal", code: 2, status: 9},
			wantErr: ErrJob, wantText: `service result "signal"`, wantStarts: 1},
		{name: "failed: service properties unreadable", result: "failed", mainExit: &mainExit{unreadable: true},
			wantErr: ErrJob, wantText: `start job result "failed" (journalctl`, wantStarts: 1},
		{name: "timeout result", result: "timeout", wantErr: ErrJob, wantText: `"timeout"`, wantStarts: 1},
		{name: "canceled", result: "canceled", wantErr: ErrJob, wantStarts: 1},
		{name: "dependency", result: "dependency", wantErr: ErrJob, wantStarts: 1},
		{name: "skipped", result: "skipped", wantErr: ErrJob, wantStarts: 1},
		{name: "no JobRemoved", result: "", timeout: 300 * time.Millisecond, wantErr: ErrJobTimeout, wantStarts: 1},
		{name: "exists active", existing: "active", result: "done", wantLog: "holder-running"},
		{name: "exists activating", existing: "activating", result: "done", wantLog: "holder-running"},
		{name: "exists failed: reset and retry", existing: "failed", result: "done", wantStarts: 1, wantResets: 1, wantLog: "holder-started"},
		{name: "exists inactive, reset does not help", existing: "inactive", resetKeeps: true, result: "done", wantErr: ErrUnitState, wantResets: 1},
		{name: "exists, state unreadable", existing: "active", unitErr: denied, result: "done", wantText: "state unknown"},
		{name: "exists, unknown state", existing: "maintenance", result: "done", wantErr: ErrUnitState},
		{name: "D-Bus error", startErr: denied, result: "done", wantText: "AccessDenied: Access denied"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeSystemd(t, addr)
			if tc.existing != "" {
				f.setUnit(holdUnit, tc.existing)
			}
			f.set(func(f *fakeSystemd) {
				f.jobResult, f.startErr, f.unitErr, f.resetKeeps = tc.result, tc.startErr, tc.unitErr, tc.resetKeeps
				f.mainExit = tc.mainExit
			})
			var buf bytes.Buffer
			h := newHolder(addr)
			h.Logger = slog.New(slog.NewTextHandler(&buf, nil))
			if tc.timeout > 0 {
				h.Timeout = tc.timeout
			}
			err := h.Start(context.Background())
			wantOK := tc.wantErr == nil && tc.wantText == ""
			switch {
			case wantOK && err != nil:
				t.Fatalf("Start: %v", err)
			case !wantOK && err == nil:
				t.Fatal("Start succeeded, want an error")
			case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			case tc.wantText != "" && !strings.Contains(err.Error(), tc.wantText):
				t.Fatalf("err = %v, want it to contain %q", err, tc.wantText)
			}
			var je *JobError
			if errors.As(err, &je) != (tc.wantErr == ErrJob) {
				t.Fatalf("err = %#v: JobError iff the job failed", err)
			}
			if je != nil && je.ExitStatus() != tc.wantStatus {
				t.Fatalf("ExitStatus() = %d, want %d (%v)", je.ExitStatus(), tc.wantStatus, err)
			}
			starts, resets := f.calls()
			if len(starts) != tc.wantStarts || len(resets) != tc.wantResets {
				t.Fatalf("%d starts, %d resets; want %d, %d", len(starts), len(resets), tc.wantStarts, tc.wantResets)
			}
			if tc.wantLog != "" && !strings.Contains(buf.String(), tc.wantLog) {
				t.Fatalf("log lacks %q:\n%s", tc.wantLog, buf.String())
			}
		})
	}
}

// A caller's cancellation ends the wait for the job.
func TestStartCancelled(t *testing.T) {
	addr := startBus(t)
	f := newFakeSystemd(t, addr)
	ctx, cancel := context.WithCancelCause(context.Background())
	f.set(func(f *fakeSystemd) {
		f.jobResult = ""
		f.onStart = func() { go cancel(errors.New("shutting down")) }
	})
	h := newHolder(addr)
	err := h.Start(ctx)
	if err == nil || !strings.Contains(err.Error(), "shutting down") {
		t.Fatalf("err = %v, want the cancellation cause", err)
	}
}

func TestStartInvalid(t *testing.T) {
	for _, h := range []*TransientHolder{
		{Unit: "", Argv: []string{"/bin/true"}},
		{Unit: ".service", Argv: []string{"/bin/true"}},
		{Unit: "hold.timer", Argv: []string{"/bin/true"}},
		{Unit: holdUnit},
		{Unit: holdUnit, Argv: []string{"clusterrebootd", "hold"}},
	} {
		if err := h.Start(context.Background()); err == nil {
			t.Errorf("Start(%q, %q) accepted", h.Unit, h.Argv)
		}
	}
	h := newHolder("unix:path=" + t.TempDir() + "/none")
	if err := h.Start(context.Background()); !errors.Is(err, ErrNoBus) {
		t.Fatalf("no bus: err = %v", err)
	}
}
