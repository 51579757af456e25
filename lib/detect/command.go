package detect

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/clusterrebootd/clusterrebootd/lib/proc"
)

// runCommand runs sp.Cmd and maps its exit code: NeededExitCodes → Needed,
// NotNeededExitCodes → NotNeeded, anything else (and any start failure,
// signal or timeout) → Unknown.
func runCommand(ctx context.Context, sp Spec) Result {
	name := detectorName(sp)
	src := strings.Join(sp.Cmd, " ")
	res, err := proc.Run(ctx, proc.Cmd{Argv: sp.Cmd, Timeout: sp.Timeout})
	if err != nil {
		return unknown(name, src, res.ExitCode, fmt.Errorf("detect: %s: %w%s", name, err, outputSuffix(res)))
	}
	code := res.ExitCode
	switch {
	case slices.Contains(sp.NeededExitCodes, code):
		pkgs := parseNeedsRestarting(res.Lines())
		return Result{Detector: name, Source: src, Outcome: Needed, ExitCode: code, Packages: pkgs,
			Reason: fmt.Sprintf("%s exited %d (needed)%s", src, code, packagesSuffix(pkgs))}
	case slices.Contains(sp.NotNeededExitCodes, code):
		return Result{Detector: name, Source: src, Outcome: NotNeeded, ExitCode: code,
			Reason: fmt.Sprintf("%s exited %d (not needed)", src, code)}
	}
	return unknown(name, src, code, fmt.Errorf("%w: %s: %s exited %d%s",
		ErrUnexpectedExit, name, src, code, outputSuffix(res)))
}

// outputSuffix renders the first output line for an error message.
func outputSuffix(res proc.Result) string {
	if l := res.FirstLine(); l != "" {
		return fmt.Sprintf(" (output: %q)", l)
	}
	return ""
}

// needsRestartingHeader starts the package list of `needs-restarting -r`
// (yum-utils, dnf 4 and dnf 5 share it).
const needsRestartingHeader = "Core libraries or services have been updated since boot-up:"

// parseNeedsRestarting extracts the " * name" lines that follow the header.
// Output without the header gives nil.
func parseNeedsRestarting(lines []string) []string {
	var pkgs []string
	in := false
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if !in {
			in = t == needsRestartingHeader
			continue
		}
		name, ok := strings.CutPrefix(t, "*")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			if len(pkgs) > 0 || t != "" {
				break
			}
			continue
		}
		if !slices.Contains(pkgs, name) {
			pkgs = append(pkgs, name)
		}
	}
	return pkgs
}
