package coordinator

import (
	"context"
	"errors"
	"fmt"
)

// Operator actions. Each is one bounded change with a log line (and, for
// slots, a history entry) saying who did it.

// Pause sets the cluster-wide pause.
func (c *Coordinator) Pause(ctx context.Context, reason, by string) error {
	if reason == "" {
		return &Error{Code: CodeConfig, Gate: "pause", Reason: "a reason is required"}
	}
	if err := c.Cluster.SetPause(ctx, Pause{Reason: reason, By: by, At: c.Now()}); err != nil {
		return failure("etcd", err)
	}
	c.log.Warn("cluster paused", "event", "paused", "reason", reason, "by", by)
	return nil
}

// Resume clears the pause; it reports whether one was set.
func (c *Coordinator) Resume(ctx context.Context, by string) (bool, error) {
	was, err := c.Cluster.ClearPause(ctx)
	if err != nil {
		return false, failure("etcd", err)
	}
	c.log.Warn("cluster resumed", "event", "resumed", "by", by, "was_paused", was)
	return was, nil
}

// SetMax sets the cluster-wide max_concurrent (the effective limit is the
// smaller of it and each node's configuration).
func (c *Coordinator) SetMax(ctx context.Context, n int, by string) error {
	if n < 1 {
		return &Error{Code: CodeConfig, Gate: "set-max", Reason: fmt.Sprintf("max_concurrent must be >= 1, got %d", n)}
	}
	if err := c.Cluster.SetMaxConcurrent(ctx, n); err != nil {
		return failure("etcd", err)
	}
	c.log.Warn("cluster max_concurrent set", "event", "settings", "max_concurrent", n, "by", by)
	return nil
}

// ErrNoSlot is returned by Release when the node holds no slot.
var ErrNoSlot = errors.New("coordinator: node holds no slot")

// Release frees node's slot as an operator (stuck or overdue slot).
func (c *Coordinator) Release(ctx context.Context, node, by string) (Slot, error) {
	view, err := c.Cluster.View(ctx)
	if err != nil {
		return Slot{}, failure("etcd", err)
	}
	slot, ok := view.SlotOf(node)
	if !ok {
		return Slot{}, &Error{Code: CodeInternal, Gate: "release", Reason: fmt.Sprintf("node %q holds no slot", node), Err: ErrNoSlot}
	}
	ev := HistoryEvent{Event: EventReleased, Node: node, Reason: "released by operator: " + slot.Reason, By: by, BootID: slot.BootID, At: c.Now()}
	if err := c.Cluster.ReleaseSlot(ctx, slot, ev); err != nil {
		return slot, failure("etcd", err)
	}
	c.log.Warn("slot released by operator", append([]any{"event", "slot-released", "by", by}, logAttrsSlot(slot)...)...)
	return slot, nil
}

// Ack clears this node's reboot-loop guard.
func (c *Coordinator) Ack() (map[string]int, error) {
	st, err := c.State.Load()
	if err != nil {
		return nil, failure("state", err)
	}
	cleared := st.RebootsForReason
	st.RebootsForReason = nil
	if err := c.State.Save(st); err != nil {
		return nil, failure("state", err)
	}
	c.log.Warn("reboot-loop guard acknowledged", "event", "ack", "cleared", len(cleared))
	return cleared, nil
}

// Forget removes a node's registration and alive record (decommissioned
// node); refused while it holds a slot.
func (c *Coordinator) Forget(ctx context.Context, node string) error {
	if err := c.Cluster.Forget(ctx, node); err != nil {
		return failure("etcd", err)
	}
	c.log.Warn("node forgotten", "event", "forget", "forgotten", node)
	return nil
}
