package systemd

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// notifySocket listens like a service manager and points NOTIFY_SOCKET at
// itself.
func notifySocket(t *testing.T) *net.UnixConn {
	t.Helper()
	dir, err := os.MkdirTemp("", "crbd-notify")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "notify")
	l, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	t.Setenv("NOTIFY_SOCKET", path)
	return l
}

// recv reads one datagram; the deadline only guards against a hang.
func recv(t *testing.T, l *net.UnixConn) string {
	t.Helper()
	buf := make([]byte, 4096)
	l.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := l.Read(buf)
	if err != nil {
		t.Fatalf("no notification: %v", err)
	}
	return string(buf[:n])
}

// pending drains the datagrams already queued, without waiting.
func pending(t *testing.T, l *net.UnixConn) []string {
	t.Helper()
	rc, err := l.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for {
		buf := make([]byte, 4096)
		var n int
		var rerr error
		if err := rc.Read(func(fd uintptr) bool {
			n, _, rerr = syscall.Recvfrom(int(fd), buf, syscall.MSG_DONTWAIT)
			return true
		}); err != nil {
			t.Fatal(err)
		}
		if errors.Is(rerr, syscall.EAGAIN) {
			return out
		}
		if rerr != nil {
			t.Fatal(rerr)
		}
		out = append(out, string(buf[:n]))
	}
}

func TestNotifierMessages(t *testing.T) {
	l := notifySocket(t)
	n := NewNotifier(nil)
	tests := []struct {
		name string
		send func()
		want string
	}{
		{"ready", n.Ready, "READY=1"},
		{"stopping", n.Stopping, "STOPPING=1"},
		{"status", func() { n.Status("queued, position 2") }, "STATUS=queued, position 2"},
		{"status line breaks", func() { n.Status("waiting\nREADY=1\r") }, "STATUS=waiting READY=1 "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.send()
			if got := recv(t, l); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
	if extra := pending(t, l); len(extra) != 0 {
		t.Fatalf("unexpected notifications %q", extra)
	}
}

// Without NOTIFY_SOCKET nothing is sent and nothing complains; a socket
// that cannot be reached is logged.
func TestNotifierNoSocket(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	t.Setenv("NOTIFY_SOCKET", "")
	n := NewNotifier(log)
	n.Ready()
	n.Status("x")
	n.Stopping()
	if buf.Len() != 0 {
		t.Fatalf("logged without a socket: %s", buf.String())
	}
	t.Setenv("NOTIFY_SOCKET", filepath.Join(t.TempDir(), "gone"))
	n.Ready()
	if !strings.Contains(buf.String(), "sd_notify failed") || !strings.Contains(buf.String(), "state=READY") {
		t.Fatalf("failed send not logged: %s", buf.String())
	}
}

// WATCHDOG=1 goes out at once and every interval/2, only while healthy.
func TestRunWatchdog(t *testing.T) {
	l := notifySocket(t)
	var buf bytes.Buffer
	n := NewNotifier(slog.New(slog.NewTextHandler(&buf, nil)))
	script := []bool{true, true, false, false, true, false}
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		calls := 0
		healthy := func() bool {
			v := script[calls]
			calls++
			if calls == len(script) {
				cancel()
			}
			return v
		}
		start := time.Now()
		n.WatchdogInterval = 20 * time.Second
		n.Watchdog(ctx, healthy)
		if calls != len(script) {
			t.Fatalf("healthy called %d times, want %d", calls, len(script))
		}
		if el, want := time.Since(start), time.Duration(len(script)-1)*10*time.Second; el != want {
			t.Fatalf("ran %v, want %v (one check per interval/2)", el, want)
		}
	})
	got := pending(t, l)
	if len(got) != 3 {
		t.Fatalf("sent %q, want 3 × WATCHDOG=1", got)
	}
	for _, g := range got {
		if g != "WATCHDOG=1" {
			t.Fatalf("sent %q", g)
		}
	}
	if c := strings.Count(buf.String(), "watchdog withheld"); c != 2 {
		t.Fatalf("%d 'withheld' log lines, want 2:\n%s", c, buf.String())
	}
	if !strings.Contains(buf.String(), "watchdog resumed") {
		t.Fatalf("recovery not logged:\n%s", buf.String())
	}
}

func TestRunWatchdogDisabled(t *testing.T) {
	l := notifySocket(t)
	n := NewNotifier(nil)
	called := false
	n.RunWatchdog(context.Background(), 0, func() bool { called = true; return true })
	n.RunWatchdog(context.Background(), time.Second, nil)
	if called {
		t.Fatal("healthy called without a watchdog")
	}
	// A 1ns interval must not panic the ticker.
	ctx, cancel := context.WithCancel(context.Background())
	n.RunWatchdog(ctx, time.Nanosecond, func() bool { cancel(); return true })
	if got := pending(t, l); len(got) != 1 {
		t.Fatalf("sent %q", got)
	}
}
