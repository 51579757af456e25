package detect

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/proc"
)

const needsRestartingNeeded = `Updating Subscription Management repositories.
Core libraries or services have been updated since boot-up:
  * kernel
  * systemd
  * kernel

Reboot is required to fully utilize these updates.
More information: https://access.redhat.com/solutions/27943
`

func TestCommandDetector(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name       string
		body       string
		needed     []int
		notNeeded  []int
		timeout    time.Duration
		want       Outcome
		wantCode   int
		wantPkgs   []string
		wantReason string // substring
		wantErrIs  error
	}{
		{name: "needed", body: "exit 1", needed: []int{1}, notNeeded: []int{0},
			want: Needed, wantCode: 1, wantReason: "exited 1 (needed)"},
		{name: "not needed", body: "echo fine; exit 0", needed: []int{1}, notNeeded: []int{0},
			want: NotNeeded, wantCode: 0, wantReason: "exited 0 (not needed)"},
		{name: "second needed code", body: "exit 4", needed: []int{1, 4}, notNeeded: []int{0},
			want: Needed, wantCode: 4},
		{name: "zero can mean needed", body: "exit 0", needed: []int{0}, notNeeded: []int{1},
			want: Needed, wantCode: 0},
		{name: "undeclared code", body: "echo; echo 'zypp is locked'; echo second; exit 7", needed: []int{102}, notNeeded: []int{0},
			want: Unknown, wantCode: 7, wantErrIs: ErrUnexpectedExit, wantReason: `exited 7 (output: "zypp is locked")`},
		{name: "undeclared code no output", body: "exit 2", needed: []int{1}, notNeeded: []int{0},
			want: Unknown, wantCode: 2, wantErrIs: ErrUnexpectedExit},
		{name: "killed by signal", body: "echo dying; kill -9 $$", needed: []int{1}, notNeeded: []int{0},
			want: Unknown, wantCode: -1, wantReason: "signal"},
		{name: "needs-restarting packages", body: "cat <<'X'\n" + needsRestartingNeeded + "X\nexit 1", needed: []int{1}, notNeeded: []int{0},
			want: Needed, wantCode: 1, wantPkgs: []string{"kernel", "systemd"}, wantReason: "(packages: kernel, systemd)"},
		{name: "timeout", body: "echo started; sleep 60", needed: []int{1}, notNeeded: []int{0}, timeout: 300 * time.Millisecond,
			want: Unknown, wantCode: -1, wantErrIs: proc.ErrTimeout, wantReason: `(output: "started")`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := script(t, dir, strings.ReplaceAll(tc.name, " ", "-"), tc.body)
			r := checkResult(t, detectOne(t, Options{Specs: []Spec{{
				Type: "command", Cmd: []string{bin, "-r"}, Timeout: tc.timeout,
				NeededExitCodes: tc.needed, NotNeededExitCodes: tc.notNeeded,
			}}}))
			if r.Outcome != tc.want || r.ExitCode != tc.wantCode {
				t.Fatalf("got %s exit %d, want %s exit %d (%+v)", r.Outcome, r.ExitCode, tc.want, tc.wantCode, r)
			}
			if r.Detector != "command" || r.Source != bin+" -r" {
				t.Fatalf("detector %q source %q", r.Detector, r.Source)
			}
			if !slices.Equal(r.Packages, tc.wantPkgs) {
				t.Fatalf("packages %q, want %q", r.Packages, tc.wantPkgs)
			}
			if !strings.Contains(r.Reason, tc.wantReason) {
				t.Fatalf("reason %q lacks %q", r.Reason, tc.wantReason)
			}
			if tc.wantErrIs != nil && !errors.Is(r.Err, tc.wantErrIs) {
				t.Fatalf("err %v, want %v", r.Err, tc.wantErrIs)
			}
		})
	}
}

func TestCommandStartFailure(t *testing.T) {
	dir := t.TempDir()
	notExec := writeFile(t, filepath.Join(dir, "not-executable"), "#!/bin/sh\nexit 0\n")
	for _, argv0 := range []string{filepath.Join(dir, "missing"), notExec, "clusterrebootd-no-such-program"} {
		r := checkResult(t, detectOne(t, Options{Specs: []Spec{{
			Type: "command", Cmd: []string{argv0}, NeededExitCodes: []int{1}, NotNeededExitCodes: []int{0},
		}}}))
		if r.Outcome != Unknown || r.ExitCode != -1 || !strings.Contains(r.Err.Error(), argv0) {
			t.Fatalf("%s: got %+v", argv0, r)
		}
	}
}

// TestCommandTimeoutKillsGroup: a detector whose child ignores SIGTERM is
// still killed with its whole process group and reported Unknown.
func TestCommandTimeoutKillsGroup(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	bin := script(t, dir, "stubborn", `sh -c 'trap "" TERM; exec sleep 60' &
echo $! > `+pidFile+`
trap "" TERM
wait`)
	r := checkResult(t, detectOne(t, Options{Specs: []Spec{{
		Type: "command", Cmd: []string{bin}, Timeout: time.Second,
		NeededExitCodes: []int{1}, NotNeededExitCodes: []int{0},
	}}}))
	if r.Outcome != Unknown || !errors.Is(r.Err, proc.ErrTimeout) {
		t.Fatalf("got %+v", r)
	}
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Skipf("child never recorded its pid before the timeout: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	// SIGKILL has been sent to the group; wait (generously) until the child
	// is gone or a zombie waiting for its reaper.
	deadline := time.Now().Add(20 * time.Second)
	for !processGone(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("child %d survived the timeout", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func processGone(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// Field 3, after the parenthesised command name, is the state.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && (s[i+2] == 'Z' || s[i+2] == 'X')
}

func TestCommandCancelledDuringRun(t *testing.T) {
	dir := t.TempDir()
	bin := script(t, dir, "slow", "sleep 60")
	s, err := New(Options{Specs: []Spec{{Type: "command", Cmd: []string{bin}, Timeout: time.Minute,
		NeededExitCodes: []int{1}, NotNeededExitCodes: []int{0}}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	r := checkResult(t, s.Detect(ctx))
	if r.Outcome != Unknown || !errors.Is(r.Err, context.Canceled) {
		t.Fatalf("got %+v", r)
	}
}

func TestParseNeedsRestarting(t *testing.T) {
	for _, tc := range []struct {
		name string
		out  string
		want []string
	}{
		{"rhel", needsRestartingNeeded, []string{"kernel", "systemd"}},
		{"no header", "  * kernel\n", nil},
		{"not needed", "No core libraries or services have been updated since boot-up.\nReboot should not be necessary.\n", nil},
		{"blank line after header", "Core libraries or services have been updated since boot-up:\n\n  * glibc\n  * linux-firmware\n\nReboot is required\n  * not-a-package\n", []string{"glibc", "linux-firmware"}},
		{"text ends list", "Core libraries or services have been updated since boot-up:\n  * dbus\nReboot is required\n", []string{"dbus"}},
		{"empty bullet", "Core libraries or services have been updated since boot-up:\n  *\n  * zlib\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := parseNeedsRestarting(proc.Result{Output: []byte(tc.out)}.Lines())
			if !slices.Equal(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}
