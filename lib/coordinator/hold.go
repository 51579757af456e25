package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Hold is the lock holder (`clusterrebootd hold`): session → mutex → gates
// under the lock → fenced slot → unlock → reboot. Gate failures release the
// mutex and retry with backoff until max_hold_wait; a full slot table is
// waited for under the mutex with a watch. Whatever happens, the mutex is
// released and the session lease revoked on the way out.
func (c *Coordinator) Hold(ctx context.Context) error {
	if c.opt.MaxHoldWait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.opt.MaxHoldWait)
		defer cancel()
	}
	bootID, err := c.Host.BootID()
	if err != nil {
		return failure("boot-id", err)
	}
	sess, err := c.Cluster.NewSession(ctx, LockInfo{Node: c.opt.Node, PID: c.pid(), BootID: bootID})
	if err != nil {
		return failure("etcd", err)
	}
	log := c.log.With("lease_id", fmt.Sprintf("%x", sess.LeaseID()))
	defer func() {
		cctx, cancel := c.cleanupCtx(ctx)
		defer cancel()
		if err := sess.Close(cctx); err != nil {
			log.Warn("could not revoke the session lease; it expires after lock.ttl", "error", err)
		}
	}()
	// sctx ends when the session dies (lease expired, partition): from then
	// on nothing may be decided under a mutex we may no longer own.
	sctx, cancelSess := context.WithCancelCause(ctx)
	defer cancelSess(nil)
	go func() {
		select {
		case <-sess.Done():
			cancelSess(ErrLockLost)
		case <-sctx.Done():
		}
	}()

	c.Notify.Ready()
	go c.Notify.Watchdog(sctx, sess.KeepAliveHealthy)
	h := &holdRun{c: c, sess: sess, ctx: sctx, bootID: bootID}
	h.log = log
	return h.run()
}

// holdRun is the state of one Hold.
type holdRun struct {
	c        *Coordinator
	sess     Session
	ctx      context.Context
	bootID   string
	log      *slog.Logger
	attempt  int
	last     *GateResult // the most recent blocking gate, for the final error
	locked   bool
	queued   string // where this holder queued, for the error if it never gets the lock
	position int    // its place in the queue then (0: unknown)
}

func (h *holdRun) run() error {
	c := h.c
	for {
		h.attempt++
		// Where we queue is read and published while we queue: with
		// nobody ahead, Lock returns after two round trips, and the
		// first reboot of a rollout waits for it.
		queued := goValue(h.announceQueued)
		start := c.Now()
		err := h.sess.Lock(h.ctx)
		q := queued()
		h.queued, h.position = q.line, q.position
		if err != nil {
			return h.stopped("waiting for the cluster lock", err)
		}
		h.locked = true
		c.recorder().LockAcquired(c.Now().Sub(start))
		h.log.Info("cluster lock acquired", "event", "lock-acquired", "attempt", h.attempt,
			"lock_wait_ms", c.Now().Sub(start).Milliseconds())

		res, det, err := h.underLock()
		if err != nil {
			h.unlock()
			return err
		}
		if res != nil && res.Abort {
			h.unlock()
			h.log.Info("reboot no longer needed: holder ends", "event", "aborted", "attempt", h.attempt)
			h.publish(StateIdle, "")
			return nil
		}
		if res != nil {
			h.last = res
			h.unlock()
			h.publish(StateBlocked, res.Reason)
			d := backoff(h.attempt, c.opt.BackoffMin, c.opt.BackoffMax)
			h.log.Warn("blocked under the lock; retrying after backoff", "event", "blocked", "gate", res.Gate,
				"reason", res.Reason, "attempt", h.attempt, "backoff", d, "health_status", healthStatus(res))
			if err := sleepCtx(h.ctx, d); err != nil {
				return h.stopped("backing off", err)
			}
			continue
		}
		return h.reboot(det)
	}
}

// announceQueued publishes the waiting state with this holder's place in
// the mutex queue and returns that line. It runs while Lock queues: the
// read may already see our own entry.
func (h *holdRun) announceQueued() queuedAt {
	q := queuedAt{line: "queued for the cluster lock"}
	if v, err := h.c.Cluster.QueueView(h.ctx); err == nil {
		ahead := v.Queue
		if i := v.QueuePosition(h.c.opt.Node); i > 0 {
			ahead = v.Queue[:i-1]
		}
		q.position = len(ahead) + 1
		q.line += fmt.Sprintf(", position %d", q.position)
		if len(ahead) > 0 {
			q.line += ", held by " + waiterName(ahead[0])
		}
	}
	h.publish(StateWaiting, q.line)
	return q
}

// queuedAt is where a holder queued: the line it published and its place
// (0 when the queue could not be read).
type queuedAt struct {
	line     string
	position int
}

