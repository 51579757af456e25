package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	co "github.com/clusterrebootd/clusterrebootd/lib/coordinator"
	"github.com/clusterrebootd/clusterrebootd/lib/gate"
	"github.com/clusterrebootd/clusterrebootd/lib/metrics"
)

// A state file written before metrics existed.
const oldStateFile = `{
  "reboots_for_reason": {"kernel 6.1": 1},
  "last_reboot_at": "2026-01-02T03:04:05Z",
  "last_reboot_reason": "kernel 6.1"
}
`

func writeState(t *testing.T, dir, content string) stateFile {
	t.Helper()
	f := stateFile{path: filepath.Join(dir, "state.json")}
	if content != "" {
		if err := os.WriteFile(f.path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func TestStateFileKeepsBothParts(t *testing.T) {
	f := writeState(t, t.TempDir(), oldStateFile)
	st, err := f.Load()
	if err != nil || st.RebootsForReason["kernel 6.1"] != 1 || st.LastRebootReason != "kernel 6.1" {
		t.Fatalf("old state file: %+v, %v", st, err)
	}
	ms := metricsStore{f}
	snap, err := ms.Load()
	if err != nil || snap.Reboots != 0 {
		t.Fatalf("metrics of an old state file: %+v, %v", snap, err)
	}
	snap.Reboots = 4
	if err := ms.Save(snap); err != nil {
		t.Fatal(err)
	}
	if st2, err := f.Load(); err != nil || st2.RebootsForReason["kernel 6.1"] != 1 || !st2.LastRebootAt.Equal(st.LastRebootAt) {
		t.Errorf("state after a metrics save: %+v, %v", st2, err)
	}
	// The coordinator's save (here: ack) keeps the metrics.
	if err := f.Save(co.State{}); err != nil {
		t.Fatal(err)
	}
	if snap, err := ms.Load(); err != nil || snap.Reboots != 4 {
		t.Errorf("metrics after a state save: %+v, %v", snap, err)
	}
	b, err := os.ReadFile(f.path)
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	if _, ok := raw["reboots_for_reason"]; ok || raw["metrics"] == nil {
		t.Errorf("file after ack: %s", b)
	}
}

func TestStateFileDamage(t *testing.T) {
	t.Run("unreadable metrics section: state loads, metrics start again", func(t *testing.T) {
		f := writeState(t, t.TempDir(), `{"last_reboot_reason": "k", "metrics": {"reboots_total": "many"}}`)
		if st, err := f.Load(); err != nil || st.LastRebootReason != "k" {
			t.Fatalf("Load = %+v, %v", st, err)
		}
		if _, err := (metricsStore{f}).Load(); !errors.Is(err, metrics.ErrCorrupt) {
			t.Errorf("metrics Load = %v, want ErrCorrupt", err)
		}
	})
	t.Run("unreadable file: metrics never overwrite it", func(t *testing.T) {
		f := writeState(t, t.TempDir(), `{"reboots_for_reason": `)
		ms := metricsStore{f}
		if _, err := ms.Load(); err == nil || errors.Is(err, metrics.ErrCorrupt) {
			t.Errorf("metrics Load = %v, want a plain error", err)
		}
		if err := ms.Save(metrics.Snapshot{Reboots: 1}); err == nil {
			t.Error("metrics Save replaced an unreadable state file")
		}
		if b, _ := os.ReadFile(f.path); string(b) != `{"reboots_for_reason": ` {
			t.Errorf("state file changed: %q", b)
		}
		// The coordinator's own save repairs it (as before).
		if err := f.Save(co.State{LastRebootReason: "x"}); err != nil {
			t.Fatal(err)
		}
		if st, err := f.Load(); err != nil || st.LastRebootReason != "x" {
			t.Errorf("after repair: %+v, %v", st, err)
		}
	})
	t.Run("lock held elsewhere: Save waits, bounded", func(t *testing.T) {
		f := writeState(t, t.TempDir(), "")
		l, err := f.lock(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Millisecond)
		defer cancel()
		if _, err := (metricsStore{f}).Lock(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("second lock = %v", err)
		}
		done := make(chan error, 1)
		go func() { done <- f.Save(co.State{LastRebootReason: "later"}) }()
		time.Sleep(20 * time.Millisecond) // Save is waiting for the lock
		l.Unlock()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

// TestStateFileConcurrentWriters: metrics from two processes (check and
// holder: separate lock descriptors) and the coordinator's saves at the
// same time lose nothing.
func TestStateFileConcurrentWriters(t *testing.T) {
	dir := t.TempDir()
	f := writeState(t, dir, oldStateFile)
	prom := filepath.Join(dir, "node.prom")
	const n = 25
	var wg sync.WaitGroup
	for _, reason := range []string{metrics.ReasonWindow, metrics.ReasonEtcd} {
		s, err := metrics.NewSink(metrics.Options{Textfile: prom, Store: metricsStore{f}, Labels: metrics.Labels{Cluster: "c"}})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range n {
				s.Blocked(reason)
				time.Sleep(200 * time.Microsecond)
			}
			if err := s.Close(context.Background()); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range n {
			if err := f.Save(co.State{LastRebootReason: fmt.Sprint(i)}); err != nil {
				t.Error(err)
			}
		}
	}()
	wg.Wait()
	b, err := os.ReadFile(prom)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := metrics.Parse(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{metrics.ReasonWindow, metrics.ReasonEtcd} {
		if v, ok := fs.Value(metrics.NameBlocked, "reason", r); !ok || v != n {
			t.Errorf("blocked{%s} = %v, want %d", r, v, n)
		}
	}
	if st, err := f.Load(); err != nil || st.LastRebootReason != fmt.Sprint(n-1) {
		t.Errorf("state = %+v, %v", st, err)
	}
}

func TestBlockedReason(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{nil, ""},
		{&co.Error{Code: co.CodeOK, Gate: "x"}, ""},
		{errors.New("boom"), metrics.ReasonInternal},
		{&co.Error{Code: co.CodeInternal, Gate: "reboot"}, metrics.ReasonInternal},
		{&co.Error{Code: co.CodeConfig, Gate: "pause"}, metrics.ReasonInternal},
		{&co.Error{Code: co.CodeHealth, Gate: "health-script"}, metrics.ReasonHealth},
		{&co.Error{Code: co.CodeHealth, Gate: "post-boot"}, metrics.ReasonHealth},
		{&co.Error{Code: co.CodeHealth, Gate: "policy"}, metrics.ReasonPolicy},
		{fmt.Errorf("wrapped: %w", &co.Error{Code: co.CodeHealth, Gate: "policy-under-lock"}), metrics.ReasonPolicy},
		{&co.Error{Code: co.CodeBusy, Gate: "slots"}, metrics.ReasonSlots},
		{&co.Error{Code: co.CodeBusy, Gate: "session"}, metrics.ReasonLock},
		{&co.Error{Code: co.CodeBusy, Gate: "fence"}, metrics.ReasonLock},
		{&co.Error{Code: co.CodeEtcd, Gate: "etcd"}, metrics.ReasonEtcd},
		{&co.Error{Code: co.CodeDetector, Gate: "detector"}, metrics.ReasonDetector},
		{&co.Error{Code: co.CodeBlocked, Gate: "kill-switch"}, metrics.ReasonKillSwitch},
		{&co.Error{Code: co.CodeBlocked, Gate: "pause"}, metrics.ReasonPaused},
		{&co.Error{Code: co.CodeBlocked, Gate: "window"}, metrics.ReasonWindow},
		{&co.Error{Code: co.CodeBlocked, Gate: "reboot-loop-guard"}, metrics.ReasonLoopGuard},
		{&co.Error{Code: co.CodeBlocked, Gate: "inhibitors"}, metrics.ReasonInhibitor},
		{&co.Error{Code: co.CodeBlocked, Gate: "hold"}, metrics.ReasonStopped},
		{&co.Error{Code: co.CodeBlocked, Gate: "new-gate"}, metrics.ReasonOther},
	}
	for _, tc := range tests {
		got, ok := blockedReason(tc.err)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("blockedReason(%v) = %q, %v; want %q", tc.err, got, ok, tc.want)
		}
	}
	for _, r := range blockedGates {
		if !contains(metrics.Reasons, r) {
			t.Errorf("reason %q is not in metrics.Reasons", r)
		}
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func TestHealthCheckStatus(t *testing.T) {
	for _, tc := range []struct {
		v    co.ScriptVerdict
		err  error
		want string
	}{
		{co.ScriptVerdict{Allowed: true}, nil, metrics.StatusPass},
		{co.ScriptVerdict{ExitCode: 1}, nil, metrics.StatusFail},
		{co.ScriptVerdict{}, fmt.Errorf("run: %w", gate.ErrScriptTimeout), metrics.StatusTimeout},
		{co.ScriptVerdict{}, gate.ErrScriptRefused, metrics.StatusError},
		{co.ScriptVerdict{Allowed: true}, context.Canceled, metrics.StatusError},
	} {
		if got := healthCheckStatus(tc.v, tc.err); got != tc.want {
			t.Errorf("healthCheckStatus(%+v, %v) = %s, want %s", tc.v, tc.err, got, tc.want)
		}
	}
}

type scriptFunc func() (co.ScriptVerdict, error)

func (f scriptFunc) Run(context.Context, string, co.View) (co.ScriptVerdict, error) { return f() }

// TestMetricsPort: what a check run records ends up in the text file; before
// start (status, simulate) and with metrics disabled nothing is recorded.
func TestMetricsPort(t *testing.T) {
	dir := t.TempDir()
	prom := filepath.Join(dir, "node.prom")
	f := writeState(t, dir, "")
	now := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	newPort := func(textfile string) *metricsPort {
		return &metricsPort{textfile: textfile, state: f, now: func() time.Time { return now },
			labels: metrics.Labels{Cluster: "prod", Node: "n1", Version: "9.9"}}
	}
	deny := scriptFunc(func() (co.ScriptVerdict, error) { return co.ScriptVerdict{ExitCode: 1}, nil })

	// Not started: like status and simulate.
	idle := newPort(prom)
	_, _ = scriptMetrics{next: deny, m: idle, configured: true}.Run(t.Context(), "pre-lock", co.View{})
	idle.LockAcquired(time.Second)
	idle.RebootCompleted()
	idle.Observed(co.Observation{RebootRequired: true})
	idle.end(t.Context(), errors.New("x"))
	// Disabled.
	off := newPort("")
	off.start()
	off.end(t.Context(), nil)
	if _, err := os.Stat(prom); !os.IsNotExist(err) {
		t.Fatalf("metrics written without a started check or hold: %v", err)
	}

	m := newPort(prom)
	m.start()
	sm := scriptMetrics{next: deny, m: m, configured: true}
	_, _ = sm.Run(t.Context(), "pre-lock", co.View{})
	_, _ = scriptMetrics{next: deny, m: m}.Run(t.Context(), "pre-lock", co.View{}) // no script configured: not counted
	m.LockAcquired(2 * time.Second)
	m.RebootCompleted()
	m.Observed(co.Observation{RebootRequired: true, SlotHeld: true, OverdueSlots: 1})
	m.end(t.Context(), &co.Error{Code: co.CodeHealth, Gate: "health-script", Reason: "no"})

	b, err := os.ReadFile(prom)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := metrics.Parse(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	for _, c := range []struct {
		name string
		kv   []string
		want float64
	}{
		{metrics.NameInfo, []string{"node", "n1", "version", "9.9", "cluster", "prod"}, 1},
		{metrics.NameHealthChecks, []string{"phase", "pre-lock", "status", "fail"}, 1},
		{metrics.NameHealthChecks, []string{"phase", "pre-lock", "status", "pass"}, 0},
		{metrics.NameLockAcquire + "_count", nil, 1},
		{metrics.NameReboots, nil, 1},
		{metrics.NameSlotHeld, nil, 1},
		{metrics.NameSlotOverdue, nil, 1},
		{metrics.NameBlocked, []string{"reason", "health"}, 1},
		{metrics.NameLastExitCode, nil, 3},
		{metrics.NameLastSuccess, nil, float64(now.Unix())},
	} {
		if v, ok := fs.Value(c.name, c.kv...); !ok || v != c.want {
			t.Errorf("%s%v = %v (found %v), want %v", c.name, c.kv, v, ok, c.want)
		}
	}

	// A run that fails (etcd): last run moves, last success stays.
	m2 := newPort(prom)
	m2.start()
	now = now.Add(time.Minute)
	m2.end(t.Context(), &co.Error{Code: co.CodeEtcd, Gate: "etcd"})
	b2, _ := os.ReadFile(prom)
	fs2, err := metrics.Parse(bytes.NewReader(b2))
	if err != nil {
		t.Fatal(err)
	}
	if err := metrics.Monotonic(fs, fs2); err != nil {
		t.Error(err)
	}
	if v, _ := fs2.Value(metrics.NameLastSuccess); v != float64(now.Add(-time.Minute).Unix()) {
		t.Errorf("last success = %v", v)
	}
	if v, _ := fs2.Value(metrics.NameLastRun); v != float64(now.Unix()) {
		t.Errorf("last run = %v", v)
	}
	if v, _ := fs2.Value(metrics.NameBlocked, "reason", "etcd"); v != 1 {
		t.Errorf("blocked{etcd} = %v", v)
	}
}

func TestExitCodeFor(t *testing.T) {
	for err, want := range map[error]int{
		nil: 0, errors.New("x"): 1, &co.Error{Code: co.CodeBusy}: 4, configError{errors.New("bad")}: 2, quietExit(5): 5,
	} {
		if got := exitCodeFor(err); got != want {
			t.Errorf("exitCodeFor(%v) = %d, want %d", err, got, want)
		}
	}
}

func TestParseSince(t *testing.T) {
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	local := time.Date(2026, 3, 1, 0, 0, 0, 0, time.Local)
	for in, want := range map[string]time.Time{
		"":                          {},
		"90m":                       now.Add(-90 * time.Minute),
		" 36h ":                     now.Add(-36 * time.Hour),
		"7d":                        now.AddDate(0, 0, -7),
		"0d":                        now,
		"2026-03-01T10:00:00+01:00": time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC),
		"2026-03-01":                local,
		"99999999999d":              {},
		"1000001d":                  {},
		"2562047h":                  {},
		"0001-01-01":                {},
		"1969-12-31T23:59:59Z":      {},
		"9999-12-31T23:59:59Z":      time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC),
	} {
		got, err := parseSince(in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("parseSince(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"-5m", "yesterday", "7days", "-1d", "2026-13-01", strings.Repeat("9", 100<<10)} {
		_, err := parseSince(bad, now)
		if err == nil {
			t.Errorf("parseSince(%.20q) accepted", bad)
		} else if len(err.Error()) > 300 {
			t.Errorf("parseSince error echoes %d bytes", len(err.Error()))
		}
	}
}

func TestPrintHistory(t *testing.T) {
	at := time.Date(2026, 3, 10, 12, 0, 0, 0, time.Local)
	var b strings.Builder
	printHistory(&b, "prod", time.Time{}, nil)
	printHistory(&b, "prod", at, nil)
	printHistory(&b, "prod", time.Time{}, []co.Reboot{
		{Node: "n1", Reason: "kernel\nupdate", RequestedAt: at, EndedAt: at.Add(14 * time.Minute), DurationMS: (14 * time.Minute).Milliseconds(), Result: co.ResultRebooted},
		{Node: "n2", SlotTakenAt: at, Result: co.ResultReleased, By: "alice", DurationMS: 1000},
		{Node: "n3", EndedAt: at, DurationMS: 5000, Result: co.ResultExpired, By: "n1"},
		{Node: "n4", RequestedAt: at, Result: co.ResultInProgress},
		{Node: "n5", SlotTakenAt: at, Result: co.ResultUnknown},
		{Node: "n6", SlotTakenAt: at, EndedAt: at, Result: co.ResultDryRun},
		{Node: "n7", SlotTakenAt: at, EndedAt: at, Result: co.ResultRebootFailed},
		{Node: "n8", SlotTakenAt: at, EndedAt: at, Result: co.ResultAborted},
		{Node: "n9", SlotTakenAt: at, EndedAt: at, Result: co.ResultReleased},
		{Node: "n10", EndedAt: at, Result: co.ResultExpired},
	})
	out := b.String()
	when := at.Format(historyTime)
	for _, want := range []string{
		"cluster prod: no reboots in the history\n",
		"cluster prod: no reboots since " + when + "\n",
		"REQUESTED", when + "  n1    14m0s  rebooted",
		"kernel update", "released by alice", "expired (freed by n1)", "in progress", "unknown (no end recorded)",
		"dry run", "reboot failed", "aborted", "released by an operator",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("history output lacks %q:\n%s", want, out)
		}
	}
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.Contains(l, " n3 "):
			if !strings.HasPrefix(l, "-") || !strings.Contains(l, "5s") {
				t.Errorf("n3 (no start, own duration): %q", l)
			}
		case strings.Contains(l, " n4 "), strings.Contains(l, " n5 "):
			if f := strings.Fields(l); len(f) < 6 || f[4] != "-" {
				t.Errorf("open reboot shows a duration: %q", l)
			}
		case strings.Contains(l, " n10 "):
			if f := strings.Fields(l); f[0] != "-" || f[2] != "-" || f[3] != "expired" {
				t.Errorf("n10: %q", l)
			}
		}
	}
}
