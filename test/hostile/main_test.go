package hostile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/test/bintest"
)

// binary is the clusterrebootd binary under test, built once by TestMain.
var binary string

// runTimeout bounds every run of the binary. It bounds a wait; it is not an
// assertion of speed: a run that needs it has hung.
const runTimeout = 60 * time.Second

// Exit codes of DESIGN §6.
const (
	exitOK       = 0
	exitInternal = 1
	exitConfig   = 2
	exitHealth   = 3
	exitBusy     = 4
	exitBlocked  = 5
	exitEtcd     = 6
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "clusterrebootd-hostile-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "hostile:", err)
		os.Exit(1)
	}
	code := 1
	if binary, err = bintest.Build(dir, raceEnabled); err != nil {
		fmt.Fprintln(os.Stderr, "hostile:", err)
	} else {
		code = m.Run()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// result is one finished run of the binary.
type result struct {
	args           []string
	code           int
	stdout, stderr string
}

// out is stdout and stderr together, for substring assertions.
func (r result) out() string { return r.stdout + r.stderr }

func (r result) String() string {
	return fmt.Sprintf("clusterrebootd %s: exit %d\n--- stdout ---\n%s\n--- stderr ---\n%s",
		shortArgs(r.args), r.code, clipText(r.stdout), clipText(r.stderr))
}

// goroutineDump matches the header of a goroutine in a Go traceback.
var goroutineDump = regexp.MustCompile(`goroutine \d+ \[`)

// run runs the binary with args (bounded by runTimeout, in its own process
// group) and fails the test when it hangs, panics or reports a data race.
func run(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = productEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	r := result{args: args, code: -1, stdout: stdout.String(), stderr: stderr.String()}
	if cmd.ProcessState != nil {
		r.code = cmd.ProcessState.ExitCode()
	}
	if ctx.Err() != nil {
		t.Fatalf("hung: still running after %s (killed)\n%s", runTimeout, r)
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("run: %v\n%s", err, r)
	}
	for _, bad := range []string{"panic:", "DATA RACE", "fatal error:"} {
		if strings.Contains(r.out(), bad) {
			t.Fatalf("output contains %q\n%s", bad, r)
		}
	}
	if goroutineDump.MatchString(r.out()) {
		t.Fatalf("output contains a goroutine dump\n%s", r)
	}
	return r
}

// expect checks the exit code and that the output contains every one of
// want and none of notWant.
func expect(t *testing.T, r result, code int, want []string, notWant ...string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit %d, want %d", r.code, code)
	}
	for _, w := range want {
		if !strings.Contains(r.out(), w) {
			t.Errorf("output lacks %q", clipText(w))
		}
	}
	for _, w := range notWant {
		if strings.Contains(r.out(), w) {
			t.Errorf("output contains %q", clipText(w))
		}
	}
	if t.Failed() {
		t.Logf("%s", r)
	}
}

// productEnv is the test's environment without what would change the
// product's behaviour (journald, sudo, systemd), with a known USER.
func productEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "JOURNAL_STREAM", "NOTIFY_SOCKET", "SUDO_USER", "USER", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS", "LISTEN_PID":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "USER=hostile-test")
}

// clipText keeps failure messages readable when a case feeds megabytes.
func clipText(s string) string {
	const n = 4000
	if len(s) > n {
		return s[:n/2] + fmt.Sprintf("\n… (%d bytes) …\n", len(s)-n) + s[len(s)-n/2:]
	}
	return s
}

func shortArgs(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if len(a) > 80 {
			a = fmt.Sprintf("%s…(%d bytes)", a[:40], len(a))
		}
		out[i] = fmt.Sprintf("%q", a)
	}
	return strings.Join(out, " ")
}

// writeFile writes content at path with mode, creating parent directories.
func writeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // umask
		t.Fatal(err)
	}
}

func isRoot() bool { return os.Geteuid() == 0 }