// underLock evaluates the gates while owning the mutex. A full slot table is
// waited out here (watching P/slots/), then every gate runs again. It returns
// the blocking gate (nil when all passed) and the detection.
func (h *holdRun) underLock() (*GateResult, Detection, error) {
	c := h.c
	// With more holders ahead of us than slots, the one before us most
	// likely took the last free slot: look at the slots alone first
	// (slotsFull). Otherwise, and after every wake on a slot change, a slot
	// is most likely free and the full view is read at once.
	cheap := h.position > c.opt.MaxConcurrent
	for {
		h.applyReloads()
		if cheap {
			cheap = false
			full, rev, err := h.slotsFull()
			if err != nil {
				return nil, Detection{}, h.stopped("reading cluster state", err)
			}
			if full != nil {
				if err := h.waitSlot(full, rev); err != nil {
					return nil, Detection{}, err
				}
				continue
			}
		}
		view, err := c.Cluster.GateView(h.ctx)
		if err != nil {
			return nil, Detection{}, h.stopped("reading cluster state", err)
		}
		if err := h.expireOverdue(&view); err != nil {
			return nil, Detection{}, err
		}
		in := &gateInput{phase: phaseUnderLock, view: view, now: c.Now()}
		_, f := c.evaluate(h.ctx, in)
		if f != nil && h.ctx.Err() != nil {
			// The session died (or the holder was stopped) while a gate
			// ran: whatever the gate said came from a cancelled call, so it
			// is not kept as the last gate that blocked.
			return nil, Detection{}, h.stopped("evaluating the gates under the lock", context.Cause(h.ctx))
		}
		if f != nil && f.Wait {
			if err := h.waitSlot(f, view.Revision); err != nil {
				return nil, Detection{}, err
			}
			continue
		}
		if f != nil && f.Code == CodeDetector {
			return nil, Detection{}, blocked(CodeDetector, "detector", f.Reason)
		}
		return f, in.det, nil
	}
}

// waitSlot waits, keeping the mutex, until P/slots/ changes after rev.
func (h *holdRun) waitSlot(f *GateResult, rev int64) error {
	h.publish(StateWaiting, f.Reason)
	h.log.Info("slots full: waiting for a slot under the lock", "event", "slot-wait", "reason", f.Reason)
	if err := h.c.Cluster.WaitChange(h.ctx, WatchSlots, rev); err != nil {
		h.last = f
		return h.stopped("waiting for a free slot", err)
	}
	return nil
}

// expireOverdue frees overdue slots when slot_expiry = "release".
func (h *holdRun) expireOverdue(v *View) error {
	c := h.c
	if !c.opt.SlotExpiryRelease {
		return nil
	}
	now := c.Now()
	kept := v.Slots[:0:0]
	for _, s := range v.Slots {
		if !s.Overdue(now) {
			kept = append(kept, s)
			continue
		}
		ev := HistoryEvent{Event: EventExpired, Node: s.Node, Reason: "overdue since " + s.Deadline.Format(time.RFC3339) + ": " + s.Reason,
			By: c.opt.Node, BootID: s.BootID, At: now}
		if err := c.Cluster.ReleaseSlot(h.ctx, s, ev); err != nil && !errors.Is(err, ErrConflict) {
			return h.stopped("releasing an overdue slot", err)
		}
		h.log.Warn("overdue slot released (slot_expiry = release)", append([]any{"event", "slot-expired"}, logAttrsSlot(s)...)...)
	}
	v.Slots = kept
	return nil
}

