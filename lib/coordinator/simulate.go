package coordinator

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// Report is the outcome of Simulate: every gate of a real run with its
// verdict, and the exit code a real check/hold would give.
type Report struct {
	Node      string       `json:"node"`
	Need      string       `json:"reboot_needed"`
	Detector  string       `json:"detector,omitempty"`
	Reason    string       `json:"reason,omitempty"`
	Gates     []GateResult `json:"gates"`
	Code      Code         `json:"exit_code"`
	Verdict   string       `json:"verdict"`
	Evaluated time.Time    `json:"evaluated_at"`
}

// Simulate runs the whole decision read-only: it takes no lock, writes
// nothing to etcd or the state file, and runs the health script in phase
// pre-lock. Gates are evaluated in the order a real check and then its
// holder meet them, and all of them are reported, not only up to the first
// that blocks; the exit code is that of the first that blocks. Like a real
// check, a kill switch ends it before etcd is contacted.
func (c *Coordinator) Simulate(ctx context.Context) (Report, error) {
	now := c.Now()
	r := Report{Node: c.opt.Node, Evaluated: now}
	if ks := c.gateKillSwitch(ctx, nil); !ks.Pass {
		ks.Gate = "kill-switch"
		r.Gates = []GateResult{ks}
		r.Need, r.Code, r.Verdict = needText(NeedUnknown), ks.Code, "blocked by kill-switch: "+ks.Reason
		return r, nil
	}
	view, err := c.Cluster.View(ctx)
	if err != nil {
		f := failure("etcd", err)
		r.Code, r.Verdict = f.Code, f.Error()
		return r, f
	}
	own := GateResult{Gate: "own-slot", Pass: true, Reason: "no slot held by this node"}
	if s, ok := view.SlotOf(c.opt.Node); ok {
		own = GateResult{Gate: "own-slot", Code: CodeBusy, Reason: fmt.Sprintf(
			"this node holds a slot since %s (%s); the next check releases it once back and healthy",
			s.AcquiredAt.Format(time.RFC3339), s.Reason)}
	}
	lock := GateResult{Gate: "lock", Pass: true, Reason: "the cluster lock is free"}
	if len(view.Queue) > 0 && view.Queue[0].Node != c.opt.Node {
		lock.Reason = fmt.Sprintf("a holder would queue at position %d behind %s", len(view.Queue)+1, waiterName(view.Queue[0]))
		if view.Queue[0].Node == "" {
			// Not one of ours: nothing moves until an operator releases it.
			lock = GateResult{Gate: "lock", Code: CodeBusy, Reason: "the cluster lock is held by " + waiterName(view.Queue[0]) +
				"; a holder would wait for it until max_hold_wait"}
		}
	}
	in := &gateInput{phase: phaseSimulate, view: view, now: now}
	gates, first := c.evaluate(ctx, in)
	// The holder meets the lock after the pre-lock gates, before "slots".
	at := slices.IndexFunc(gates, func(g GateResult) bool { return g.Gate == "slots" })
	if at < 0 {
		at = len(gates)
	}
	lockDecides := !lock.Pass && (first == nil || slices.IndexFunc(gates, func(g GateResult) bool { return g.Gate == first.Gate }) >= at)
	r.Gates = append([]GateResult{own}, slices.Insert(slices.Clone(gates), at, lock)...)
	r.Need, r.Detector, r.Reason = needText(in.det.Need), in.det.Detector, in.det.Reason
	switch {
	case !own.Pass:
		r.Code, r.Verdict = CodeOK, "no new reboot: "+own.Reason
	case lockDecides:
		r.Code, r.Verdict = lock.Code, "blocked by lock: "+lock.Reason
	case first == nil:
		r.Code, r.Verdict = CodeOK, "a real run would start the holder and reboot now"
	case first.Abort:
		r.Code, r.Verdict = CodeOK, "no reboot needed"
	default:
		r.Code, r.Verdict = first.Code, fmt.Sprintf("blocked by %s: %s", first.Gate, first.Reason)
	}
	return r, nil
}

func needText(n Need) string {
	switch n {
	case NeedYes:
		return "yes"
	case NeedNo:
		return "no"
	}
	return "unknown"
}
