package proc

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestRun(t *testing.T) {
	tests := []struct {
		name      string
		cmd       Cmd
		wantCode  int
		wantOut   string
		wantErr   error
		anyErr    bool
		truncated bool
	}{
		{name: "exit 0", cmd: Cmd{Argv: []string{"/bin/sh", "-c", "echo hi; echo err >&2"}, Timeout: time.Second}, wantOut: "hi\nerr\n"},
		{name: "exit 3 is a result", cmd: Cmd{Argv: []string{"/bin/sh", "-c", "exit 3"}, Timeout: time.Second}, wantCode: 3},
		{name: "env is exact", cmd: Cmd{Argv: []string{"/bin/sh", "-c", "echo $A-$HOME"}, Env: []string{"A=1"}, Timeout: time.Second}, wantOut: "1-\n"},
		{name: "default env has only PATH", cmd: Cmd{Argv: []string{"/usr/bin/env"}, Timeout: time.Second}, wantOut: SafePath + "\n"},
		{name: "output bounded", cmd: Cmd{Argv: []string{"/bin/sh", "-c", "head -c 100000 /dev/zero"}, Timeout: 5 * time.Second, MaxOutput: 10}, wantOut: strings.Repeat("\x00", 10), truncated: true},
		{name: "timeout", cmd: Cmd{Argv: []string{"/bin/sleep", "10"}, Timeout: 50 * time.Millisecond}, wantErr: ErrTimeout, wantCode: -1},
		{name: "killed by signal", cmd: Cmd{Argv: []string{"/bin/sh", "-c", "kill -9 $$"}, Timeout: time.Second}, anyErr: true, wantCode: -1},
		{name: "missing program", cmd: Cmd{Argv: []string{"/nonexistent"}, Timeout: time.Second}, wantErr: ErrStart, wantCode: -1},
		{name: "empty argv", cmd: Cmd{Timeout: time.Second}, wantErr: ErrStart, wantCode: -1},
		{name: "no timeout", cmd: Cmd{Argv: []string{"/bin/true"}}, wantErr: ErrStart, wantCode: -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Run(context.Background(), tc.cmd)
			switch {
			case tc.wantErr != nil:
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
			case tc.anyErr:
				if err == nil {
					t.Fatal("want an error")
				}
			case err != nil:
				t.Fatalf("Run: %v", err)
			}
			if res.ExitCode != tc.wantCode {
				t.Errorf("exit code %d, want %d", res.ExitCode, tc.wantCode)
			}
			if tc.wantOut != "" && string(res.Output) != tc.wantOut {
				t.Errorf("output %q, want %q", res.Output, tc.wantOut)
			}
			if res.Truncated != tc.truncated {
				t.Errorf("truncated = %v", res.Truncated)
			}
		})
	}
}

// A child that ignores SIGTERM and keeps the output pipe open must be dead
// once Run returns after a timeout.
func TestTimeoutKillsGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	script := `trap '' TERM; (trap '' TERM; echo $$ > /dev/null; sh -c 'echo $$ > ` + pidFile + `; exec sleep 30') & wait`
	_, err := Run(context.Background(), Cmd{Argv: []string{"/bin/sh", "-c", script}, Timeout: 200 * time.Millisecond, WaitDelay: 100 * time.Millisecond})
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("err = %v, want timeout", err)
	}
	b, rerr := os.ReadFile(pidFile)
	if rerr != nil {
		t.Fatalf("child did not start: %v", rerr)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	deadline := time.Now().Add(2 * time.Second)
	for alive(pid) {
		// The child may need a moment to be reaped by init after SIGKILL.
		if time.Now().After(deadline) {
			t.Fatalf("child %d survived the timeout", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	_, err := Run(ctx, Cmd{Argv: []string{"/bin/sleep", "10"}, Timeout: 10 * time.Second})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want canceled", err)
	}
}

func TestLines(t *testing.T) {
	r := Result{Output: []byte("\n  first \nsecond\n")}
	if r.FirstLine() != "first" {
		t.Fatalf("FirstLine = %q", r.FirstLine())
	}
	if got := r.Lines(); len(got) != 3 {
		t.Fatalf("Lines = %q", got)
	}
	if (Result{}).Lines() != nil || (Result{}).FirstLine() != "" {
		t.Fatal("empty output")
	}
}

// alive reports whether pid exists and is not a zombie waiting for its reaper.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(stat), ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

func TestFirstLineIsSafe(t *testing.T) {
	for _, tc := range []struct{ out, want string }{
		{"\n  ok: quorum 3/3  \nmore", "ok: quorum 3/3"},
		{"red \x1b[31malert\x1b[0m\r", "red \uFFFD[31malert\uFFFD[0m"},
		{"bad \xff utf8", "bad \uFFFD utf8"},
		{strings.Repeat("x", 300), strings.Repeat("x", MaxFirstLine) + "…"},
		{strings.Repeat("x", MaxFirstLine-1) + "é tail", strings.Repeat("x", MaxFirstLine-1) + "…"},
	} {
		if got := (Result{Output: []byte(tc.out)}).FirstLine(); got != tc.want {
			t.Errorf("FirstLine(%q) = %q, want %q", tc.out, got, tc.want)
		}
	}
}
