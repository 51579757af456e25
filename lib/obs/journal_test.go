package obs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coreos/go-systemd/v22/journal"
)

type journalEntry struct {
	message  string
	priority journal.Priority
	vars     map[string]string
}

// fakeJournal records entries; while fail is set, it records nothing and
// returns an error like journal.Send without a socket.
type fakeJournal struct {
	mu      sync.Mutex
	fail    bool
	entries []journalEntry
}

func (f *fakeJournal) send(message string, priority journal.Priority, vars map[string]string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail {
		return errors.New("could not initialize socket to journald")
	}
	cp := make(map[string]string, len(vars))
	for k, v := range vars {
		cp[k] = v
	}
	f.entries = append(f.entries, journalEntry{message, priority, cp})
	return nil
}

func (f *fakeJournal) setFail(b bool) {
	f.mu.Lock()
	f.fail = b
	f.mu.Unlock()
}

func (f *fakeJournal) all() []journalEntry {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]journalEntry(nil), f.entries...)
}

func (f *fakeJournal) last(t *testing.T) journalEntry {
	t.Helper()
	es := f.all()
	if len(es) == 0 {
		t.Fatal("no journal entry sent")
	}
	return es[len(es)-1]
}

// safeBuffer is a bytes.Buffer safe for concurrent writers.
type safeBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *safeBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *safeBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newJournalLogger(t *testing.T, level slog.Level) (*slog.Logger, *fakeJournal, *safeBuffer) {
	t.Helper()
	fj := &fakeJournal{}
	buf := &safeBuffer{}
	l, err := NewLogger(LogOptions{Format: FormatJournal, Level: level, Writer: buf, Journal: fj.send})
	if err != nil {
		t.Fatal(err)
	}
	return l, fj, buf
}

