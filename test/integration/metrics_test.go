package integration

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/clusterrebootd/clusterrebootd/lib/metrics"
	"github.com/clusterrebootd/clusterrebootd/test/etcdtest"
)

// TestMetricsThroughAReboot runs one node through a blocked check, a
// reboot and its post-boot check with [metrics] textfile set, and reads the
// text file after each run: valid exposition format, the counts of what
// happened, counters that never go down, and nothing counted by the
// read-only commands. `history` then lists the reboot.
func TestMetricsThroughAReboot(t *testing.T) {
	t.Parallel()
	c := newCluster(t, etcdtest.Start(t).Endpoints(), defaults())
	n := c.addNode("node-a")
	prom := n.path("node.prom")
	cfg, err := os.ReadFile(n.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(cfg, []byte(`textfile = ""`)) {
		t.Fatalf("fixture config has no empty metrics textfile:\n%s", cfg)
	}
	n.writeFile("config.toml", strings.Replace(string(cfg), `textfile = ""`, "textfile = "+quote(prom), 1))

	read := func(what string) metrics.Families {
		t.Helper()
		b, err := os.ReadFile(prom)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		fs, err := metrics.Parse(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: %v\n%s", what, err, b)
		}
		return fs
	}
	want := func(fs metrics.Families, what string, checks map[string]float64) {
		t.Helper()
		for key, v := range checks {
			name, kv := splitKey(key)
			got, ok := fs.Value(name, kv...)
			if !ok || got != v {
				t.Errorf("%s: %s = %v (found %v), want %v", what, key, got, ok, v)
			}
		}
	}

	// 1. The health script says no: exit 3, counted, nothing else.
	n.touch("gate-deny-pre-lock")
	n.expect(exitHealth, "check", "--once")
	blocked := read("blocked check")
	want(blocked, "blocked check", map[string]float64{
		"clusterrebootd_info{cluster=" + c.name + ",node=node-a}":                   1,
		"clusterrebootd_reboot_blocked_total{reason=health}":                        1,
		"clusterrebootd_health_checks_total{phase=pre-lock,status=fail}":            1,
		"clusterrebootd_reboot_required":                                            1,
		"clusterrebootd_slot_held":                                                  0,
		"clusterrebootd_last_run_exit_code":                                         3,
		"clusterrebootd_reboots_total":                                              0,
		"clusterrebootd_lock_acquire_seconds_count":                                 0,
		"clusterrebootd_health_checks_total{phase=under-lock,status=pass}":          0,
		"clusterrebootd_reboot_blocked_total{reason=window}":                        0,
		"clusterrebootd_reboot_blocked_total{cluster=" + c.name + ",reason=health}": 1,
	})
	if v, _ := blocked.Value("clusterrebootd_last_successful_run_timestamp_seconds"); v <= 0 {
		t.Errorf("a blocked run (exit 3) is a successful run: last success = %v", v)
	}

	// 2. Allowed: the check runs the holder in-process, which reboots.
	n.remove("gate-deny-pre-lock")
	n.expect(exitOK, "check", "--once")
	n.waitRebooted(1)
	rebooting := read("reboot requested")
	want(rebooting, "reboot requested", map[string]float64{
		"clusterrebootd_lock_acquire_seconds_count":                        1,
		"clusterrebootd_lock_acquire_seconds_bucket{le=+Inf}":              1,
		"clusterrebootd_health_checks_total{phase=pre-lock,status=pass}":   1,
		"clusterrebootd_health_checks_total{phase=under-lock,status=pass}": 1,
		"clusterrebootd_last_run_exit_code":                                0,
		"clusterrebootd_reboots_total":                                     0,
		"clusterrebootd_reboot_blocked_total{reason=health}":               1,
	})

	// 3. Read-only commands count nothing and write no file.
	before, _ := os.ReadFile(prom)
	n.expect(exitOK, "status")
	n.run("simulate") // runs the health script (pre-lock); its exit code depends on the held slot
	n.expect(exitOK, "history")
	if after, _ := os.ReadFile(prom); !bytes.Equal(before, after) {
		t.Errorf("status/simulate/history changed the metrics:\n%s\n---\n%s", before, after)
	}

	// 4. Back from the reboot: released, counted once.
	n.boot()
	done := read("post-boot")
	want(done, "post-boot", map[string]float64{
		"clusterrebootd_reboots_total":                                    1,
		"clusterrebootd_health_checks_total{phase=post-boot,status=pass}": 1,
		"clusterrebootd_slot_held":                                        0,
		"clusterrebootd_reboot_required":                                  0,
		"clusterrebootd_last_run_exit_code":                               0,
	})
	for i, pair := range [][2]metrics.Families{{blocked, rebooting}, {rebooting, done}} {
		if err := metrics.Monotonic(pair[0], pair[1]); err != nil {
			t.Errorf("run %d → %d: %v", i+1, i+2, err)
		}
	}
	n.expect(exitOK, "check", "--once")
	if err := metrics.Monotonic(done, read("idle check")); err != nil {
		t.Error(err)
	}

	// The counters live in the state file next to the reboot-loop guard.
	var state map[string]json.RawMessage
	if b, err := os.ReadFile(n.path("state/state.json")); err != nil || json.Unmarshal(b, &state) != nil {
		t.Fatalf("state file: %v\n%s", err, b)
	}
	if state["metrics"] == nil || state["last_reboot_reason"] == nil {
		t.Errorf("state file lacks the metrics or the coordinator's state: keys %v", keys(state))
	}

	// 5. history lists the reboot.
	out := n.expect(exitOK, "history", "--json", "--node", "node-a", "--since", "1h")
	var hist struct {
		Schema  int `json:"schema"`
		Reboots []struct {
			Node        string `json:"node"`
			Result      string `json:"result"`
			RequestedAt string `json:"requested_at"`
			DurationMS  int64  `json:"duration_ms"`
		} `json:"reboots"`
	}
	if err := json.Unmarshal([]byte(jsonPart(out)), &hist); err != nil {
		t.Fatalf("history --json: %v\n%s", err, out)
	}
	if hist.Schema != 1 || len(hist.Reboots) != 1 || hist.Reboots[0].Node != "node-a" || hist.Reboots[0].Result != "rebooted" ||
		hist.Reboots[0].RequestedAt == "" || hist.Reboots[0].DurationMS <= 0 {
		t.Errorf("history = %+v\n%s", hist, out)
	}
	if table := n.expect(exitOK, "history"); !strings.Contains(table, "node-a") || !strings.Contains(table, "rebooted") {
		t.Errorf("history table:\n%s", table)
	}
	if code, out := n.run("history", "--since", "yesterday"); code != 2 {
		t.Errorf("history --since yesterday: exit %d, want 2\n%s", code, out)
	}
}

// splitKey turns `name{a=b,c=d}` into the name and label pairs.
func splitKey(key string) (string, []string) {
	name, rest, ok := strings.Cut(key, "{")
	if !ok {
		return key, nil
	}
	var kv []string
	for _, p := range strings.Split(strings.TrimSuffix(rest, "}"), ",") {
		k, v, _ := strings.Cut(p, "=")
		kv = append(kv, k, v)
	}
	return name, kv
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