// reboot writes the fenced slot, releases the mutex and asks for the reboot.
func (h *holdRun) reboot(det Detection) error {
	c := h.c
	now := c.Now()
	slot := Slot{Node: c.opt.Node, BootID: h.bootID, Reason: det.Reason, AcquiredAt: now, Deadline: now.Add(c.opt.MaxRebootDuration)}
	ev := HistoryEvent{Event: EventSlotTaken, Node: c.opt.Node, Reason: det.Reason, BootID: h.bootID, At: now}
	slot, err := h.sess.AcquireSlot(h.ctx, slot, ev)
	if err != nil {
		h.unlock()
		if errors.Is(err, ErrLockLost) {
			h.log.Error("lock lost before the slot was written: no reboot", "event", "lock-lost", "error", err)
			return &Error{Code: CodeBusy, Gate: "fence", Reason: "lock lost before the fenced slot write; no reboot", Err: err}
		}
		return h.stopped("writing the fenced slot", err)
	}
	h.log.Info("reboot slot taken", append([]any{"event", "slot-taken", "reason", det.Reason, "detector", det.Detector}, logAttrsSlot(slot)...)...)

	if c.opt.DryRun {
		h.unlock()
		h.log.Info("dry run: not rebooting, releasing the slot", "event", "dry-run", "reason", det.Reason)
		return h.giveBack(slot, EventDryRun, "dry run: "+det.Reason, nil)
	}
	if err := h.prepareReboot(det); err != nil {
		return h.giveBack(slot, EventAborted, "cannot write the reboot-requested marker: "+err.Error(), failure("marker", err))
	}
	// A slot past its deadline may be freed by others (slot_expiry =
	// release): never reboot on one. The writes above are bounded, but an
	// etcd outage can stretch them.
	if !c.Now().Before(slot.Deadline) {
		_ = c.Host.ClearRebootRequested()
		h.log.Error("the slot's deadline passed before the reboot call: no reboot", "event", "aborted")
		return h.giveBack(slot, EventAborted, "slot deadline passed before the reboot call",
			&Error{Code: CodeBusy, Gate: "slot", Reason: "the slot's deadline passed before the reboot could be requested; no reboot"})
	}
	h.log.Info("requesting reboot", "event", "reboot-requested", "action", "reboot", "reason", det.Reason, "attempt", h.attempt)
	// The shutdown we ask for stops this holder: that stop must not cut
	// the call short and make a requested reboot look failed. The Rebooter
	// bounds the call itself.
	err = c.Rebooter.Reboot(context.WithoutCancel(h.ctx), det.Reason)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrRebootRefused):
		h.log.Error("reboot refused: releasing the slot", "event", "reboot-failed", "error", err)
		_ = c.Host.ClearRebootRequested()
		return h.giveBack(slot, EventRebootFailed, err.Error(), &Error{Code: CodeInternal, Gate: "reboot", Reason: "reboot refused; slot released", Err: err})
	}
	// No answer: the reboot may be under way. Keep the slot (and the
	// marker): a reboot releases it after boot; if none comes, it stays
	// until its deadline (slot_expiry) or an operator's release.
	h.log.Error("reboot call got no answer: keeping the slot in case the reboot is under way", "event", "reboot-uncertain", "error", err)
	return &Error{Code: CodeInternal, Gate: "reboot", Reason: "reboot call got no answer; slot kept until the node reboots, its deadline, or 'clusterrebootd release'", Err: err}
}

// giveBack deletes this node's slot right away (dry run, failed reboot) and
// returns result.
func (h *holdRun) giveBack(slot Slot, event, reason string, result error) error {
	c := h.c
	ctx, cancel := c.cleanupCtx(h.ctx)
	defer cancel()
	ev := HistoryEvent{Event: event, Node: c.opt.Node, Reason: reason, BootID: h.bootID, At: c.Now()}
	if err := c.Cluster.ReleaseSlot(ctx, slot, ev); err != nil {
		h.log.Error("could not release the slot: the cluster stays frozen until 'clusterrebootd release'", "error", err)
		if result == nil {
			return failure("etcd", err)
		}
	}
	h.publish(StateIdle, "")
	return result
}

func (h *holdRun) unlock() {
	if !h.locked {
		return
	}
	h.locked = false
	ctx, cancel := h.c.cleanupCtx(h.ctx)
	defer cancel()
	if err := h.sess.Unlock(ctx); err != nil {
		h.log.Warn("unlock failed; the mutex frees when the session lease ends", "error", err)
	}
}

// stopped turns the end of a wait into the run's error: the session died
// (lock lost), max_hold_wait passed, the holder was stopped, or etcd failed.
func (h *holdRun) stopped(doing string, err error) error {
	cause := context.Cause(h.ctx)
	switch {
	case errors.Is(cause, ErrLockLost) || errors.Is(err, ErrLockLost):
		h.log.Error("etcd session lost: no reboot", "event", "lock-lost", "while", doing)
		return &Error{Code: CodeBusy, Gate: "session", Reason: "etcd session lost while " + doing + "; no reboot", Err: ErrLockLost}
	case errors.Is(cause, context.DeadlineExceeded):
		if h.last != nil {
			return &Error{Code: h.last.Code, Gate: h.last.Gate, Reason: "max_hold_wait passed; last blocked by: " + h.last.Reason}
		}
		reason := "max_hold_wait passed while " + doing
		if !h.locked && h.queued != "" {
			reason += " (" + h.queued + ")"
		}
		return &Error{Code: CodeBusy, Gate: "lock", Reason: reason}
	case errors.Is(cause, context.Canceled):
		h.log.Warn("holder stopped before the reboot; lock released", "event", "stopped", "while", doing)
		return &Error{Code: CodeBlocked, Gate: "hold", Reason: "stopped while " + doing + "; no reboot"}
	}
	return failure("etcd", fmt.Errorf("%s: %w", doing, err))
}

// publish updates this node's alive record (best effort) and the holder
// unit's STATUS line.
func (h *holdRun) publish(state, why string) {
	c := h.c
	line := state
	if why != "" {
		line += ": " + why
	}
	c.Notify.Status(line)
	ok, _ := c.nodeHealthy(h.ctx)
	a := Alive{Node: c.opt.Node, BootID: h.bootID, Kernel: c.opt.Kernel, Version: c.opt.Version, State: state,
		Blocked: why, Healthy: ok, RebootRequired: state != StateIdle, MaxConcurrent: c.opt.MaxConcurrent, UpdatedAt: c.Now()}
	if err := c.Cluster.PublishAlive(h.ctx, a); err != nil {
		h.log.Warn("could not publish alive record", "error", err)
	}
}
