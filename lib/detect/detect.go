package detect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Detector types accepted in Spec.Type.
const (
	TypeFile        = "file"
	TypeCommand     = "command"
	TypeKernel      = "kernel"
	TypeNeedrestart = "needrestart"
	TypeAuto        = "auto"
)

// Defaults used when the corresponding Options field is empty.
const (
	DefaultTimeout   = 60 * time.Second
	DefaultOSRelease = "/etc/os-release"
	DefaultBootDir   = "/boot"
)

// Sentinel errors; test with errors.Is.
var (
	// ErrInvalidSpec: New refused a Spec (unknown type, missing or
	// conflicting fields).
	ErrInvalidSpec = errors.New("detect: invalid detector spec")
	// ErrNoDetectors: Combine was given no result.
	ErrNoDetectors = errors.New("detect: no detector results")
	// ErrUnexpectedExit: a command exited with a code declared neither as
	// needed nor as not needed.
	ErrUnexpectedExit = errors.New("detect: unexpected exit code")
	// ErrUnsupportedOS: "auto" does not know the operating system named in
	// os-release. The concrete error is an *UnsupportedOSError.
	ErrUnsupportedOS = errors.New("detect: unsupported operating system")
	// ErrNoKernel: the kernel detector found no installed kernel image.
	ErrNoKernel = errors.New("detect: no installed kernel found")
	// ErrNeedrestart: needrestart's batch output did not give a usable
	// kernel status.
	ErrNeedrestart = errors.New("detect: needrestart gave no usable kernel status")
)

// Spec configures one detector.
type Spec struct {
	Type string // file | command | kernel | needrestart | auto
	// Name, when set, is reported as Result.Detector instead of Type.
	// Resolve sets it to "auto:<family>".
	Name string
	Path string   // file: the path whose existence means "needed"
	Cmd  []string // command: argv (no shell); needrestart: optional override of ["needrestart", "-b"]
	// command: exit codes meaning needed and not needed; both required,
	// disjoint, 0..255. Any other code is Unknown.
	NeededExitCodes, NotNeededExitCodes []int
	Timeout                             time.Duration // 0 → Options.DefaultTimeout
}

// Options configures a Set.
type Options struct {
	Specs     []Spec // empty → one Spec{Type: "auto"}
	OSRelease string // os-release file read by "auto"; "" → DefaultOSRelease
	BootDir   string // where installed kernels live, for "kernel"; "" → DefaultBootDir
	// KernelRelease returns the running kernel release; nil → uname(2).
	KernelRelease  func() (string, error)
	DefaultTimeout time.Duration // 0 → DefaultTimeout
	Logger         *slog.Logger  // nil → discard
}

// Set is a validated list of detectors.
type Set struct {
	specs         []Spec
	osRelease     string
	bootDir       string
	kernelRelease func() (string, error)
	log           *slog.Logger
}

