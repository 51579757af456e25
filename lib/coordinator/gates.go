package coordinator

import (
	"context"
	"fmt"
	"time"
)

// phase selects the gate list of a run.
type phase string

const (
	phasePreLock   phase = "pre-lock"   // Check, before starting the holder
	phaseUnderLock phase = "under-lock" // Hold, owning the mutex
	phaseSimulate  phase = "simulate"   // Simulate: every gate, read-only
)

// GateResult is one gate's verdict.
type GateResult struct {
	Gate   string `json:"gate"`
	Pass   bool   `json:"pass"`
	Code   Code   `json:"code"`
	Reason string `json:"reason"`
	// Wait: the gate is "slots full" and the holder should keep the mutex
	// and wait for a slot to free instead of backing off.
	Wait bool `json:"wait,omitempty"`
	// Abort: the detector re-check found the reboot no longer needed.
	Abort bool `json:"abort,omitempty"`
}

func pass(gate, reason string) GateResult { return GateResult{Gate: gate, Pass: true, Reason: reason} }

func fail(gate string, code Code, reason string) GateResult {
	return GateResult{Gate: gate, Code: code, Reason: reason}
}

// gateInput is what the gates of one evaluation share.
type gateInput struct {
	phase phase
	view  View
	now   time.Time
	det   Detection // filled by the detector gate or by Check beforehand
}

type gate struct {
	name string
	run  func(ctx context.Context, in *gateInput) GateResult
}

// gates returns the ordered gate list of DESIGN §3 for a phase. Pre-lock the
// kill switch and detector ran before (Check needs them earlier) and the slot
// limit is left to the holder, which queues for it. Simulate runs what a
// real check and then its holder would: kill switch, detector, the pre-lock
// gates with pre-lock semantics, then what only the holder checks (slots,
// the policies without assuming slot holders return, inhibitors).
func (c *Coordinator) gates(ph phase) []gate {
	var (
		killSwitch  = gate{"kill-switch", c.gateKillSwitch}
		pause       = gate{"pause", c.gatePause}
		window      = gate{"window", c.gateWindow}
		detector    = gate{"detector", c.gateDetector}
		slots       = gate{"slots", c.gateSlots}
		policyPre   = gate{"policy", c.gatePolicyPreLock}
		policy      = gate{"policy", c.gatePolicy}
		loopGuard   = gate{"reboot-loop-guard", c.gateLoopGuard}
		script      = gate{"health-script", c.gateScript}
		inhibitors  = gate{"inhibitors", c.gateInhibitors}
		policyUnder = gate{"policy-under-lock", c.gatePolicy}
	)
	switch ph {
	case phasePreLock:
		return []gate{pause, window, policyPre, loopGuard, script}
	case phaseSimulate:
		return []gate{killSwitch, detector, pause, window, policyPre, loopGuard, script, slots, policyUnder, inhibitors}
	}
	return []gate{killSwitch, pause, window, detector, slots, policy, loopGuard, script, inhibitors}
}

// evaluate runs the gates in order and stops at the first that does not pass
// (Simulate runs them all). It returns every result and the first failure.
func (c *Coordinator) evaluate(ctx context.Context, in *gateInput) ([]GateResult, *GateResult) {
	var results []GateResult
	var first *GateResult
	for _, g := range c.gates(in.phase) {
		r := g.run(ctx, in)
		r.Gate = g.name
		results = append(results, r)
		if !r.Pass && first == nil {
			first = &results[len(results)-1]
			if in.phase != phaseSimulate {
				break
			}
		}
	}
	if first != nil {
		f := *first
		first = &f
	}
	return results, first
}

func (c *Coordinator) gateKillSwitch(_ context.Context, _ *gateInput) GateResult {
	on, err := c.Host.KillSwitch()
	if err != nil {
		return fail("", CodeBlocked, fmt.Sprintf("cannot tell whether the kill switch %s exists: %v", c.opt.KillSwitchPath, err))
	}
	if on {
		return fail("", CodeBlocked, fmt.Sprintf("kill switch %s present", c.opt.KillSwitchPath))
	}
	return pass("", "no kill switch")
}

func (c *Coordinator) gatePause(_ context.Context, in *gateInput) GateResult {
	if p := in.view.Pause; p != nil {
		return fail("", CodeBlocked, fmt.Sprintf("cluster paused by %s at %s: %s", p.By, p.At.Format(time.RFC3339), p.Reason))
	}
	return pass("", "not paused")
}

