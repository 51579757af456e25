package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/coreos/go-systemd/v22/daemon"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	co "github.com/clusterrebootd/clusterrebootd/lib/coordinator"
	"github.com/clusterrebootd/clusterrebootd/lib/gate"
	"github.com/clusterrebootd/clusterrebootd/lib/obs"
	"github.com/clusterrebootd/clusterrebootd/lib/systemd"
)

// Env is what every command's Run receives: the run's context, the global
// flags, the output streams and facts main read from the process
// environment (lib/ never reads the environment itself).
type Env struct {
	Ctx           context.Context
	G             *Globals
	Stdout        io.Writer
	Stderr        io.Writer
	JournalStream bool   // JOURNAL_STREAM set: stderr is connected to journald
	Hostname      string // for the default node_name
	User          string // who runs an operator command (history "by")
}

func newEnv(ctx context.Context, g *Globals) *Env {
	host, _ := os.Hostname()
	user := os.Getenv("SUDO_USER")
	if user == "" {
		user = os.Getenv("USER")
	}
	if user == "" {
		user = fmt.Sprintf("uid %d", os.Getuid())
	}
	return &Env{Ctx: ctx, G: g, Stdout: os.Stdout, Stderr: os.Stderr,
		JournalStream: os.Getenv("JOURNAL_STREAM") != "", Hostname: host, User: user}
}

// configError makes a configuration problem exit 2.
type configError struct{ err error }

func (e configError) Error() string { return e.err.Error() }
func (e configError) Unwrap() error { return e.err }
func (e configError) ExitCode() int { return 2 }
func usageError(format string, a ...any) error {
	return configError{fmt.Errorf(format, a...)}
}

// loadConfig reads the configuration (fresh on every run) and applies the
// global --dry-run.
func (e *Env) loadConfig() (*config.Config, error) {
	src := config.DefaultSource()
	if e.G.Config != "" {
		src = config.SourceFor(e.G.Config)
	}
	cfg, err := config.Load(src, config.Options{
		Hostname: e.Hostname,
		ValidateWindow: func(spec string) error {
			_, err := gate.ParseWindow(spec)
			return err
		},
	})
	if err != nil {
		if errors.Is(err, config.ErrInvalid) {
			return nil, configError{err}
		}
		return nil, configError{fmt.Errorf("config: %w", err)}
	}
	if e.G.DryRun {
		cfg.DryRun = true
	}
	return cfg, nil
}

// logger builds the run's logger: journald fields under systemd, else JSON
// or text lines on stderr.
func (e *Env) logger() (*slog.Logger, error) {
	format := e.G.LogFormat
	if format == "" {
		format = obs.FormatText
		if e.JournalStream {
			format = obs.FormatJournal
		}
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(strings.ToUpper(e.G.LogLevel))); err != nil {
		return nil, usageError("--log-level: %v", err)
	}
	log, err := obs.NewLogger(obs.LogOptions{Format: format, Level: level, Writer: e.Stderr})
	if err != nil {
		return nil, usageError("--log-format: %v", err)
	}
	return log, nil
}

// holderArgv is the command line of the transient holder unit: this
// binary, the same configuration and global flags, "hold".
func (e *Env) holderArgv() []string {
	self, err := os.Executable()
	if err != nil {
		self = "/usr/bin/clusterrebootd"
	}
	argv := []string{self}
	if e.G.Config != "" {
		argv = append(argv, "--config", e.G.Config)
	}
	if e.G.DryRun {
		argv = append(argv, "--dry-run")
	}
	if e.G.LogFormat != "" {
		argv = append(argv, "--log-format", e.G.LogFormat)
	}
	return append(argv, "--log-level", e.G.LogLevel, "hold")
}

// notifier talks sd_notify to the service manager when there is one
// (NOTIFY_SOCKET, read by go-systemd); the watchdog interval comes from
// WATCHDOG_USEC.
func (e *Env) notifier(log *slog.Logger) co.Notifier {
	n := systemd.NewNotifier(log)
	if d, err := daemon.SdWatchdogEnabled(false); err == nil {
		n.WatchdogInterval = d
	}
	return n
}