var validJournalField = regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,63}$`)

func checkFieldNames(t *testing.T, vars map[string]string) {
	t.Helper()
	for k := range vars {
		if !validJournalField.MatchString(k) {
			t.Errorf("invalid journald field name %q", k)
		}
	}
}

type logValuer struct{ v string }

func (l logValuer) LogValue() slog.Value { return slog.StringValue("resolved-" + l.v) }

type nilStringer struct{ s string }

func (n *nilStringer) String() string { return n.s }

func TestJournalFields(t *testing.T) {
	at := time.Date(2025, 3, 4, 5, 6, 7, 123456789, time.UTC)
	long1 := strings.Repeat("a", 60) + "_one"
	long2 := strings.Repeat("a", 60) + "_two"
	tests := []struct {
		name  string
		attrs []any
		want  map[string]string // fields besides SYSLOG_IDENTIFIER
	}{
		{"string", []any{KeyNode, "n1"}, map[string]string{"CLUSTERREBOOTD_NODE": "n1"}},
		{"int", []any{KeyLockWaitMS, 1500}, map[string]string{"CLUSTERREBOOTD_LOCK_WAIT_MS": "1500"}},
		{"uint", []any{slog.Uint64("lease_id", 7587882431225094148)}, map[string]string{"CLUSTERREBOOTD_LEASE_ID": "7587882431225094148"}},
		{"bool", []any{"healthy", true}, map[string]string{"CLUSTERREBOOTD_HEALTHY": "true"}},
		{"float", []any{"ratio", 0.25}, map[string]string{"CLUSTERREBOOTD_RATIO": "0.25"}},
		{"duration", []any{"took", 1500 * time.Millisecond}, map[string]string{"CLUSTERREBOOTD_TOOK": "1.5s"}},
		{"time", []any{"at", at}, map[string]string{"CLUSTERREBOOTD_AT": "2025-03-04T05:06:07.123456789Z"}},
		{"error", []any{"err", fmt.Errorf("wrap: %w", errors.New("boom"))}, map[string]string{"CLUSTERREBOOTD_ERR": "wrap: boom"}},
		{"nil stringer", []any{"s", (*nilStringer)(nil)}, map[string]string{"CLUSTERREBOOTD_S": "<nil>"}},
		{"log valuer", []any{"lv", logValuer{"x"}}, map[string]string{"CLUSTERREBOOTD_LV": "resolved-x"}},
		{"multi-line", []any{"out", "a\nb"}, map[string]string{"CLUSTERREBOOTD_OUT": "a\nb"}},
		{"mixed case", []any{"healthStatus", "ok"}, map[string]string{"CLUSTERREBOOTD_HEALTHSTATUS": "ok"}},
		{"invalid chars", []any{"health-status.x y", "ok"}, map[string]string{"CLUSTERREBOOTD_HEALTH_STATUS_X_Y": "ok"}},
		{"non-ascii", []any{"ünï", "v"}, map[string]string{"CLUSTERREBOOTD__N_": "v"}},
		{"leading underscore", []any{"_boot_id", "b"}, map[string]string{"CLUSTERREBOOTD__BOOT_ID": "b"}},
		{"leading digit", []any{"1st", "b"}, map[string]string{"CLUSTERREBOOTD_1ST": "b"}},
		{"group", []any{slog.Group("slot", "node", "n2", "rev", 5)},
			map[string]string{"CLUSTERREBOOTD_SLOT_NODE": "n2", "CLUSTERREBOOTD_SLOT_REV": "5"}},
		{"nested group", []any{slog.Group("a", slog.Group("b-c", "d", 1))}, map[string]string{"CLUSTERREBOOTD_A_B_C_D": "1"}},
		{"empty group", []any{slog.Group("g")}, map[string]string{}},
		{"inline group", []any{slog.Group("", "x", 1)}, map[string]string{"CLUSTERREBOOTD_X": "1"}},
		{"empty key", []any{slog.String("", "v")}, map[string]string{}},
		{"long keys stay distinct", []any{long1, "1", long2, "2"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, fj, _ := newJournalLogger(t, slog.LevelDebug)
			l.Info("hello world", tt.attrs...)
			e := fj.last(t)
			if e.message != "hello world" {
				t.Errorf("message = %q", e.message)
			}
			if e.vars["SYSLOG_IDENTIFIER"] != "clusterrebootd" {
				t.Errorf("SYSLOG_IDENTIFIER = %q", e.vars["SYSLOG_IDENTIFIER"])
			}
			checkFieldNames(t, e.vars)
			delete(e.vars, "SYSLOG_IDENTIFIER")
			if tt.want == nil { // long keys
				if len(e.vars) != 2 {
					t.Fatalf("want 2 distinct fields, got %v", e.vars)
				}
				for k := range e.vars {
					if len(k) != 64 || !strings.HasPrefix(k, "CLUSTERREBOOTD_AAAA") {
						t.Errorf("long field name %q: want 64 chars keeping the prefix", k)
					}
				}
				return
			}
			if fmt.Sprint(e.vars) != fmt.Sprint(tt.want) {
				t.Errorf("fields = %v, want %v", e.vars, tt.want)
			}
		})
	}
}

// The DESIGN §7 contract: journalctl CLUSTERREBOOTD_EVENT=… etc.
func TestStandardKeysJournalNames(t *testing.T) {
	want := map[string]string{
		KeyNode: "CLUSTERREBOOTD_NODE", KeyEvent: "CLUSTERREBOOTD_EVENT", KeyAction: "CLUSTERREBOOTD_ACTION",
		KeyDetector: "CLUSTERREBOOTD_DETECTOR", KeyHealthStatus: "CLUSTERREBOOTD_HEALTH_STATUS",
		KeyLockWaitMS: "CLUSTERREBOOTD_LOCK_WAIT_MS", KeyLeaseID: "CLUSTERREBOOTD_LEASE_ID",
		KeyAttempt: "CLUSTERREBOOTD_ATTEMPT", KeySessionID: "CLUSTERREBOOTD_SESSION_ID",
		KeyReason: "CLUSTERREBOOTD_REASON",
	}
	if len(want) != 10 {
		t.Fatalf("standard keys are not distinct: %v", want)
	}
	l, fj, _ := newJournalLogger(t, slog.LevelInfo)
	var args []any
	for k := range want {
		if k != strings.ToLower(k) {
			t.Errorf("key %q is not lower case", k)
		}
		args = append(args, k, "v-"+k)
	}
	l.Info("m", args...)
	e := fj.last(t)
	for k, field := range want {
		if got := e.vars[field]; got != "v-"+k {
			t.Errorf("%s = %q, want %q", field, got, "v-"+k)
		}
	}
}

func TestJournalWithAttrsAndGroups(t *testing.T) {
	root, fj, _ := newJournalLogger(t, slog.LevelInfo)
	base := root.With(KeyNode, "n1")
	grouped := base.WithGroup("hold").With(KeyAttempt, 2).WithGroup("").WithGroup("lock")
	grouped.Info("m", KeyLeaseID, "abc")
	got := fj.last(t).vars
	want := map[string]string{
		"SYSLOG_IDENTIFIER":                 "clusterrebootd",
		"CLUSTERREBOOTD_NODE":               "n1",
		"CLUSTERREBOOTD_HOLD_ATTEMPT":       "2",
		"CLUSTERREBOOTD_HOLD_LOCK_LEASE_ID": "abc",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("fields = %v, want %v", got, want)
	}
	// Deriving must not change the parents.
	base.Info("m2", KeyEvent, "e")
	got = fj.last(t).vars
	want = map[string]string{
		"SYSLOG_IDENTIFIER":    "clusterrebootd",
		"CLUSTERREBOOTD_NODE":  "n1",
		"CLUSTERREBOOTD_EVENT": "e",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("parent fields = %v, want %v", got, want)
	}
	root.Info("m3")
	if got := fj.last(t).vars; len(got) != 1 {
		t.Errorf("root fields = %v, want only SYSLOG_IDENTIFIER", got)
	}
	if h := root.Handler().WithAttrs(nil); h != root.Handler() {
		t.Error("WithAttrs(nil) should return the handler itself")
	}
}

// Concurrent records from one derived logger must not see each other's
// attributes (run with -race).
func TestJournalConcurrentNoCrossTalk(t *testing.T) {
	root, fj, _ := newJournalLogger(t, slog.LevelInfo)
	l := root.With("a", 1, "b", 2, "c", 3) // leaves spare capacity in the field slice
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			for j := range 50 {
				l.Info("m", "who", fmt.Sprintf("%d-%d", i, j))
			}
		})
	}
	wg.Wait()
	es := fj.all()
	if len(es) != 16*50 {
		t.Fatalf("%d entries, want %d", len(es), 16*50)
	}
	seen := map[string]bool{}
	for _, e := range es {
		if len(e.vars) != 5 {
			t.Fatalf("entry has %d fields, want 5: %v", len(e.vars), e.vars)
		}
		seen[e.vars["CLUSTERREBOOTD_WHO"]] = true
	}
	if len(seen) != 16*50 {
		t.Errorf("%d distinct who values, want %d", len(seen), 16*50)
	}
}

func TestJournalPriority(t *testing.T) {
	tests := []struct {
		level slog.Level
		want  journal.Priority
	}{
		{slog.LevelDebug - 4, 7},
		{slog.LevelDebug, 7},
		{slog.LevelInfo, 6},
		{slog.LevelInfo + 2, 6},
		{slog.LevelWarn, 4},
		{slog.LevelError, 3},
		{slog.LevelError + 4, 3},
	}
	for _, tt := range tests {
		t.Run(tt.level.String(), func(t *testing.T) {
			l, fj, _ := newJournalLogger(t, slog.LevelDebug-8)
			l.Log(context.Background(), tt.level, "m")
			if got := fj.last(t).priority; got != tt.want {
				t.Errorf("priority = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestJournalLevelFilter(t *testing.T) {
	l, fj, buf := newJournalLogger(t, slog.LevelWarn)
	l.Info("dropped")
	l.Debug("dropped")
	l.Warn("kept")
	es := fj.all()
	if len(es) != 1 || es[0].message != "kept" {
		t.Errorf("entries = %+v, want only the warning", es)
	}
	if buf.String() != "" {
		t.Errorf("fallback written: %q", buf.String())
	}
}

func TestJournalRedaction(t *testing.T) {
	l, fj, _ := newJournalLogger(t, slog.LevelInfo)
	l.With("api_token", "t0k").WithGroup("etcd_Secret").Info("m", "user", "u")
	l.Info("m",
		"password", "p",
		"DB_PASSWORD", "p2",
		"client-secret", "s",
		"Key-Material", "k",
		"tokenizer", "x",
		slog.Group("tls", "key_material", "pem", "cert", "public"),
		slog.Group("password_store", "path", "/x"),
		KeyNode, "n1",
	)
	es := fj.all()
	if len(es) != 2 {
		t.Fatalf("%d entries", len(es))
	}
	first := es[0].vars
	if first["CLUSTERREBOOTD_API_TOKEN"] != Redacted || first["CLUSTERREBOOTD_ETCD_SECRET_USER"] != Redacted {
		t.Errorf("WithAttrs/WithGroup not redacted: %v", first)
	}
	second := es[1].vars
	for _, f := range []string{"PASSWORD", "DB_PASSWORD", "CLIENT_SECRET", "KEY_MATERIAL", "TOKENIZER", "TLS_KEY_MATERIAL", "PASSWORD_STORE_PATH"} {
		if got := second["CLUSTERREBOOTD_"+f]; got != Redacted {
			t.Errorf("%s = %q, want redacted", f, got)
		}
	}
	if second["CLUSTERREBOOTD_TLS_CERT"] != "public" || second["CLUSTERREBOOTD_NODE"] != "n1" {
		t.Errorf("non-sensitive fields changed: %v", second)
	}
	for _, e := range es {
		for k, v := range e.vars {
			for _, secret := range []string{"t0k", "p2", "pem", "/x"} {
				if strings.Contains(v, secret) {
					t.Errorf("%s leaks %q", k, v)
				}
			}
		}
	}
}

func TestJournalFallback(t *testing.T) {
	l, fj, buf := newJournalLogger(t, slog.LevelInfo)
	fj.setFail(true)
	l.With(KeyNode, "n1").WithGroup("g").Info("first lost", "password", "hunter2", "x", 1)
	l.Warn("second lost", KeyEvent, "e2")
	out := buf.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("fallback output has %d lines, want notice + 2 records:\n%s", len(lines), out)
	}
	if !strings.Contains(lines[0], "journald unreachable") || !strings.Contains(lines[0], "could not initialize socket") {
		t.Errorf("notice line = %q", lines[0])
	}
	for _, want := range []string{`msg="first lost"`, "node=n1", "g.x=1", "g.password=" + Redacted, "ts="} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("line %q lacks %q", lines[1], want)
		}
	}
	if strings.Contains(out, "hunter2") {
		t.Error("fallback leaks a password")
	}
	if !strings.Contains(lines[2], `msg="second lost"`) || !strings.Contains(lines[2], "event=e2") || !strings.Contains(lines[2], "level=WARN") {
		t.Errorf("line = %q", lines[2])
	}

	// Recovery writes nothing to the fallback; a new outage gets a new notice.
	fj.setFail(false)
	l.Info("back")
	if buf.String() != out {
		t.Errorf("fallback written while journald works: %q", strings.TrimPrefix(buf.String(), out))
	}
	if fj.last(t).message != "back" {
		t.Error("record not sent after recovery")
	}
	fj.setFail(true)
	l.Info("third lost")
	tail := strings.TrimPrefix(buf.String(), out)
	if strings.Count(tail, "journald unreachable") != 1 || !strings.Contains(tail, "third lost") {
		t.Errorf("second outage output = %q", tail)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk gone") }

func TestJournalFallbackWriteError(t *testing.T) {
	l, err := NewLogger(LogOptions{Format: FormatJournal, Writer: failWriter{}, Journal: func(string, journal.Priority, map[string]string) error {
		return errors.New("no journald")
	}})
	if err != nil {
		t.Fatal(err)
	}
	r := slog.NewRecord(time.Now(), slog.LevelInfo, "m", 0)
	err = l.Handler().Handle(context.Background(), r)
	if err == nil || !strings.Contains(err.Error(), "no journald") || !strings.Contains(err.Error(), "disk gone") {
		t.Errorf("Handle error = %v, want both causes", err)
	}
}

// Without a Journal sender NewLogger uses go-systemd's journal.Send. Where no
// journald socket exists that must fail over to the writer.
func TestJournalDefaultSender(t *testing.T) {
	if _, err := os.Stat("/run/systemd/journal/socket"); err == nil {
		t.Skip("journald is running here; the fallback cannot be observed")
	}
	buf := &safeBuffer{}
	l, err := NewLogger(LogOptions{Format: FormatJournal, Level: slog.LevelInfo, Writer: buf})
	if err != nil {
		t.Fatal(err)
	}
	l.Info("via default sender", KeyNode, "n9")
	if out := buf.String(); !strings.Contains(out, "via default sender") || !strings.Contains(out, "node=n9") {
		t.Errorf("fallback output = %q", out)
	}
}
