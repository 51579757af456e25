package reboot

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
)

func newLogind(addr string) *Logind {
	return &Logind{
		WallMessage: "clusterrebootd: coordinated reboot ({reason})",
		Timeout:     5 * time.Second,
		Dial:        func(ctx context.Context) (*dbus.Conn, error) { return connect(ctx, addr) },
	}
}

func TestLogindReboot(t *testing.T) {
	addr := startBus(t)
	denied := busErr("org.freedesktop.DBus.Error.AccessDenied", "Access denied")
	inhibited := busErr("org.freedesktop.login1.OperationInProgress", "The operation inhibition has been requested for is already running")
	tests := []struct {
		name      string
		wall      string
		rebootErr *dbus.Error
		wallErr   *dbus.Error
		wantCalls []string
		wantErr   string // "" → success
		wantLog   string
	}{
		{name: "ok", wall: "reboot ({reason})",
			wantCalls: []string{"SetWallMessage(reboot (kernel 6.1), true)", "Reboot(false)"}},
		{name: "no wall message", wall: "", wantCalls: []string{"Reboot(false)"}},
		{name: "wall message fails: still reboots", wall: "x", wallErr: denied,
			wantCalls: []string{"SetWallMessage(x, true)", "Reboot(false)"}, wantLog: "AccessDenied"},
		{name: "refused", wall: "", rebootErr: denied, wantCalls: []string{"Reboot(false)"},
			wantErr: "org.freedesktop.DBus.Error.AccessDenied: Access denied"},
		{name: "inhibited", wall: "", rebootErr: inhibited, wantCalls: []string{"Reboot(false)"},
			wantErr: "OperationInProgress"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeLogind(t, addr)
			f.set(func(f *fakeLogind) { f.rebootErr, f.wallErr = tc.rebootErr, tc.wallErr })
			var buf bytes.Buffer
			l := newLogind(addr)
			l.WallMessage = tc.wall
			l.Logger = slog.New(slog.NewTextHandler(&buf, nil))
			err := l.Reboot(context.Background(), "kernel 6.1")
			if tc.wantErr == "" && err != nil {
				t.Fatalf("Reboot: %v", err)
			}
			if tc.wantErr != "" {
				if !errors.Is(err, ErrLogind) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want ErrLogind with %q", err, tc.wantErr)
				}
				// logind answered: a definite refusal, the slot may go.
				if !errors.Is(err, ErrRefused) {
					t.Fatalf("err = %v, want ErrRefused for an error reply", err)
				}
				var de dbus.Error
				if !errors.As(err, &de) || de.Name != tc.rebootErr.Name {
					t.Fatalf("D-Bus error not in the chain: %v", err)
				}
			}
			if got := f.recorded(); !reflect.DeepEqual(got, tc.wantCalls) {
				t.Fatalf("calls %q, want %q", got, tc.wantCalls)
			}
			if tc.wantLog != "" && !strings.Contains(buf.String(), tc.wantLog) {
				t.Fatalf("log lacks %q:\n%s", tc.wantLog, buf.String())
			}
		})
	}
}

// A logind that never answers is an error after the timeout, not a hang and
// never a success.
func TestLogindTimeout(t *testing.T) {
	addr := startBus(t)
	f := newFakeLogind(t, addr)
	f.set(func(f *fakeLogind) { f.hang = true })
	l := newLogind(addr)
	l.Timeout = 200 * time.Millisecond
	if err := l.Reboot(context.Background(), "r"); !errors.Is(err, ErrLogind) || !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrRefused) {
		t.Fatalf("Reboot err = %v, want ErrLogind and deadline exceeded, not ErrRefused (no answer: uncertain)", err)
	}
	if s, err := l.Blocking(context.Background()); !errors.Is(err, ErrLogind) || !errors.Is(err, context.DeadlineExceeded) || s != "" {
		t.Fatalf("Blocking = %q, %v; want ErrLogind and deadline exceeded", s, err)
	}
}

// logind accepted the reboot and was stopped by the shutdown before its
// reply went out: the bus answers NoReply. That is no refusal — the reboot
// is under way — so the holder must keep its slot (found by the chaos
// matrix: a slot released this way let a second node reboot at once).
func TestLogindDisconnectsWithoutReply(t *testing.T) {
	addr := startBus(t)
	f := newFakeLogind(t, addr)
	f.set(func(f *fakeLogind) { f.disconnect = true })
	l := newLogind(addr)
	err := l.Reboot(context.Background(), "r")
	if err == nil || !errors.Is(err, ErrLogind) || errors.Is(err, ErrRefused) {
		t.Fatalf("Reboot err = %v, want ErrLogind, not ErrRefused (the reboot may be under way)", err)
	}
	var de dbus.Error
	if !errors.As(err, &de) || de.Name != "org.freedesktop.DBus.Error.NoReply" {
		t.Fatalf("err = %v, want the bus's NoReply", err)
	}
}

