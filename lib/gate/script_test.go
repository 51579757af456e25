package gate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/proc"
)

// trustedUID is what tests put into Script.UID: root only when running as
// root (the production setting), the test's own uid otherwise.
func trustedUID() int {
	if os.Getuid() == 0 {
		return -1
	}
	return os.Getuid()
}

// writeScript writes an executable script into dir with mode 0755 and
// returns its path.
func writeScript(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o755); err != nil { // umask-proof
		t.Fatal(err)
	}
	return p
}

func newScript(path string) *Script {
	return &Script{Path: path, Timeout: 20 * time.Second, UID: trustedUID()}
}

var testEnv = ScriptEnv{
	Node:               "node-1",
	Cluster:            "prod",
	ClusterSize:        5,
	HealthyNodes:       4,
	RebootingNodes:     []string{"node-3"},
	FallbackSet:        []string{"lb-1", "lb-2"},
	EtcdEndpoints:      []string{"https://etcd-1:2379", "https://etcd-2:2379"},
	MinHealthyFraction: 0.6,
	MinHealthyAbsolute: 3,
}

func TestScriptEnvironmentIsExact(t *testing.T) {
	t.Setenv("CLUSTERREBOOTD_SECRET_CANARY", "leak") // must not be inherited
	dir := t.TempDir()
	out := filepath.Join(dir, "env.txt")
	arg := filepath.Join(dir, "arg.txt")
	// /proc/$$/environ is exactly what execve received: no shell additions.
	p := writeScript(t, dir, "gate", fmt.Sprintf("tr '\\000' '\\n' < /proc/$$/environ > %s\nprintf '%%s|%%s' \"$#\" \"$1\" > %s\n", out, arg))
	for _, phase := range []Phase{PhasePreLock, PhaseUnderLock, PhasePostBoot} {
		res, err := newScript(p).Run(t.Context(), phase, testEnv)
		if err != nil || !res.Allowed || res.ExitCode != 0 {
			t.Fatalf("%s: res %+v err %v", phase, res, err)
		}
		got, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{
			proc.SafePath,
			"CLUSTERREBOOTD_PHASE=" + string(phase),
			"NODE_NAME=node-1",
			"CLUSTER=prod",
			"CLUSTER_SIZE=5",
			"HEALTHY_NODES=4",
			"REBOOTING_NODES=node-3",
			"FALLBACK_SET=lb-1,lb-2",
			"ETCD_ENDPOINTS=https://etcd-1:2379,https://etcd-2:2379",
			"MIN_HEALTHY_FRACTION=0.6",
			"MIN_HEALTHY_ABSOLUTE=3",
		}
		lines := strings.Split(strings.TrimRight(string(got), "\n"), "\n")
		slices.Sort(lines)
		slices.Sort(want)
		if !slices.Equal(lines, want) {
			t.Errorf("%s: environment\n got %q\nwant %q", phase, lines, want)
		}
		a, _ := os.ReadFile(arg)
		if string(a) != "1|"+string(phase) {
			t.Errorf("argv: got %q, want one argument %q", a, phase)
		}
	}
}

func TestScriptEnvironFormatting(t *testing.T) {
	env := ScriptEnv{MinHealthyFraction: 1.0 / 3}
	got := env.Environ(PhasePostBoot)
	if !slices.Contains(got, "MIN_HEALTHY_FRACTION=0.3333333333333333") ||
		!slices.Contains(got, "REBOOTING_NODES=") || !slices.Contains(got, "HEALTHY_NODES=0") {
		t.Errorf("Environ: %q", got)
	}
}

func TestScriptExitCodes(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		code    int
		allowed bool
	}{{0, true}, {1, false}, {3, false}, {42, false}, {255, false}} {
		p := writeScript(t, dir, "exit"+strconv.Itoa(tc.code), fmt.Sprintf("echo\necho '  verdict %d  '\necho second\nexit %d\n", tc.code, tc.code))
		res, err := newScript(p).Run(t.Context(), PhaseUnderLock, testEnv)
		if err != nil {
			t.Fatalf("exit %d: non-zero exit must be a verdict, not an error: %v", tc.code, err)
		}
		if res.Allowed != tc.allowed || res.ExitCode != tc.code {
			t.Errorf("exit %d: Allowed %v ExitCode %d", tc.code, res.Allowed, res.ExitCode)
		}
		if want := fmt.Sprintf("verdict %d", tc.code); res.FirstLine != want {
			t.Errorf("exit %d: FirstLine %q, want %q", tc.code, res.FirstLine, want)
		}
	}
}

func TestScriptNotConfigured(t *testing.T) {
	res, err := (&Script{}).Run(t.Context(), PhasePreLock, testEnv)
	if err != nil || !res.Allowed || res.FirstLine != NoScriptLine {
		t.Fatalf("empty path: %+v %v", res, err)
	}
}

func TestScriptBadArguments(t *testing.T) {
	p := writeScript(t, t.TempDir(), "ok", "exit 0\n")
	if res, err := newScript(p).Run(t.Context(), Phase("whenever"), testEnv); err == nil || res.Allowed {
		t.Errorf("unknown phase: %+v %v", res, err)
	}
	s := newScript(p)
	s.Timeout = 0
	if res, err := s.Run(t.Context(), PhasePreLock, testEnv); err == nil || res.Allowed {
		t.Errorf("no timeout: %+v %v", res, err)
	}
}

