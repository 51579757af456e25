package main

import (
	"context"
	"strings"
	"time"

	co "github.com/clusterrebootd/clusterrebootd/lib/coordinator"
	"github.com/clusterrebootd/clusterrebootd/lib/detect"
	"github.com/clusterrebootd/clusterrebootd/lib/gate"
)

// snapshotOf converts the coordinator's view into lib/gate's policy input.
func snapshotOf(self string, v co.View, now time.Time) gate.Snapshot {
	s := gate.Snapshot{Self: self, Members: v.Members}
	for _, a := range v.Alive {
		_, inSlot := v.SlotOf(a.Node)
		s.Nodes = append(s.Nodes, gate.NodeState{Name: a.Node, Alive: true, Healthy: a.Healthy, InSlot: inSlot})
	}
	for _, sl := range v.Slots {
		s.Slots = append(s.Slots, gate.SlotState{Node: sl.Node, Overdue: sl.Overdue(now)})
	}
	return s
}

// policyPort adapts lib/gate's pure policies to coordinator.Policies.
type policyPort struct {
	p gate.Policy // MaxConcurrent and AssumeSlotsReturn are set per call
}

func (pp policyPort) SlotLimit(self string, v co.View, maxConcurrent int, now time.Time) co.PolicyVerdict {
	p := pp.p
	p.MaxConcurrent = maxConcurrent
	return co.PolicyVerdict(gate.SlotLimit(p, snapshotOf(self, v, now)))
}

func (pp policyPort) ClusterHealth(self string, v co.View, assumeSlotsReturn bool, now time.Time) co.PolicyVerdict {
	p := pp.p
	p.AssumeSlotsReturn = assumeSlotsReturn
	return co.PolicyVerdict(gate.ClusterHealth(p, snapshotOf(self, v, now)))
}

// scriptPort runs the health script with the cluster context of the view.
type scriptPort struct {
	script *gate.Script
	env    gate.ScriptEnv // node, cluster, fallback set, endpoints, minima
	policy gate.Policy
}

func (sp scriptPort) Run(ctx context.Context, phase string, v co.View) (co.ScriptVerdict, error) {
	env := sp.env
	counts := gate.Count(sp.policy, snapshotOf(env.Node, v, time.Now()))
	env.ClusterSize, env.HealthyNodes, env.RebootingNodes = counts.Size, counts.HealthyNow, counts.Rebooting
	r, err := sp.script.Run(ctx, gate.Phase(phase), env)
	return co.ScriptVerdict{Allowed: r.Allowed, ExitCode: r.ExitCode, FirstLine: r.FirstLine}, err
}

// windowPort adapts *gate.Schedule.
type windowPort struct{ s *gate.Schedule }

func (w windowPort) Check(now time.Time) co.WindowVerdict {
	v := w.s.Check(now)
	return co.WindowVerdict{Open: v.Open, Reason: v.Reason, NextOpen: v.NextOpen}
}

// detectPort adapts *detect.Set.
type detectPort struct{ s *detect.Set }

func (d detectPort) Detect(ctx context.Context) co.Detection {
	sum := d.s.Detect(ctx)
	var names []string
	for _, r := range sum.Results {
		if r.Outcome == sum.Outcome {
			names = append(names, r.Detector)
		}
	}
	out := co.Detection{Detector: strings.Join(names, ","), Reason: sum.Reason}
	switch sum.Outcome {
	case detect.Needed:
		out.Need = co.NeedYes
	case detect.NotNeeded:
		out.Need = co.NeedNo
	default:
		out.Need = co.NeedUnknown
	}
	return out
}
