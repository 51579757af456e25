package reboot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/proc"
)

// ErrCommandFailed is returned when the reboot command exits non-zero.
var ErrCommandFailed = errors.New("reboot: command failed")

// ErrRefused marks a definite "no reboot was requested": the command could
// not start or exited non-zero, logind replied with an error, or the bus
// could not be reached. Any other error is uncertain: the call got no
// answer (timeout, connection lost, killed) and the reboot may be on its
// way, so the caller must keep the node's slot.
var ErrRefused = errors.New("reboot: refused")

// Command reboots by running an argv (`[reboot] method = "command"`). The
// placeholder {reason} in any argument is replaced by the reboot reason; the
// reason is also in the environment as CLUSTERREBOOTD_REASON.
type Command struct {
	Argv    []string
	Timeout time.Duration
	Logger  *slog.Logger
}

// Reboot runs the command and checks its exit status.
func (c *Command) Reboot(ctx context.Context, reason string) error {
	if len(c.Argv) == 0 {
		return fmt.Errorf("%w: no command configured", ErrRefused)
	}
	argv := make([]string, len(c.Argv))
	for i, a := range c.Argv {
		argv[i] = strings.ReplaceAll(a, "{reason}", reason)
	}
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	res, err := proc.Run(ctx, proc.Cmd{
		Argv:    argv,
		Env:     []string{proc.SafePath, "CLUSTERREBOOTD_REASON=" + reason},
		Timeout: c.Timeout,
	})
	for _, line := range res.Lines() {
		log.Info("reboot command output", "line", line)
	}
	if err != nil {
		if errors.Is(err, proc.ErrStart) { // never ran
			return fmt.Errorf("%w: %w", ErrRefused, err)
		}
		return fmt.Errorf("reboot: %w", err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("%w: %w: %s exited %d: %s", ErrRefused, ErrCommandFailed, argv[0], res.ExitCode, res.FirstLine())
	}
	return nil
}
