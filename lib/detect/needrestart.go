package detect

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/clusterrebootd/clusterrebootd/lib/proc"
)

// defaultNeedrestartArgv runs needrestart in batch mode.
var defaultNeedrestartArgv = []string{"needrestart", "-b"}

func needrestartArgv(sp Spec) []string {
	if len(sp.Cmd) > 0 {
		return sp.Cmd
	}
	return slices.Clone(defaultNeedrestartArgv)
}

// NeedrestartStatus is the kernel part of `needrestart -b` output.
type NeedrestartStatus struct {
	KSTA     int    // 0 unknown, 1 current, 2 ABI-compatible upgrade pending, 3 version upgrade pending
	Current  string // NEEDRESTART-KCUR
	Expected string // NEEDRESTART-KEXP
}

// ParseNeedrestart reads the NEEDRESTART-KSTA, -KCUR and -KEXP lines of
// `needrestart -b` output; other lines (VER, SVC, UCSTA, ...) are ignored.
// A missing or malformed KSTA, or two different ones, is an error wrapping
// ErrNeedrestart.
func ParseNeedrestart(out []byte) (NeedrestartStatus, error) {
	st := NeedrestartStatus{KSTA: -1}
	for line := range strings.SplitSeq(string(out), "\n") {
		key, val, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		val = strings.TrimSpace(val)
		switch strings.TrimSpace(key) {
		case "NEEDRESTART-KSTA":
			n, err := strconv.Atoi(val)
			if err != nil || n < 0 {
				return st, fmt.Errorf("%w: bad NEEDRESTART-KSTA %q", ErrNeedrestart, val)
			}
			if st.KSTA >= 0 && st.KSTA != n {
				return st, fmt.Errorf("%w: conflicting NEEDRESTART-KSTA %d and %d", ErrNeedrestart, st.KSTA, n)
			}
			st.KSTA = n
		case "NEEDRESTART-KCUR":
			st.Current = val
		case "NEEDRESTART-KEXP":
			st.Expected = val
		}
	}
	if st.KSTA < 0 {
		return st, fmt.Errorf("%w: no NEEDRESTART-KSTA line", ErrNeedrestart)
	}
	return st, nil
}

// runNeedrestart runs `needrestart -b` (or sp.Cmd): exit 0 with KSTA 1 is
// NotNeeded, KSTA 2 or 3 Needed; a non-zero exit, a timeout, a missing KSTA,
// KSTA 0 or any other value is Unknown.
func runNeedrestart(ctx context.Context, sp Spec) Result {
	name := detectorName(sp)
	argv := needrestartArgv(sp)
	src := strings.Join(argv, " ")
	res, err := proc.Run(ctx, proc.Cmd{Argv: argv, Timeout: sp.Timeout})
	if err != nil {
		return unknown(name, src, res.ExitCode, fmt.Errorf("detect: %s: %w%s", name, err, outputSuffix(res)))
	}
	if res.ExitCode != 0 {
		return unknown(name, src, res.ExitCode, fmt.Errorf("%w: %s: %s exited %d%s",
			ErrUnexpectedExit, name, src, res.ExitCode, outputSuffix(res)))
	}
	st, err := ParseNeedrestart(res.Output)
	if err != nil {
		return unknown(name, src, res.ExitCode, fmt.Errorf("detect: %s: %w", name, err))
	}
	kernels := fmt.Sprintf("running %s, expected %s", orDash(st.Current), orDash(st.Expected))
	r := Result{Detector: name, Source: src, ExitCode: res.ExitCode}
	switch st.KSTA {
	case 1:
		r.Outcome = NotNeeded
		r.Reason = "needrestart: kernel is current (" + kernels + ")"
	case 2:
		r.Outcome = Needed
		r.Reason = "needrestart: ABI-compatible kernel upgrade pending (" + kernels + ")"
	case 3:
		r.Outcome = Needed
		r.Reason = "needrestart: kernel version upgrade pending (" + kernels + ")"
	default:
		return unknown(name, src, res.ExitCode, fmt.Errorf("%w: %s: kernel status %d (%s)",
			ErrNeedrestart, name, st.KSTA, kernels))
	}
	return r
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
