package metrics

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 4, 22, 30, 0, 500_000_000, time.UTC)

func parseOK(t *testing.T, b []byte) Families {
	t.Helper()
	fs, err := Parse(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("own output does not parse: %v\n%s", err, b)
	}
	return fs
}

func wantValue(t *testing.T, fs Families, want float64, name string, kv ...string) {
	t.Helper()
	got, ok := fs.Value(name, kv...)
	if !ok {
		t.Errorf("%s%v: no unique sample", name, kv)
		return
	}
	if got != want {
		t.Errorf("%s%v = %v, want %v", name, kv, got, want)
	}
}

func TestRenderEmpty(t *testing.T) {
	fs := parseOK(t, Render(Snapshot{}, Labels{Cluster: "prod", Node: "n1", Version: "1.2.3"}))
	wantFamilies := []string{NameInfo, NameReboots, NameHealthChecks, NameLockAcquire, NameBlocked, NameRebootRequired,
		NameSlotHeld, NameSlotOverdue, NameLastRun, NameLastExitCode, NameLastSuccess}
	if len(fs) != len(wantFamilies) {
		t.Fatalf("%d families, want %d", len(fs), len(wantFamilies))
	}
	for i, f := range fs {
		if f.Name != wantFamilies[i] || f.Help == "" {
			t.Errorf("family %d = %s (help %q), want %s with help", i, f.Name, f.Help, wantFamilies[i])
		}
		for _, s := range f.Samples {
			if s.Labels["cluster"] != "prod" {
				t.Errorf("%s%v lacks cluster=prod", s.Name, s.Labels)
			}
			if s.Name != NameInfo && (s.Labels["node"] != "" || s.Labels["version"] != "") {
				t.Errorf("%s%v: node and version belong on %s only", s.Name, s.Labels, NameInfo)
			}
		}
	}
	wantValue(t, fs, 1, NameInfo, "node", "n1", "version", "1.2.3")
	// Every series of the fixed label sets exists from the start.
	for _, p := range Phases {
		for _, st := range Statuses {
			wantValue(t, fs, 0, NameHealthChecks, "phase", p, "status", st)
		}
	}
	for _, r := range Reasons {
		wantValue(t, fs, 0, NameBlocked, "reason", r)
	}
	for _, b := range Buckets {
		wantValue(t, fs, 0, NameLockAcquire+"_bucket", "le", formatFloat(b))
	}
	wantValue(t, fs, 0, NameLockAcquire+"_bucket", "le", "+Inf")
	wantValue(t, fs, 0, NameLastSuccess)
	types := map[string]string{}
	for _, f := range fs {
		types[f.Name] = f.Type
	}
	for name, typ := range map[string]string{NameReboots: "counter", NameHealthChecks: "counter", NameBlocked: "counter",
		NameLockAcquire: "histogram", NameSlotHeld: "gauge", NameLastSuccess: "gauge", NameInfo: "gauge"} {
		if types[name] != typ {
			t.Errorf("TYPE of %s = %q, want %q", name, types[name], typ)
		}
	}
}

func TestRenderValues(t *testing.T) {
	var s Snapshot
	s.Apply(Delta{
		Reboots:      3,
		HealthChecks: map[[2]string]uint64{{PhasePreLock, StatusPass}: 5, {PhasePostBoot, StatusTimeout}: 1, {"bogus", StatusPass}: 9, {PhasePreLock, "bogus"}: 9},
		Blocked:      map[string]uint64{ReasonWindow: 7, "bogus": 1},
		LockWaits:    []float64{0.01, 0.02, 4, 21601, -1, math.NaN(), math.Inf(1)},
		Observed:     &Observation{RebootRequired: true, SlotHeld: true, SlotsOverdue: 2},
		RunEnded:     &RunEnd{At: t0, ExitCode: 5, Success: true},
	})
	fs := parseOK(t, Render(s, Labels{Cluster: "c"}))
	wantValue(t, fs, 3, NameReboots)
	wantValue(t, fs, 5, NameHealthChecks, "phase", PhasePreLock, "status", StatusPass)
	wantValue(t, fs, 1, NameHealthChecks, "phase", PhasePostBoot, "status", StatusTimeout)
	wantValue(t, fs, 0, NameHealthChecks, "phase", PhaseUnderLock, "status", StatusFail)
	wantValue(t, fs, 7, NameBlocked, "reason", ReasonWindow)
	if _, ok := fs.Value(NameBlocked, "reason", "bogus"); ok {
		t.Error("a reason outside the fixed set was written")
	}
	// -1, NaN and +Inf count as 0 s: le=0.01 holds them and the 0.01 (le
	// is inclusive).
	for le, want := range map[string]float64{"0.01": 4, "0.05": 5, "1": 5, "5": 6, "21600": 6, "+Inf": 7} {
		wantValue(t, fs, want, NameLockAcquire+"_bucket", "le", le)
	}
	wantValue(t, fs, 7, NameLockAcquire+"_count")
	wantValue(t, fs, 0.01+0.02+4+21601, NameLockAcquire+"_sum")
	wantValue(t, fs, 1, NameRebootRequired)
	wantValue(t, fs, 1, NameSlotHeld)
	wantValue(t, fs, 2, NameSlotOverdue)
	wantValue(t, fs, 5, NameLastExitCode)
	wantValue(t, fs, float64(t0.UnixMilli())/1000, NameLastRun)
	wantValue(t, fs, float64(t0.UnixMilli())/1000, NameLastSuccess)

	// A failed run moves the last run, not the last success.
	s.Apply(Delta{RunEnded: &RunEnd{At: t0.Add(time.Minute), ExitCode: 6}, Observed: &Observation{SlotsOverdue: -3}})
	fs = parseOK(t, Render(s, Labels{Cluster: "c"}))
	wantValue(t, fs, float64(t0.Add(time.Minute).UnixMilli())/1000, NameLastRun)
	wantValue(t, fs, float64(t0.UnixMilli())/1000, NameLastSuccess)
	wantValue(t, fs, 0, NameSlotOverdue)
	wantValue(t, fs, 0, NameSlotHeld)
}

