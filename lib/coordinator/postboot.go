package coordinator

import (
	"context"
	"fmt"
	"time"
)

// postBoot handles this node's own slot at the start of a check run
// (DESIGN §3). It reports held = true while the slot must stay.
//
// gateView, when not nil, is the health script's view already being read
// (Check starts it early when the state file says a reboot of ours is being
// completed, see prefetchGateView); otherwise it is read here. health, when
// not nil, is the run's local health test (Check starts it at once);
// otherwise it runs here.
func (c *Coordinator) postBoot(ctx context.Context, slot Slot, bootID string, alive *Alive, gateView func() viewResult, health func() healthResult) (held bool, _ error) {
	now := c.Now()
	if slot.BootID == bootID {
		return c.sameBoot(ctx, slot, bootID, alive)
	}

	alive.State = StateVerifying
	// The health script's view (without the mutex queue, which it does not
	// use and which can be long) is read while the local health test runs;
	// it is used only if the node is healthy.
	if gateView == nil {
		gateView = c.startGateView(ctx)
	}
	if health == nil {
		health = func() healthResult { return c.healthTest(ctx) }
	}
	h := health()
	ok, why := h.ok, h.why
	r := gateView()
	if ok {
		if r.err != nil {
			return true, failure("etcd", r.err)
		}
		v, err := c.Script.Run(ctx, PhasePostBoot, r.v)
		switch {
		case err != nil:
			ok, why = false, fmt.Sprintf("health script failed: %v", err)
		case !v.Allowed:
			ok, why = false, fmt.Sprintf("health script exit %d: %s", v.ExitCode, v.FirstLine)
		}
	}
	if !ok {
		alive.Blocked = "post-boot health failed, slot kept: " + why
		if !slot.HealthySince.IsZero() {
			slot.HealthySince = time.Time{}
			if _, err := c.Cluster.UpdateSlot(ctx, slot); err != nil {
				c.log.Warn("could not reset healthy_since", "error", err)
			}
		}
		c.log.Warn("back from reboot but not healthy: keeping the slot", "event", "post-boot-unhealthy", "reason", why, "health_status", "unhealthy")
		return true, blocked(CodeHealth, "post-boot", alive.Blocked)
	}

	if slot.HealthySince.IsZero() {
		slot.HealthySince = now
		if c.opt.PostBootSoak > 0 {
			var err error
			if slot, err = c.Cluster.UpdateSlot(ctx, slot); err != nil {
				return true, failure("etcd", err)
			}
		}
	}
	if soaked := now.Sub(slot.HealthySince); soaked < c.opt.PostBootSoak {
		alive.Blocked = fmt.Sprintf("post-boot soak: healthy for %s of %s", soaked.Round(time.Second), c.opt.PostBootSoak)
		c.log.Info("back from reboot and healthy, soaking", "event", "post-boot-soak", "reason", alive.Blocked)
		return true, nil
	}

	// The reboot-loop guard counts reboots that happened (a new boot_id),
	// so a dry run, a failed reboot call or a holder killed before the call
	// never count. The count is saved before the slot goes: a state file
	// that cannot be written keeps the slot (the guard must not fail open),
	// and a release that fails is retried without counting twice.
	//
	// Meanwhile, tell the cluster this node is healthy again before the
	// slot goes, so the holder that wakes on the release counts it as up.
	// If the count cannot be saved, the run's own alive record (published
	// when the check ends) says why the slot is kept.
	up := *alive
	up.State, up.Healthy, up.Blocked, up.UpdatedAt = StateIdle, true, "", now
	published := goValue(func() error { return c.Cluster.PublishAlive(ctx, up) })
	if err := c.countReboot(slot, now); err != nil {
		published()
		alive.Blocked = "cannot record the reboot for the reboot-loop guard, slot kept: " + err.Error()
		c.log.Error("back from reboot but the state file cannot be written: keeping the slot", "event", "post-boot-state-error", "error", err)
		return true, failure("state", err)
	}
	*alive = up
	if err := published(); err != nil {
		return true, failure("etcd", err)
	}
	dur := now.Sub(slot.AcquiredAt)
	ev := HistoryEvent{Event: EventCompleted, Node: c.opt.Node, Reason: slot.Reason, BootID: bootID, At: now, DurationMS: dur.Milliseconds()}
	if err := c.Cluster.ReleaseSlot(ctx, slot, ev); err != nil {
		return true, failure("etcd", err)
	}
	c.log.Info("reboot completed, slot released", "event", "slot-released", "action", "release",
		"reason", slot.Reason, "duration_ms", dur.Milliseconds(), "health_status", "healthy")
	if err := c.Host.MarkRebooted(now); err != nil {
		c.log.Warn("could not write the rebooted marker", "error", err)
	}
	return false, nil
}

// countReboot records slot's completed reboot in the state file once: the
// slot's identity (boot and acquisition time) is kept with the count.
func (c *Coordinator) countReboot(slot Slot, now time.Time) error {
	st, err := c.State.Load()
	if err != nil {
		return err
	}
	id := slot.BootID + "@" + slot.AcquiredAt.UTC().Format(time.RFC3339Nano)
	if st.CountedSlot == id {
		return nil
	}
	if st.RebootsForReason == nil {
		st.RebootsForReason = map[string]int{}
	}
	st.RebootsForReason[slot.Reason]++
	st.LastRebootAt, st.LastRebootReason, st.SlotBootID, st.CountedSlot = now, slot.Reason, "", id
	return c.State.Save(st)
}

