package proc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"
)

// DefaultMaxOutput is the number of output bytes kept when Cmd.MaxOutput is 0.
const DefaultMaxOutput = 64 << 10

// DefaultWaitDelay bounds how long Run waits for the output pipes to close
// after the process has exited or been killed.
const DefaultWaitDelay = 2 * time.Second

// ErrTimeout is returned when the program ran longer than Cmd.Timeout.
var ErrTimeout = errors.New("proc: timed out")

// ErrStart is returned when the program never ran: empty argv, no timeout,
// or the start itself failed (not found, not executable).
var ErrStart = errors.New("proc: cannot start")

// Cmd describes one bounded run of a program.
type Cmd struct {
	Argv      []string      // program and arguments; Argv[0] is looked up in PATH if it has no slash
	Env       []string      // complete environment; nil means an empty environment plus a safe PATH
	Dir       string        // working directory; "" means "/"
	Timeout   time.Duration // required: > 0
	MaxOutput int           // bytes of combined stdout+stderr kept; 0 means DefaultMaxOutput
	WaitDelay time.Duration // 0 means DefaultWaitDelay
}

// Result is what a finished run produced.
type Result struct {
	ExitCode  int           // the exit status; -1 when killed by a signal
	Output    []byte        // combined stdout and stderr, at most MaxOutput bytes
	Truncated bool          // output beyond MaxOutput was dropped
	Duration  time.Duration // wall time of the run
}

// SafePath is the PATH given to programs when Cmd.Env is nil.
const SafePath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Run executes c and waits for it. The error is non-nil when the program could
// not be started, timed out (ErrTimeout), was cancelled by ctx, or was killed
// by a signal; in every such case the process group has been killed.
func Run(ctx context.Context, c Cmd) (Result, error) {
	if len(c.Argv) == 0 || c.Argv[0] == "" {
		return Result{ExitCode: -1}, fmt.Errorf("%w: empty command", ErrStart)
	}
	if c.Timeout <= 0 {
		return Result{ExitCode: -1}, fmt.Errorf("%w: no timeout given", ErrStart)
	}
	max := c.MaxOutput
	if max <= 0 {
		max = DefaultMaxOutput
	}
	ctx, cancel := context.WithTimeoutCause(ctx, c.Timeout, ErrTimeout)
	defer cancel()

	cmd := exec.CommandContext(ctx, c.Argv[0], c.Argv[1:]...)
	cmd.Env = c.Env
	if cmd.Env == nil {
		cmd.Env = []string{SafePath}
	}
	cmd.Dir = c.Dir
	if cmd.Dir == "" {
		cmd.Dir = "/"
	}
	out := &limitedBuffer{max: max}
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		// Kill the whole group: children that ignore SIGTERM or hold the
		// output pipe open must not outlive the timeout.
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	cmd.WaitDelay = c.WaitDelay
	if cmd.WaitDelay <= 0 {
		cmd.WaitDelay = DefaultWaitDelay
	}

	start := time.Now()
	err := cmd.Start()
	if err != nil {
		return Result{ExitCode: -1}, fmt.Errorf("%w: %s: %w", ErrStart, c.Argv[0], err)
	}
	pid := cmd.Process.Pid
	err = cmd.Wait()
	res := Result{Duration: time.Since(start)}
	res.Output, res.Truncated = out.bytes()
	res.ExitCode = cmd.ProcessState.ExitCode()

	if errors.Is(err, exec.ErrWaitDelay) || ctx.Err() != nil {
		// The leader is gone but something in its group kept the pipes
		// open, or we gave up on it: make sure nothing of it survives.
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	if ctx.Err() != nil {
		if cause := context.Cause(ctx); errors.Is(cause, ErrTimeout) {
			return res, fmt.Errorf("%w after %s: %s", ErrTimeout, c.Timeout, c.Argv[0])
		}
		return res, fmt.Errorf("proc: %s: %w", c.Argv[0], ctx.Err())
	}
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return res, fmt.Errorf("proc: %s killed by signal %s", c.Argv[0], ws.Signal())
		}
		return res, nil // non-zero exit status is a result, not an error
	}
	if err != nil && !errors.Is(err, exec.ErrWaitDelay) {
		return res, fmt.Errorf("proc: %s: %w", c.Argv[0], err)
	}
	return res, nil
}

// FirstLine returns the first non-empty line of output, trimmed, for log
// lines and status reasons.
func (r Result) FirstLine() string {
	for line := range strings.SplitSeq(string(r.Output), "\n") {
		if s := strings.TrimSpace(line); s != "" {
			return clipLine(s)
		}
	}
	return ""
}

// MaxFirstLine bounds FirstLine: it travels into etcd (alive records),
// history and status output.
const MaxFirstLine = 200

// clipLine makes s safe to show on one line: invalid UTF-8 and control
// characters (escape sequences, carriage returns) become U+FFFD, and it is
// cut at MaxFirstLine bytes on a character boundary.
func clipLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return utf8.RuneError
		}
		return r
	}, strings.ToValidUTF8(s, string(utf8.RuneError)))
	if len(s) <= MaxFirstLine {
		return s
	}
	cut := MaxFirstLine
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// Lines returns the output split into lines without the trailing empty one.
func (r Result) Lines() []string {
	s := strings.TrimRight(string(r.Output), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// limitedBuffer keeps the first max bytes written to it and counts the rest.
type limitedBuffer struct {
	mu      sync.Mutex
	max     int
	buf     bytes.Buffer
	dropped int64
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	room := b.max - b.buf.Len()
	if room > len(p) {
		room = len(p)
	}
	if room > 0 {
		b.buf.Write(p[:room])
	}
	b.dropped += int64(len(p) - max(room, 0))
	return len(p), nil // never fail the writer: the program must not see EPIPE because we stopped keeping
}

func (b *limitedBuffer) bytes() ([]byte, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes()), b.dropped > 0
}