func TestRenderEscapes(t *testing.T) {
	l := Labels{Cluster: "a\"b\\c\nd", Node: "n\xff", Version: `v"1`}
	b := Render(Snapshot{}, l)
	fs := parseOK(t, b)
	wantValue(t, fs, 1, NameInfo, "cluster", "a\"b\\c\nd", "node", "n\uFFFD", "version", `v"1`)
	if got := strings.Count(string(b), "\n"); got < 40 {
		t.Errorf("a newline in a label value broke the line structure: %d lines", got)
	}
}

func TestNormalizeResetsForeignHistogram(t *testing.T) {
	tests := []struct {
		name string
		h    Histogram
		keep bool
	}{
		{"current layout", Histogram{Bounds: Buckets, Counts: countsWith(len(Buckets)+1, 2), Sum: 1, Count: 2}, true},
		{"other bounds", Histogram{Bounds: []float64{1, 2}, Counts: []uint64{1, 0, 0}, Sum: 1, Count: 1}, false},
		{"short counts", Histogram{Bounds: Buckets, Counts: []uint64{1}, Sum: 1, Count: 1}, false},
		{"count mismatch", Histogram{Bounds: Buckets, Counts: countsWith(len(Buckets)+1, 2), Sum: 1, Count: 3}, false},
		{"negative sum", Histogram{Bounds: Buckets, Counts: countsWith(len(Buckets)+1, 2), Sum: -1, Count: 2}, false},
		{"NaN sum", Histogram{Bounds: Buckets, Counts: countsWith(len(Buckets)+1, 2), Sum: math.NaN(), Count: 2}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := Snapshot{LockAcquire: tc.h, SlotsOverdue: -1}
			s.Normalize()
			if got := s.LockAcquire.Count; (got == tc.h.Count) != tc.keep || (!tc.keep && got != 0) {
				t.Errorf("count after normalize = %d (keep %v)", got, tc.keep)
			}
			if len(s.LockAcquire.Counts) != len(Buckets)+1 || s.SlotsOverdue != 0 {
				t.Errorf("normalized = %+v", s)
			}
			parseOK(t, Render(s, Labels{}))
		})
	}
}

func countsWith(n int, first uint64) []uint64 {
	c := make([]uint64, n)
	c[0] = first
	return c
}

func TestDeltaMerge(t *testing.T) {
	var d Delta
	if !d.empty() {
		t.Fatal("zero delta not empty")
	}
	d.merge(Delta{Reboots: 1, HealthChecks: map[[2]string]uint64{{PhasePreLock, StatusPass}: 1}, Blocked: map[string]uint64{ReasonEtcd: 1},
		LockWaits: []float64{1}, Observed: &Observation{RebootRequired: true}})
	d.merge(Delta{HealthChecks: map[[2]string]uint64{{PhasePreLock, StatusPass}: 2}, Blocked: map[string]uint64{ReasonEtcd: 1},
		LockWaits: []float64{2}, Observed: &Observation{SlotHeld: true}, RunEnded: &RunEnd{ExitCode: 3}})
	d.merge(Delta{})
	if d.Reboots != 1 || d.HealthChecks[[2]string{PhasePreLock, StatusPass}] != 3 || d.Blocked[ReasonEtcd] != 2 ||
		len(d.LockWaits) != 2 || d.Observed.RebootRequired || !d.Observed.SlotHeld || d.RunEnded.ExitCode != 3 || d.empty() {
		t.Errorf("merged = %+v", d)
	}
}

func ExampleRender() {
	var s Snapshot
	s.Apply(Delta{Reboots: 1})
	for _, l := range strings.Split(string(Render(s, Labels{Cluster: "prod", Node: "node-1", Version: "1.0"})), "\n")[:6] {
		fmt.Println(l)
	}
	// Output:
	// # HELP clusterrebootd_info Information about clusterrebootd on this node; always 1.
	// # TYPE clusterrebootd_info gauge
	// clusterrebootd_info{cluster="prod",node="node-1",version="1.0"} 1
	// # HELP clusterrebootd_reboots_total Coordinated reboots of this node that completed: back with a new boot id, healthy, slot released.
	// # TYPE clusterrebootd_reboots_total counter
	// clusterrebootd_reboots_total{cluster="prod"} 1
}
