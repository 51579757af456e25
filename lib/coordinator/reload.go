package coordinator

import "reflect"

// Reload is a re-read configuration for a running holder (SIGHUP, DESIGN
// §5): its Options and gate adapters replace the running ones at the
// holder's next gate evaluation under the lock (right after the lock is
// taken, or when a slot frees while it waits), never in the middle of one.
//
// What a reload changes: the detectors, windows, health script, built-in
// policies and node-health test with their settings, max_concurrent,
// backoff, max_reboot_duration, post_boot_soak, slot_expiry,
// max_reboots_per_reason, inhibitor respect and the reboot method. What it
// cannot change mid-hold is kept and named in a warning: the node and
// cluster identity (a reload that changes them is refused whole), etcd
// settings and the session (lock.ttl), max_hold_wait (its deadline runs
// from the holder's start), paths and the state and metrics files.
type Reload struct {
	Options Options
	Deps    Deps
}

// Reloads makes Hold apply every Reload received on ch. Call before Hold.
func (c *Coordinator) Reloads(ch <-chan Reload) { c.reloads = ch }

// applyReloads applies the reloads waiting on the channel, without
// blocking. Only the holder's goroutine reads the fields it replaces.
func (h *holdRun) applyReloads() {
	c := h.c
	for {
		select {
		case r := <-c.reloads:
			c.apply(r)
		default:
			return
		}
	}
}

func (c *Coordinator) apply(r Reload) {
	o := r.Options
	if o.Node != c.opt.Node || o.Cluster != c.opt.Cluster {
		c.log.Error("configuration reload refused: node_name and cluster cannot change under a running holder; stop it to apply",
			"event", "reload", "node_name", o.Node, "cluster", o.Cluster)
		return
	}
	var kept []string
	if o.MaxHoldWait != c.opt.MaxHoldWait {
		kept = append(kept, "lock.max_hold_wait")
	}
	if o.KillSwitchPath != c.opt.KillSwitchPath {
		kept = append(kept, "paths.kill_switch")
	}
	if o.CleanupTimeout != c.opt.CleanupTimeout {
		kept = append(kept, "etcd.request_timeout")
	}
	// Identity, flags of this run and what the session depends on stay.
	o.Node, o.Cluster, o.Version, o.Kernel, o.DryRun = c.opt.Node, c.opt.Cluster, c.opt.Version, c.opt.Kernel, c.opt.DryRun
	o.MaxHoldWait, o.KillSwitchPath, o.CleanupTimeout = c.opt.MaxHoldWait, c.opt.KillSwitchPath, c.opt.CleanupTimeout
	changed := !reflect.DeepEqual(o, c.opt)
	c.opt = o
	d := r.Deps
	if d.Detector != nil {
		c.Detector = d.Detector
	}
	if d.Script != nil {
		c.Script = d.Script
	}
	if d.Windows != nil {
		c.Windows = d.Windows
	}
	if d.Policies != nil {
		c.Policies = d.Policies
	}
	if d.NodeHealth != nil {
		c.NodeHealth = d.NodeHealth
	}
	if d.Rebooter != nil {
		c.Rebooter = d.Rebooter
	}
	c.Inhibitors = d.Inhibitors // nil is meaningful: none
	c.log.Warn("configuration reloaded: applied from the next gate evaluation", "event", "reload",
		"options_changed", changed, "not_applied_until_restart", kept)
}