func (c *Coordinator) gateWindow(_ context.Context, in *gateInput) GateResult {
	w := c.Windows.Check(in.now)
	if !w.Open {
		reason := w.Reason
		if !w.NextOpen.IsZero() {
			reason += fmt.Sprintf(" (next open %s)", w.NextOpen.Format(time.RFC3339))
		}
		return fail("", CodeBlocked, reason)
	}
	return pass("", w.Reason)
}

func (c *Coordinator) gateDetector(ctx context.Context, in *gateInput) GateResult {
	in.det = c.Detector.Detect(ctx)
	switch in.det.Need {
	case NeedYes:
		return pass("", "reboot needed: "+in.det.Reason)
	case NeedNo:
		return GateResult{Code: CodeOK, Abort: true, Reason: "reboot no longer needed"}
	default:
		return fail("", CodeDetector, "detector error: "+in.det.Reason)
	}
}

func (c *Coordinator) gateSlots(_ context.Context, in *gateInput) GateResult {
	v := c.Policies.SlotLimit(c.opt.Node, in.view, in.view.EffectiveMax(c.opt.MaxConcurrent), in.now)
	if v.Allowed {
		return pass("", v.Reason)
	}
	r := fail("", CodeBusy, v.Reason)
	// A full slot table is worth waiting for under the mutex; an overdue
	// (frozen) one needs an operator, so back off instead.
	r.Wait = v.Rule == "slots"
	return r
}

func (c *Coordinator) gatePolicy(_ context.Context, in *gateInput) GateResult {
	return c.policyVerdict(in, false)
}

// gatePolicyPreLock counts nodes in a slot as coming back: a node may queue
// while another reboots; the holder judges again under the lock.
func (c *Coordinator) gatePolicyPreLock(_ context.Context, in *gateInput) GateResult {
	return c.policyVerdict(in, true)
}

func (c *Coordinator) policyVerdict(in *gateInput, assumeSlotsReturn bool) GateResult {
	v := c.Policies.ClusterHealth(c.opt.Node, in.view, assumeSlotsReturn, in.now)
	if v.Allowed {
		return pass("", v.Reason)
	}
	return fail("", CodeHealth, v.Reason)
}

func (c *Coordinator) gateLoopGuard(_ context.Context, in *gateInput) GateResult {
	st, err := c.State.Load()
	if err != nil {
		return fail("", CodeBlocked, fmt.Sprintf("cannot read the state file: %v", err))
	}
	n := st.RebootsForReason[in.det.Reason]
	if n >= c.opt.MaxRebootsPerReason {
		return fail("", CodeBlocked, fmt.Sprintf(
			"reboot-loop guard: %d coordinated reboot(s) already done for %q and it is still present (max_reboots_per_reason %d); run 'clusterrebootd ack' after checking the node",
			n, in.det.Reason, c.opt.MaxRebootsPerReason))
	}
	return pass("", fmt.Sprintf("%d of %d reboots for this reason", n, c.opt.MaxRebootsPerReason))
}

func (c *Coordinator) gateScript(ctx context.Context, in *gateInput) GateResult {
	ph := string(in.phase)
	if in.phase == phaseSimulate {
		ph = string(phasePreLock)
	}
	v, err := c.Script.Run(ctx, ph, in.view)
	if err != nil {
		return fail("", CodeHealth, fmt.Sprintf("health script failed, counting as unhealthy: %v", err))
	}
	if !v.Allowed {
		return fail("", CodeHealth, fmt.Sprintf("health script exit %d: %s", v.ExitCode, v.FirstLine))
	}
	return pass("", v.FirstLine)
}

func (c *Coordinator) gateInhibitors(ctx context.Context, _ *gateInput) GateResult {
	if c.Inhibitors == nil || !c.opt.RespectInhibitors {
		return pass("", "inhibitors not consulted")
	}
	by, err := c.Inhibitors.Blocking(ctx)
	if err != nil {
		return fail("", CodeBlocked, fmt.Sprintf("cannot list logind inhibitors: %v", err))
	}
	if by != "" {
		return fail("", CodeBlocked, "shutdown blocked by inhibitor: "+by)
	}
	return pass("", "no blocking inhibitor")
}
