package coordinator

import (
	"context"
	"errors"
	"log/slog"
	"slices"
)

// Check is one timer tick (`check --once`): kill switch (which still lets a
// finished reboot's slot go, see releaseDespiteKillSwitch) → post-boot release
// of this node's own slot → detect → pre-lock gates → start the holder. The
// node's alive record is published once on the way out with what the run
// found, so the cluster sees every node's state and its reason.
func (c *Coordinator) Check(ctx context.Context) error {
	if r := c.gateKillSwitch(ctx, nil); !r.Pass {
		c.log.Warn("reboots disabled", "event", "blocked", "reason", r.Reason)
		c.releaseDespiteKillSwitch(ctx)
		return blocked(r.Code, "kill-switch", r.Reason)
	}
	bootID, err := c.Host.BootID()
	if err != nil {
		return failure("boot-id", err)
	}
	// The common case needs nothing of the other nodes: read them only
	// when a reboot is needed (O(1) per idle tick, whatever the fleet).
	// The local health test (a D-Bus call) runs meanwhile; a post-boot
	// check uses the same result.
	health := goValue(func() healthResult { return c.healthTest(ctx) })
	gateView := c.prefetchGateView(ctx, bootID)
	if gateView != nil {
		defer gateView() // joined even when no slot needed it
	}
	view, err := c.Cluster.NodeView(ctx, c.opt.Node)
	if err != nil {
		health()
		return failure("etcd", err)
	}
	if !slices.Contains(view.Members, c.opt.Node) {
		if err := c.Cluster.Register(ctx, c.opt.Node); err != nil {
			return failure("etcd", err)
		}
		c.log.Info("registered as cluster member", "event", "registered")
	}

	alive := Alive{Node: c.opt.Node, BootID: bootID, Kernel: c.opt.Kernel, Version: c.opt.Version,
		MaxConcurrent: c.opt.MaxConcurrent, State: StateIdle}
	alive.Healthy = health().ok
	holderOwnsRecord := false // once a holder runs, its states are the record
	publish := func() {
		alive.UpdatedAt = c.Now()
		pctx, cancel := c.cleanupCtx(ctx)
		defer cancel()
		if err := c.Cluster.PublishAlive(pctx, alive); err != nil {
			c.log.Warn("could not publish alive record", "error", err)
		}
		c.recorder().Observed(observe(alive, view, c.opt.Node, alive.UpdatedAt))
	}
	defer func() {
		if !holderOwnsRecord {
			publish()
		}
	}()

	if slot, ok := view.SlotOf(c.opt.Node); ok {
		held, err := c.postBoot(ctx, slot, bootID, &alive, gateView, health)
		if !held && slot.BootID != bootID {
			c.recorder().RebootCompleted() // released after a new boot (a state-file error may follow)
		}
		if err != nil || held {
			return err
		}
		// Released: read again (the gates below read the whole cluster).
		if view, err = c.Cluster.NodeView(ctx, c.opt.Node); err != nil {
			return failure("etcd", err)
		}
	}

	det := c.Detector.Detect(ctx)
	alive.Detector, alive.Reason = det.Detector, det.Reason
	switch det.Need {
	case NeedUnknown:
		alive.State, alive.Blocked = StateError, "detector error: "+det.Reason
		c.log.Error("detector error: no reboot", "event", "detector-error", "detector", det.Detector, "reason", det.Reason)
		return blocked(CodeDetector, "detector", det.Reason)
	case NeedNo:
		alive.Reason = ""
		c.log.Info("no reboot needed", "event", "check", "detector", det.Detector, "action", "none")
		return c.forgetReasons()
	}
	alive.RebootRequired = true

	active, err := c.Holder.Active(ctx)
	if err != nil {
		alive.State, alive.Blocked = StateError, "cannot tell whether a holder runs: "+err.Error()
		return failure("holder", err)
	}
	if active {
		// Refresh the record (its lease) but keep what the holder said.
		alive.State = StateWaiting
		if own, ok := view.AliveOf(c.opt.Node); ok && own.BootID == bootID {
			alive.State, alive.Blocked = own.State, own.Blocked
		}
		c.log.Info("reboot needed; a holder is already running", "event", "check", "action", "none", "reason", det.Reason)
		return nil
	}

	// The pre-lock gates read every member and alive record but not the
	// mutex queue (as under the lock): with many holders queued, the queue
	// is most of the bytes.
	if view, err = c.Cluster.GateView(ctx); err != nil {
		alive.State, alive.Blocked = StateError, "cannot read the cluster: "+err.Error()
		return failure("etcd", err)
	}
	in := &gateInput{phase: phasePreLock, view: view, now: c.Now(), det: det}
	if _, f := c.evaluate(ctx, in); f != nil {
		alive.State, alive.Blocked = StateBlocked, f.Reason
		c.log.Warn("reboot needed but blocked", "event", "blocked", "gate", f.Gate, "reason", f.Reason, "health_status", healthStatus(f))
		return blocked(f.Code, f.Gate, f.Reason)
	}

	alive.State = StateWaiting
	publish()
	holderOwnsRecord = true
	c.log.Info("reboot needed; starting the lock holder", "event", "holder-start", "action", "hold", "reason", det.Reason, "detector", det.Detector)
	err = c.Holder.Start(ctx)
	var holderErr *Error
	if err == nil || errors.As(err, &holderErr) {
		// The holder ran (in-process) or runs (transient unit) and
		// publishes its own states; do not overwrite them.
		return err
	}
	holderOwnsRecord = false
	alive.State, alive.Blocked = StateError, "holder: "+err.Error()
	return holderFailure(err)
}

// holderFailure is the run's error when the holder did not come up. A
// holder that exited before it was ready with one of the codes of DESIGN §6
// (a config error, etcd unreachable, ...) gives the check that code, so the
// check unit's status tells the same story as the holder's journal.
func holderFailure(err error) *Error {
	e := failure("holder", err)
	var exited interface{ ExitStatus() int }
	if errors.As(err, &exited) {
		if c := Code(exited.ExitStatus()); c >= CodeConfig && c <= CodeDetector {
			e.Code = c
		}
	}
	return e
}

// nodeHealthy runs the local node-health test; an error counts as unhealthy.
func (c *Coordinator) nodeHealthy(ctx context.Context) (bool, string) {
	ok, why, err := c.NodeHealth.Healthy(ctx)
	if err != nil {
		return false, "node health unknown: " + err.Error()
	}
	return ok, why
}

// forgetReasons clears the reboot-loop guard once detection says the node no
// longer needs a reboot: the reasons it counted are gone.
func (c *Coordinator) forgetReasons() error {
	st, err := c.State.Load()
	if err != nil {
		return failure("state", err)
	}
	if len(st.RebootsForReason) == 0 {
		return nil
	}
	st.RebootsForReason = nil
	if err := c.State.Save(st); err != nil {
		return failure("state", err)
	}
	return nil
}

func healthStatus(f *GateResult) string {
	if f.Code == CodeHealth {
		return "unhealthy"
	}
	return "n/a"
}

// logAttrsSlot are the fields logged for a slot.
func logAttrsSlot(s Slot) []any {
	return []any{slog.Group("slot", "node", s.Node, "boot_id", s.BootID, "fence", s.FenceRevision,
		"acquired_at", s.AcquiredAt, "deadline", s.Deadline)}
}