// sameBoot: the slot was taken in this boot. Either the reboot is still on
// its way (a holder runs, or it asked for the reboot), or it never happened
// and the slot must not block the cluster.
func (c *Coordinator) sameBoot(ctx context.Context, slot Slot, bootID string, alive *Alive) (bool, error) {
	alive.State = StateRebooting
	active, err := c.Holder.Active(ctx)
	if err != nil {
		return true, failure("holder", err)
	}
	requested, err := c.Host.RebootRequested(bootID)
	if err != nil {
		return true, failure("marker", err)
	}
	switch {
	case active:
		alive.Blocked = "reboot in progress"
		c.log.Info("own slot held and reboot in progress", "event", "check", "action", "none")
		return true, nil
	case requested && !slot.Overdue(c.Now()):
		alive.Blocked = "reboot in progress"
		c.log.Info("own slot held and reboot in progress", "event", "check", "action", "none")
		return true, nil
	case requested && !c.opt.SlotExpiryRelease:
		// The reboot was requested but the node never went down within
		// max_reboot_duration (e.g. the holder died before the call): the
		// cluster stays frozen until an operator looks (slot_expiry =
		// freeze).
		alive.Blocked = "reboot requested but the node never went down; slot overdue: run 'clusterrebootd release' after checking the node"
		c.log.Error("own slot overdue without a reboot: cluster frozen until an operator releases it", append([]any{"event", "slot-overdue"}, logAttrsSlot(slot)...)...)
		return true, nil
	case requested:
		// slot_expiry = release: free it like any other holder would.
		ev := HistoryEvent{Event: EventExpired, Node: c.opt.Node, By: c.opt.Node, BootID: bootID, At: c.Now(),
			Reason: "reboot requested but the node never went down before the deadline: " + slot.Reason}
		if err := c.Cluster.ReleaseSlot(ctx, slot, ev); err != nil {
			return true, failure("etcd", err)
		}
		_ = c.Host.ClearRebootRequested()
		c.log.Error("own slot expired without a reboot: released (slot_expiry = release)", append([]any{"event", "slot-expired"}, logAttrsSlot(slot)...)...)
		alive.State = StateIdle
		return false, nil
	}
	ev := HistoryEvent{Event: EventAborted, Node: c.opt.Node, Reason: "reboot never happened (same boot_id, no holder): " + slot.Reason,
		BootID: bootID, At: c.Now()}
	if err := c.Cluster.ReleaseSlot(ctx, slot, ev); err != nil {
		return true, failure("etcd", err)
	}
	c.log.Error("own slot held but the reboot never happened: slot released", append([]any{"event", "slot-aborted"}, logAttrsSlot(slot)...)...)
	alive.State = StateIdle
	return false, nil
}

// PhasePostBoot is the health script phase after a reboot.
const PhasePostBoot = "post-boot"

// releaseDespiteKillSwitch: the kill switch stops this node's reboots, not
// the cluster. When the state file says this node asked for a coordinated
// reboot in an earlier boot, the slot of that reboot is released as usual
// (health, soak); otherwise etcd is not contacted at all. Errors are logged:
// the run ends blocked by the kill switch either way.
func (c *Coordinator) releaseDespiteKillSwitch(ctx context.Context) {
	st, err := c.State.Load()
	if err != nil || st.SlotBootID == "" {
		return
	}
	bootID, err := c.Host.BootID()
	if err != nil || bootID == st.SlotBootID {
		return // the reboot has not happened yet
	}
	view, err := c.Cluster.View(ctx)
	if err != nil {
		c.log.Warn("kill switch on; could not look for this node's slot after its reboot", "error", err)
		return
	}
	slot, ok := view.SlotOf(c.opt.Node)
	if !ok || slot.BootID == bootID {
		if !ok { // released meanwhile (by an operator): forget the hint
			st.SlotBootID = ""
			if err := c.State.Save(st); err != nil {
				c.log.Warn("could not update the state file", "error", err)
			}
		}
		return
	}
	alive := Alive{Node: c.opt.Node, BootID: bootID, Kernel: c.opt.Kernel, Version: c.opt.Version,
		MaxConcurrent: c.opt.MaxConcurrent, State: StateVerifying}
	held, err := c.postBoot(ctx, slot, bootID, &alive, nil, nil)
	switch {
	case err != nil:
		c.log.Warn("kill switch on; the slot of the finished reboot is kept", "error", err)
	case held:
		c.log.Info("kill switch on; the slot of the finished reboot is kept for now", "reason", alive.Blocked)
	default:
		c.recorder().RebootCompleted()
	}
	if held {
		alive.State = StateVerifying
	} else {
		alive.State, alive.Blocked = StateBlocked, "kill switch"
	}
	alive.UpdatedAt = c.Now()
	if err := c.Cluster.PublishAlive(ctx, alive); err != nil {
		c.log.Warn("could not publish alive record", "error", err)
	}
}