// A bus socket that accepts and then drops the connection during the
// handshake, as dbus-daemon does while the machine shuts down: the node is
// most likely going down, so this is uncertain (keep the slot), unlike a
// socket that does not exist (TestLogindNoBus: refused).
func TestLogindBusDropsHandshake(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bus")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	l := newLogind("unix:path=" + path)
	err = l.Reboot(context.Background(), "r")
	if err == nil || !errors.Is(err, ErrLogind) || errors.Is(err, ErrRefused) {
		t.Fatalf("Reboot err = %v, want ErrLogind, not ErrRefused (the bus broke: the node may be going down)", err)
	}
}

// Nobody owns org.freedesktop.login1: an error.
func TestLogindAbsent(t *testing.T) {
	addr := startBus(t)
	l := newLogind(addr)
	if err := l.Reboot(context.Background(), "r"); !errors.Is(err, ErrLogind) || !strings.Contains(err.Error(), "ServiceUnknown") {
		t.Fatalf("err = %v", err)
	}
}

func TestLogindNoBus(t *testing.T) {
	l := newLogind("unix:path=" + t.TempDir() + "/none")
	if err := l.Reboot(context.Background(), "r"); !errors.Is(err, ErrLogind) || !errors.Is(err, ErrRefused) {
		t.Fatalf("Reboot err = %v", err)
	}
	if _, err := l.Blocking(context.Background()); !errors.Is(err, ErrLogind) {
		t.Fatalf("Blocking err = %v", err)
	}
}

// The default dial reaches whatever DBUS_SYSTEM_BUS_ADDRESS names.
func TestLogindDefaultDial(t *testing.T) {
	addr := startBus(t)
	f := newFakeLogind(t, addr)
	t.Setenv("DBUS_SYSTEM_BUS_ADDRESS", addr)
	l := &Logind{}
	if err := l.Reboot(context.Background(), "r"); err != nil {
		t.Fatalf("Reboot: %v", err)
	}
	if got := f.recorded(); !reflect.DeepEqual(got, []string{"Reboot(false)"}) {
		t.Fatalf("calls %q", got)
	}
}

func TestBlocking(t *testing.T) {
	addr := startBus(t)
	tests := []struct {
		name    string
		list    []inhibitor
		listErr *dbus.Error
		want    string
		wantErr bool
	}{
		{name: "none", want: ""},
		{name: "block shutdown", list: []inhibitor{{"shutdown", "backup", "nightly dump", "block", 0, 812}},
			want: "backup (nightly dump, pid 812, uid 0)"},
		{name: "block among several", list: []inhibitor{{"sleep:shutdown:idle", "GNOME", "unsaved work", "block", 1000, 44}},
			want: "GNOME (unsaved work, pid 44, uid 1000)"},
		{name: "delay shutdown does not block", list: []inhibitor{{"shutdown", "ModemManager", "modem", "delay", 0, 9}}},
		{name: "block-weak does not block root", list: []inhibitor{{"shutdown", "app", "weak", "block-weak", 0, 9}}},
		{name: "block sleep only", list: []inhibitor{{"sleep:handle-lid-switch", "upower", "lid", "block", 0, 7}}},
		{name: "shutdown must be a whole word", list: []inhibitor{{"shutdownish", "x", "y", "block", 0, 1}}},
		{name: "several blockers", list: []inhibitor{
			{"shutdown", "a", "why a", "block", 0, 1},
			{"sleep", "b", "why b", "block", 0, 2},
			{"shutdown", "c", "why c", "delay", 0, 3},
			{"idle:shutdown", "d", "why d", "block", 5, 4},
		}, want: "a (why a, pid 1, uid 0); d (why d, pid 4, uid 5)"},
		{name: "list error", listErr: busErr("org.freedesktop.DBus.Error.AccessDenied", "no"), wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeLogind(t, addr)
			f.set(func(f *fakeLogind) { f.inhibitors, f.listErr = tc.list, tc.listErr })
			got, err := newLogind(addr).Blocking(context.Background())
			if tc.wantErr {
				if !errors.Is(err, ErrLogind) || !strings.Contains(err.Error(), "AccessDenied") || got != "" {
					t.Fatalf("Blocking = %q, %v; want an ErrLogind", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Blocking = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
