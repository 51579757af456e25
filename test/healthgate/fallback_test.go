package healthgate

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFallback: at least GATE_FALLBACK_MIN fallback hosts other than this
// node must answer a real probe.
func TestFallback(t *testing.T) {
	up, up2, down := tcpUp(t), tcpUp(t), tcpDown(t)
	healthy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	t.Cleanup(healthy.Close)
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "draining", http.StatusServiceUnavailable)
	}))
	t.Cleanup(failing.Close)

	dir := t.TempDir()
	probeLog := filepath.Join(dir, "probe.log")
	probeCmd := filepath.Join(dir, "probe")
	// Up when the node is lb-2; logs its arguments.
	writeFile(t, probeCmd, "#!/bin/sh\necho \"$1 $2\" >> "+shellQuote(probeLog)+"\n[ \"$1\" = lb-2 ]\n", 0o755)
	slowCmd := filepath.Join(dir, "slow")
	writeFile(t, slowCmd, "#!/bin/sh\nexec sleep 60\n", 0o755)

	off := "GATE_ETCD=no"
	for _, tc := range []struct {
		name  string
		env   []string
		phase string
		code  int
		wants []string
	}{
		{"another host up", []string{off, "GATE_FALLBACK_TARGETS='node-1=" + down + " lb-2=" + up + "'"}, "pre-lock", exitOK,
			[]string{"ok: pre-lock on node-1: fallback: up besides node-1: lb-2"}},
		{"only this node up", []string{off, "GATE_FALLBACK_TARGETS='node-1=" + up + " lb-2=" + down + "'"}, "pre-lock", exitFailed,
			[]string{"refused: fallback: 0 of 1 fallback hosts other than node-1 answer, need 1"}},
		{"only this node listed", []string{off, "GATE_FALLBACK_TARGETS='node-1=" + up + "'"}, "under-lock", exitFailed,
			[]string{"refused: fallback: no fallback host other than node-1 is configured"}},
		{"need two, one up", []string{off, "GATE_FALLBACK_MIN=2", "GATE_FALLBACK_TARGETS='lb-2=" + up + " lb-3=" + down + "'"}, "pre-lock", exitFailed,
			[]string{"1 of 2 fallback hosts other than node-1 answer, need 2"}},
		{"need two, two up", []string{off, "GATE_FALLBACK_MIN=2", "GATE_FALLBACK_TARGETS='lb-2=" + up + " lb-3=" + up2 + "'"}, "pre-lock", exitOK,
			[]string{"up besides node-1: lb-2 lb-3"}},
		{"URL probe answers", []string{off, "GATE_FALLBACK_TARGETS='lb-2=" + healthy.URL + "/healthz'"}, "pre-lock", exitOK,
			[]string{"up besides node-1: lb-2"}},
		{"URL probe 503", []string{off, "GATE_FALLBACK_TARGETS='lb-2=" + failing.URL + "/healthz'"}, "pre-lock", exitFailed,
			[]string{"0 of 1 fallback hosts"}},
		{"bare URL names its host", []string{off, "GATE_FALLBACK_TARGETS='" + healthy.URL + "/'"}, "pre-lock", exitOK,
			[]string{"up besides node-1: 127.0.0.1"}},
		{"policy fallback set and a port", []string{off, "GATE_FALLBACK_PORT=" + strings.Split(up, ":")[1]}, "pre-lock", exitOK,
			[]string{"up besides node-1: 127.0.0.1"}},
		{"policy fallback set, port down", []string{off, "GATE_FALLBACK_PORT=" + strings.Split(down, ":")[1]}, "pre-lock", exitFailed,
			[]string{"0 of 1 fallback hosts other than node-1"}},
		{"own command", []string{off, "GATE_FALLBACK_COMMAND=" + shellQuote(probeCmd), "GATE_FALLBACK_TARGETS='lb-1=x:1 lb-2=y:2'"}, "pre-lock", exitOK,
			[]string{"up besides node-1: lb-2"}},
		{"probe bounded by its timeout", []string{off, "GATE_FALLBACK_COMMAND=" + shellQuote(slowCmd), "GATE_FALLBACK_PROBE_TIMEOUT=1",
			"GATE_FALLBACK_TARGETS='lb-2=" + up + "'"}, "pre-lock", exitFailed,
			[]string{"0 of 1 fallback hosts"}},
		{"check bounded by its timeout", []string{off, "GATE_FALLBACK_COMMAND=" + shellQuote(slowCmd), "GATE_FALLBACK_PROBE_TIMEOUT=30",
			"GATE_FALLBACK_TIMEOUT=1", "GATE_FALLBACK_TARGETS='lb-2=" + up + "'"}, "pre-lock", exitFailed,
			[]string{"refused: fallback: timed out after 1s"}},
		{"not checked after boot by default", []string{off, "GATE_FALLBACK_TARGETS='lb-2=" + down + "'"}, "post-boot", exitOK,
			[]string{"no check enabled for this phase"}},
		{"bad probe syntax", []string{off, "GATE_FALLBACK_TARGETS='lb-2=nohostport'"}, "pre-lock", exitConfig,
			[]string{"bad probe 'nohostport'"}},
		{"bad port", []string{off, "GATE_FALLBACK_PORT=https"}, "pre-lock", exitConfig,
			[]string{"GATE_FALLBACK_PORT must be a port number"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, tc.env...)
			r.node.FallbackSet = []string{"node-1", "127.0.0.1"}
			res := r.run(phaseOf(tc.phase))
			r.check(res, tc.code, tc.wants...)
		})
	}
	data, err := os.ReadFile(probeLog)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(data); got != "lb-1 x:1\nlb-2 y:2\n" {
		t.Fatalf("own command called with %q", got)
	}
}