// New validates opts. It reads no file and runs no program.
func New(opts Options) (*Set, error) {
	if opts.DefaultTimeout < 0 {
		return nil, fmt.Errorf("%w: negative default timeout %s", ErrInvalidSpec, opts.DefaultTimeout)
	}
	def := opts.DefaultTimeout
	if def == 0 {
		def = DefaultTimeout
	}
	s := &Set{
		osRelease:     opts.OSRelease,
		bootDir:       opts.BootDir,
		kernelRelease: opts.KernelRelease,
		log:           opts.Logger,
	}
	if s.osRelease == "" {
		s.osRelease = DefaultOSRelease
	}
	if s.bootDir == "" {
		s.bootDir = DefaultBootDir
	}
	if s.kernelRelease == nil {
		s.kernelRelease = unameRelease
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	specs := opts.Specs
	if len(specs) == 0 {
		specs = []Spec{{Type: TypeAuto}}
	}
	for i, sp := range specs {
		if err := validate(sp); err != nil {
			return nil, fmt.Errorf("detector %d (%s): %w", i+1, sp.Type, err)
		}
		sp.Cmd = slices.Clone(sp.Cmd)
		sp.NeededExitCodes = slices.Clone(sp.NeededExitCodes)
		sp.NotNeededExitCodes = slices.Clone(sp.NotNeededExitCodes)
		if sp.Timeout == 0 {
			sp.Timeout = def
		}
		s.specs = append(s.specs, sp)
	}
	return s, nil
}

// Specs returns a copy of the validated specs, with timeouts filled in.
func (s *Set) Specs() []Spec {
	out := make([]Spec, len(s.specs))
	for i, sp := range s.specs {
		sp.Cmd = slices.Clone(sp.Cmd)
		sp.NeededExitCodes = slices.Clone(sp.NeededExitCodes)
		sp.NotNeededExitCodes = slices.Clone(sp.NotNeededExitCodes)
		out[i] = sp
	}
	return out
}

func validate(sp Spec) error {
	if sp.Timeout < 0 {
		return fmt.Errorf("%w: negative timeout %s", ErrInvalidSpec, sp.Timeout)
	}
	hasCodes := len(sp.NeededExitCodes) > 0 || len(sp.NotNeededExitCodes) > 0
	switch sp.Type {
	case TypeFile:
		if sp.Path == "" {
			return fmt.Errorf("%w: file detector needs a path", ErrInvalidSpec)
		}
		if !filepath.IsAbs(sp.Path) {
			return fmt.Errorf("%w: file detector path %q is not absolute", ErrInvalidSpec, sp.Path)
		}
		if len(sp.Cmd) > 0 || hasCodes {
			return fmt.Errorf("%w: file detector takes no cmd or exit codes", ErrInvalidSpec)
		}
	case TypeCommand:
		if err := validateArgv(sp.Cmd); err != nil {
			return err
		}
		if sp.Path != "" {
			return fmt.Errorf("%w: command detector takes no path", ErrInvalidSpec)
		}
		if len(sp.NeededExitCodes) == 0 || len(sp.NotNeededExitCodes) == 0 {
			return fmt.Errorf("%w: command detector needs both needed and not-needed exit codes", ErrInvalidSpec)
		}
		for _, c := range append(slices.Clone(sp.NeededExitCodes), sp.NotNeededExitCodes...) {
			if c < 0 || c > 255 {
				return fmt.Errorf("%w: exit code %d out of range 0..255", ErrInvalidSpec, c)
			}
		}
		for _, c := range sp.NeededExitCodes {
			if slices.Contains(sp.NotNeededExitCodes, c) {
				return fmt.Errorf("%w: exit code %d is both needed and not needed", ErrInvalidSpec, c)
			}
		}
	case TypeNeedrestart:
		if len(sp.Cmd) > 0 {
			if err := validateArgv(sp.Cmd); err != nil {
				return err
			}
		}
		if sp.Path != "" || hasCodes {
			return fmt.Errorf("%w: needrestart detector takes no path or exit codes", ErrInvalidSpec)
		}
	case TypeKernel, TypeAuto:
		if sp.Path != "" || len(sp.Cmd) > 0 || hasCodes {
			return fmt.Errorf("%w: %s detector takes no path, cmd or exit codes", ErrInvalidSpec, sp.Type)
		}
	default:
		return fmt.Errorf("%w: unknown type %q (want file, command, kernel, needrestart or auto)", ErrInvalidSpec, sp.Type)
	}
	return nil
}

func validateArgv(argv []string) error {
	if len(argv) == 0 || argv[0] == "" {
		return fmt.Errorf("%w: empty command", ErrInvalidSpec)
	}
	return nil
}

// Detect runs every detector in order and combines the results (see
// Combine). It never returns an error: failures are Unknown results.
func (s *Set) Detect(ctx context.Context) Summary {
	results := make([]Result, 0, len(s.specs))
	for _, sp := range s.specs {
		r := s.run(ctx, sp)
		s.logResult(ctx, r)
		results = append(results, r)
	}
	sum := Combine(results)
	s.log.LogAttrs(ctx, levelFor(sum.Outcome), "reboot detection",
		slog.String("outcome", sum.Outcome.String()), slog.String("reason", sum.Reason))
	return sum
}

func (s *Set) run(ctx context.Context, sp Spec) Result {
	if err := ctx.Err(); err != nil {
		return unknown(detectorName(sp), s.sourceOf(sp), -1, fmt.Errorf("detect: %s: %w", detectorName(sp), err))
	}
	switch sp.Type {
	case TypeFile:
		return runFile(sp, s.log)
	case TypeCommand:
		return runCommand(ctx, sp)
	case TypeKernel:
		return s.runKernel(sp)
	case TypeNeedrestart:
		return runNeedrestart(ctx, sp)
	case TypeAuto:
		return s.runAuto(ctx, sp)
	}
	// New rejects unknown types; a Set built otherwise still fails closed.
	return unknown(detectorName(sp), "", -1, fmt.Errorf("%w: unknown type %q", ErrInvalidSpec, sp.Type))
}

func (s *Set) logResult(ctx context.Context, r Result) {
	attrs := []slog.Attr{
		slog.String("detector", r.Detector),
		slog.String("source", r.Source),
		slog.String("outcome", r.Outcome.String()),
		slog.String("reason", r.Reason),
	}
	if r.ExitCode >= 0 {
		attrs = append(attrs, slog.Int("exit_code", r.ExitCode))
	}
	if len(r.Packages) > 0 {
		attrs = append(attrs, slog.Any("packages", r.Packages))
	}
	s.log.LogAttrs(ctx, levelFor(r.Outcome), "detector result", attrs...)
}

func levelFor(o Outcome) slog.Level {
	switch o {
	case Needed:
		return slog.LevelInfo
	case NotNeeded:
		return slog.LevelDebug
	}
	return slog.LevelWarn
}

func detectorName(sp Spec) string {
	if sp.Name != "" {
		return sp.Name
	}
	return sp.Type
}

func (s *Set) sourceOf(sp Spec) string {
	switch sp.Type {
	case TypeKernel:
		return s.bootDir
	case TypeAuto:
		return s.osRelease
	case TypeFile:
		return sp.Path
	case TypeCommand:
		return strings.Join(sp.Cmd, " ")
	case TypeNeedrestart:
		return strings.Join(needrestartArgv(sp), " ")
	}
	return ""
}

// unknown builds an Unknown result; err must be non-nil.
func unknown(detector, source string, exitCode int, err error) Result {
	return Result{
		Detector: detector,
		Source:   source,
		Outcome:  Unknown,
		ExitCode: exitCode,
		Reason:   err.Error(),
		Err:      err,
	}
}
