package gate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/proc"
)

// NodeHealth is the local node-health test of DESIGN §4: systemd's
// SystemState must be one of States (an empty list skips this test), and
// the optional Command must exit 0. It feeds the node's alive record (and so
// the other nodes' policies) and the post-boot release.
type NodeHealth struct {
	States []string
	// SystemState reads systemd's state; required when States is not empty.
	SystemState func(ctx context.Context) (string, error)
	Command     []string      // argv, no shell; empty: no command
	Timeout     time.Duration // bounds Command
}

// Healthy reports whether the node is healthy and why. An error means the
// test could not run (bus unreachable, command failed to start or timed
// out): callers treat it as unhealthy.
func (n NodeHealth) Healthy(ctx context.Context) (bool, string, error) {
	var why []string
	if len(n.States) > 0 {
		if n.SystemState == nil {
			return false, "", errors.New("gate: healthy_states set but no systemd connection")
		}
		state, err := n.SystemState(ctx)
		if err != nil {
			return false, "", fmt.Errorf("gate: systemd SystemState: %w", err)
		}
		if !slices.Contains(n.States, state) {
			return false, fmt.Sprintf("systemd state %q not in healthy_states %v", state, n.States), nil
		}
		why = append(why, "systemd "+state)
	}
	if len(n.Command) > 0 {
		res, err := proc.Run(ctx, proc.Cmd{Argv: n.Command, Timeout: n.Timeout})
		if err != nil {
			return false, "", fmt.Errorf("gate: node_health_command: %w", err)
		}
		if res.ExitCode != 0 {
			return false, fmt.Sprintf("node_health_command exit %d: %s", res.ExitCode, res.FirstLine()), nil
		}
		why = append(why, "node_health_command ok")
	}
	if len(why) == 0 {
		return true, "no node health test configured", nil
	}
	return true, strings.Join(why, ", "), nil
}
