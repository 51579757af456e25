package obs

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestNewLoggerErrors(t *testing.T) {
	tests := []struct {
		name string
		o    LogOptions
		want error
	}{
		{"unknown format", LogOptions{Format: "xml", Writer: &bytes.Buffer{}}, ErrUnknownFormat},
		{"empty format", LogOptions{Writer: &bytes.Buffer{}}, ErrUnknownFormat},
		{"upper-case format", LogOptions{Format: "JSON", Writer: &bytes.Buffer{}}, ErrUnknownFormat},
		{"nil writer json", LogOptions{Format: FormatJSON}, ErrNoWriter},
		{"nil writer journal", LogOptions{Format: FormatJournal}, ErrNoWriter},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := NewLogger(tt.o)
			if !errors.Is(err, tt.want) || l != nil {
				t.Errorf("NewLogger = %v, %v; want nil, %v", l, err, tt.want)
			}
		})
	}
}

func parseJSONLines(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q is not JSON: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

func TestJSONLogger(t *testing.T) {
	var buf bytes.Buffer
	l, err := NewLogger(LogOptions{Format: FormatJSON, Level: slog.LevelInfo, Writer: &buf})
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now().Add(-time.Second)
	l.Debug("dropped")
	l.With(KeyNode, "n1").Warn("reboot requested",
		KeyEvent, "reboot-requested", KeyLockWaitMS, 1200, "err", errors.New("boom"),
		slog.Group("slot", "rev", 42))
	lines := parseJSONLines(t, buf.Bytes())
	if len(lines) != 1 {
		t.Fatalf("%d lines, want 1:\n%s", len(lines), buf.String())
	}
	m := lines[0]
	ts, ok := m["ts"].(string)
	if !ok {
		t.Fatalf("no ts key: %v", m)
	}
	if pt, err := time.Parse(time.RFC3339Nano, ts); err != nil || pt.Before(before) {
		t.Errorf("ts = %q (%v)", ts, err)
	}
	if _, ok := m["time"]; ok {
		t.Error("time key not renamed")
	}
	want := map[string]any{
		"msg": "reboot requested", "level": "WARN", "node": "n1", "event": "reboot-requested",
		"lock_wait_ms": 1200.0, "err": "boom",
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %#v, want %#v", k, m[k], v)
		}
	}
	if slot, _ := m["slot"].(map[string]any); slot["rev"] != 42.0 {
		t.Errorf("slot = %#v", m["slot"])
	}
}

func TestTextLogger(t *testing.T) {
	var buf bytes.Buffer
	l, err := NewLogger(LogOptions{Format: FormatText, Level: slog.LevelDebug, Writer: &buf})
	if err != nil {
		t.Fatal(err)
	}
	l.Debug("checked", KeyHealthStatus, "ok", KeyAttempt, 3)
	line := buf.String()
	for _, want := range []string{"ts=", "level=DEBUG", "msg=checked", "health_status=ok", "attempt=3"} {
		if !strings.Contains(line, want) {
			t.Errorf("line %q lacks %q", line, want)
		}
	}
	if strings.Contains(line, "time=") {
		t.Errorf("time key not renamed: %q", line)
	}
}

func TestRedactionJSONAndText(t *testing.T) {
	for _, format := range []string{FormatJSON, FormatText} {
		t.Run(format, func(t *testing.T) {
			var buf bytes.Buffer
			l, err := NewLogger(LogOptions{Format: format, Writer: &buf})
			if err != nil {
				t.Fatal(err)
			}
			l.With("etcd_password", "pw1").WithGroup("auth").Info("m",
				"bearer_token", "tok1", "user", "root")
			l.Info("m",
				"Client-Secret", "sec1",
				slog.Group("tls", "key_material", "pem1", "cert", "public"),
				slog.Group("secrets", "a", "inner1"),
				KeyNode, "n1",
			)
			out := buf.String()
			for _, leak := range []string{"pw1", "tok1", "sec1", "pem1", "inner1"} {
				if strings.Contains(out, leak) {
					t.Errorf("output leaks %q:\n%s", leak, out)
				}
			}
			for _, keep := range []string{"root", "public", "n1"} {
				if !strings.Contains(out, keep) {
					t.Errorf("output lost %q:\n%s", keep, out)
				}
			}
			if n := strings.Count(out, Redacted); n != 5 {
				t.Errorf("%d redactions, want 5:\n%s", n, out)
			}
		})
	}
}

func TestSensitiveKey(t *testing.T) {
	tests := map[string]bool{
		"password": true, "PASSWORD": true, "db_password": true, "secret": true, "client-secret": true,
		"token": true, "api_token": true, "key_material": true, "key-material": true, "KeyMaterial": false,
		"node": false, "lease_id": false, "key": false, "session_id": false, "reason": false,
	}
	for k, want := range tests {
		if got := sensitiveKey(k); got != want {
			t.Errorf("sensitiveKey(%q) = %v, want %v", k, got, want)
		}
	}
}

func TestDiscard(t *testing.T) {
	d := Discard()
	if d == nil || d.Enabled(context.Background(), slog.LevelError+100) {
		t.Error("Discard logger must exist and be disabled")
	}
	d.Error("nothing happens")
	if OrDiscard(nil) == nil {
		t.Error("OrDiscard(nil) = nil")
	}
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, nil))
	if OrDiscard(l) != l {
		t.Error("OrDiscard replaced a logger")
	}
}
