package gate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/proc"
)

// Phase names the moment at which the health script runs; it is passed as
// the script's only argument and as CLUSTERREBOOTD_PHASE.
type Phase string

const (
	PhasePreLock   Phase = "pre-lock"   // in check, before a holder is started
	PhaseUnderLock Phase = "under-lock" // in the holder, with the cluster mutex held
	PhasePostBoot  Phase = "post-boot"  // after the reboot, before the slot is released
)

// ScriptMaxOutput is the number of output bytes (stdout and stderr combined)
// kept from one run of the health script.
const ScriptMaxOutput = 64 << 10

// NoScriptLine is ScriptResult.FirstLine when no script is configured.
const NoScriptLine = "no health script configured"

var (
	// ErrScriptRefused: the script (or a directory or symlink on its path)
	// is not safe to run as root; it was not executed.
	ErrScriptRefused = errors.New("gate: script refused")
	// ErrScriptMissing: the script, or a symlink target on its path, does
	// not exist; it was not executed.
	ErrScriptMissing = errors.New("gate: script missing")
	// ErrScriptTimeout: the script ran longer than Script.Timeout; its
	// process group has been killed. Also matches proc.ErrTimeout.
	ErrScriptTimeout = errors.New("gate: script timed out")
	// ErrScriptFailed: the script could not be started, was killed by a
	// signal or was cancelled.
	ErrScriptFailed = errors.New("gate: script failed")
)

// ScriptEnv is the context handed to the script as environment variables.
type ScriptEnv struct {
	Node               string   // NODE_NAME
	Cluster            string   // CLUSTER
	ClusterSize        int      // CLUSTER_SIZE
	HealthyNodes       int      // HEALTHY_NODES (a count)
	RebootingNodes     []string // REBOOTING_NODES, comma-separated
	FallbackSet        []string // FALLBACK_SET, comma-separated
	EtcdEndpoints      []string // ETCD_ENDPOINTS, comma-separated
	MinHealthyFraction float64  // MIN_HEALTHY_FRACTION (strconv 'g')
	MinHealthyAbsolute int      // MIN_HEALTHY_ABSOLUTE
}

// Environ returns the complete environment of a script run in phase: PATH
// (proc.SafePath), CLUSTERREBOOTD_PHASE and the fields of e. Nothing else.
func (e ScriptEnv) Environ(phase Phase) []string {
	return []string{
		proc.SafePath,
		"CLUSTERREBOOTD_PHASE=" + string(phase),
		"NODE_NAME=" + e.Node,
		"CLUSTER=" + e.Cluster,
		"CLUSTER_SIZE=" + strconv.Itoa(e.ClusterSize),
		"HEALTHY_NODES=" + strconv.Itoa(e.HealthyNodes),
		"REBOOTING_NODES=" + strings.Join(e.RebootingNodes, ","),
		"FALLBACK_SET=" + strings.Join(e.FallbackSet, ","),
		"ETCD_ENDPOINTS=" + strings.Join(e.EtcdEndpoints, ","),
		"MIN_HEALTHY_FRACTION=" + strconv.FormatFloat(e.MinHealthyFraction, 'g', -1, 64),
		"MIN_HEALTHY_ABSOLUTE=" + strconv.Itoa(e.MinHealthyAbsolute),
	}
}

// Script runs the operator's health script. The zero Path means "no script
// configured".
type Script struct {
	Path    string        // absolute path; "" = no script configured
	Timeout time.Duration // required (> 0) when Path is set
	Logger  *slog.Logger  // nil: discard
	// UID is the owner trusted besides root for the script, the symlinks
	// and the directories on its path; -1 trusts root only. Production
	// uses -1; tests and the unprivileged demo pass their own uid.
	UID int
}

// ScriptResult is the outcome of one run.
type ScriptResult struct {
	Allowed   bool          // exit status 0 and no error
	ExitCode  int           // -1 when not run, killed or timed out
	Output    []byte        // combined stdout and stderr, at most ScriptMaxOutput bytes
	Truncated bool          // output beyond ScriptMaxOutput was dropped
	FirstLine string        // first non-empty output line, for reasons and status
	Duration  time.Duration // wall time of the run
}

// Run checks that the script is safe and runs it as [Path, phase] with the
// environment env.Environ(phase).
//
// With an empty Path no script is configured: Run returns Allowed true,
// ExitCode 0 and FirstLine NoScriptLine without running anything (the
// built-in policies still apply). This is the only case in which Run allows
// without an exit status 0.
//
// Errors (Allowed is always false with an error): ErrScriptMissing,
// ErrScriptRefused (nothing was run), ErrScriptTimeout, ErrScriptFailed
// (start failure, signal, ctx cancelled), and plain errors for an unknown
// phase or a missing timeout. A non-zero exit status is not an error: it is
// the verdict Allowed false.
func (s *Script) Run(ctx context.Context, phase Phase, env ScriptEnv) (ScriptResult, error) {
	if s.Path == "" {
		return ScriptResult{Allowed: true, FirstLine: NoScriptLine}, nil
	}
	res := ScriptResult{ExitCode: -1}
	switch phase {
	case PhasePreLock, PhaseUnderLock, PhasePostBoot:
	default:
		return res, fmt.Errorf("gate: unknown script phase %q", phase)
	}
	if s.Timeout <= 0 {
		return res, fmt.Errorf("gate: health script %s: no timeout configured", s.Path)
	}
	log := s.logger().With("phase", string(phase), "script", s.Path)
	target, err := checkScriptPath(s.Path, s.UID)
	if err != nil {
		log.Warn("health script not run", "error", err.Error())
		return res, err
	}

	pr, err := proc.Run(ctx, proc.Cmd{
		Argv:      []string{target, string(phase)},
		Env:       env.Environ(phase),
		Timeout:   s.Timeout,
		MaxOutput: ScriptMaxOutput,
	})
	res = ScriptResult{
		ExitCode:  pr.ExitCode,
		Output:    pr.Output,
		Truncated: pr.Truncated,
		FirstLine: pr.FirstLine(),
		Duration:  pr.Duration,
	}
	switch {
	case err == nil:
		res.Allowed = pr.ExitCode == 0
	case errors.Is(err, proc.ErrTimeout):
		res.ExitCode = -1
		err = fmt.Errorf("%w: %s after %s: %w", ErrScriptTimeout, s.Path, s.Timeout, err)
	default:
		res.ExitCode = -1
		err = fmt.Errorf("%w: %s: %w", ErrScriptFailed, s.Path, err)
	}

	level := slog.LevelInfo
	if !res.Allowed {
		level = slog.LevelWarn
	}
	log = log.With("exit_code", res.ExitCode)
	for _, line := range pr.Lines() {
		log.Log(ctx, level, line)
	}
	if res.Truncated {
		log.Warn("health script output truncated", "max_bytes", ScriptMaxOutput)
	}
	attrs := []any{"allowed", res.Allowed, "duration", res.Duration}
	if err != nil {
		attrs = append(attrs, "error", err.Error())
	}
	log.Log(ctx, level, "health script finished", attrs...)
	return res, err
}

func (s *Script) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}