func TestScriptLogsLines(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		code  int
		level string
	}{{0, "INFO"}, {7, "WARN"}} {
		var buf bytes.Buffer
		p := writeScript(t, dir, "log"+strconv.Itoa(tc.code), fmt.Sprintf("echo line-one\necho line-two >&2\nexit %d\n", tc.code))
		s := newScript(p)
		s.Logger = slog.New(slog.NewJSONHandler(&buf, nil))
		if _, err := s.Run(t.Context(), PhasePostBoot, testEnv); err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for line := range strings.SplitSeq(strings.TrimSpace(buf.String()), "\n") {
			var rec map[string]any
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatal(err)
			}
			msg, _ := rec["msg"].(string)
			seen[msg] = true
			if rec["level"] != tc.level || rec["phase"] != "post-boot" || rec["script"] != p || rec["exit_code"] != float64(tc.code) {
				t.Errorf("exit %d: log record %v", tc.code, rec)
			}
		}
		for _, want := range []string{"line-one", "line-two", "health script finished"} {
			if !seen[want] {
				t.Errorf("exit %d: no log line %q in %s", tc.code, want, buf.String())
			}
		}
	}
}

func TestScriptOutputTruncated(t *testing.T) {
	dir := t.TempDir()
	p := writeScript(t, dir, "big", "echo first\nhead -c 200000 /dev/zero | tr '\\000' x\necho\nexit 0\n")
	var buf bytes.Buffer
	s := newScript(p)
	s.Logger = slog.New(slog.NewTextHandler(&buf, nil))
	res, err := s.Run(t.Context(), PhasePreLock, testEnv)
	if err != nil || !res.Allowed {
		t.Fatalf("%v %v", res.Allowed, err)
	}
	if !res.Truncated || len(res.Output) != ScriptMaxOutput || res.FirstLine != "first" {
		t.Errorf("Truncated %v, %d bytes kept (want %d), FirstLine %q", res.Truncated, len(res.Output), ScriptMaxOutput, res.FirstLine)
	}
	if !strings.Contains(buf.String(), "health script output truncated") {
		t.Errorf("truncation not logged")
	}
}

// processGone reports whether pid no longer runs (gone or a zombie that
// nobody reaped: PID 1 in a container may not reap).
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(stat, ')')
	return i > 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X')
}

func TestScriptTimeoutKillsGroup(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	p := writeScript(t, dir, "hang", fmt.Sprintf(`trap '' TERM
sh -c 'trap "" TERM; echo $$ > %s.tmp; mv %s.tmp %s; exec sleep 1000' &
while [ ! -s %s ]; do sleep 0.05; done
echo waiting
sleep 1000
`, pidFile, pidFile, pidFile, pidFile))
	s := newScript(p)
	s.Timeout = 2 * time.Second
	res, err := s.Run(t.Context(), PhaseUnderLock, testEnv)
	if !errors.Is(err, ErrScriptTimeout) || !errors.Is(err, proc.ErrTimeout) {
		t.Fatalf("want ErrScriptTimeout, got %v", err)
	}
	if res.Allowed || res.ExitCode != -1 {
		t.Errorf("timeout must not allow: %+v", res)
	}
	raw, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("child never started (timeout too short for this machine?): %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	// SIGKILL was sent to the group before Run returned; give the kernel a
	// moment to finish the exit (this bounds a wait, it times nothing).
	deadline := time.Now().Add(10 * time.Second)
	for !processGone(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("child %d that ignores SIGTERM survived the timeout", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestScriptFailures(t *testing.T) {
	dir := t.TempDir()
	badInterp := filepath.Join(dir, "badinterp")
	if err := os.WriteFile(badInterp, []byte("#!/nonexistent/interpreter\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	signalled := writeScript(t, dir, "signalled", "echo dying\nkill -KILL $$\n")
	ok := writeScript(t, dir, "ok", "exit 0\n")
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	for _, tc := range []struct {
		name string
		path string
		ctx  context.Context
	}{
		{"start failure", badInterp, t.Context()},
		{"killed by signal", signalled, t.Context()},
		{"cancelled", ok, cancelled},
	} {
		res, err := newScript(tc.path).Run(tc.ctx, PhasePreLock, testEnv)
		if !errors.Is(err, ErrScriptFailed) || res.Allowed || res.ExitCode != -1 {
			t.Errorf("%s: want ErrScriptFailed and not allowed, got %+v %v", tc.name, res, err)
		}
	}
}

func TestScriptSymlinkResolvedAndRun(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "real")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	target := writeScript(t, sub, "gate", "echo from-target\nexit 0\n")
	// link chain: dir/a -> real/gate (relative), dir/b -> dir/a (absolute),
	// dir/c -> ./real/../b (with "." and "..").
	for _, l := range [][2]string{{"real/gate", "a"}, {filepath.Join(dir, "a"), "b"}, {"./real/../b", "c"}} {
		if err := os.Symlink(l[0], filepath.Join(dir, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	got, err := checkScriptPath(filepath.Join(dir, "c"), trustedUID())
	if err != nil || got != target {
		t.Fatalf("resolve: %q %v, want %q", got, err, target)
	}
	res, err := newScript(filepath.Join(dir, "c")).Run(t.Context(), PhasePreLock, testEnv)
	if err != nil || !res.Allowed || res.FirstLine != "from-target" {
		t.Fatalf("%+v %v", res, err)
	}
	// "." and ".." inside the configured path itself
	if got, err := checkScriptPath(dir+"/./real/../real/gate", trustedUID()); err != nil || got != target {
		t.Errorf("dots: %q %v", got, err)
	}
}

func TestScriptStickyDirAccepted(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sticky")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	p := writeScript(t, dir, "gate", "exit 0\n")
	if _, err := checkScriptPath(p, trustedUID()); err != nil {
		t.Fatalf("a sticky world-writable directory (like /tmp) with a trusted entry must be accepted: %v", err)
	}
}
