package coordinator

import (
	"context"
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"
)

// Operator actions. Each is one bounded change with a log line (and, for
// slots, a history entry) saying who did it.

// MaxPauseReason bounds the length in bytes of a pause reason: it is stored
// in etcd and shown by every status and blocked run.
const MaxPauseReason = 1024

// checkPauseReason refuses an empty, oversized, non-UTF-8 or multi-line
// reason, or one with control characters: status prints it on one line,
// where a newline could forge further lines.
func checkPauseReason(reason string) string {
	switch {
	case reason == "":
		return "a reason is required"
	case len(reason) > MaxPauseReason:
		return fmt.Sprintf("the reason is too long (%d bytes; at most %d)", len(reason), MaxPauseReason)
	case !utf8.ValidString(reason):
		return "the reason is not valid UTF-8"
	}
	for _, r := range reason {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return fmt.Sprintf("the reason must be one line of printable text, not contain %U", r)
		}
	}
	return ""
}

// Pause sets the cluster-wide pause. The reason must be one line of
// printable UTF-8 of at most MaxPauseReason bytes (CodeConfig otherwise).
func (c *Coordinator) Pause(ctx context.Context, reason, by string) error {
	if msg := checkPauseReason(reason); msg != "" {
		return &Error{Code: CodeConfig, Gate: "pause", Reason: msg}
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
// MaxSetMax is the largest cluster-wide max_concurrent, the same bound as
// the config's lock.max_concurrent.
const MaxSetMax = 10000

func (c *Coordinator) SetMax(ctx context.Context, n int, by string) error {
	if n < 1 || n > MaxSetMax {
		return &Error{Code: CodeConfig, Gate: "set-max", Reason: fmt.Sprintf("max_concurrent must be between 1 and %d, got %d", MaxSetMax, n)}
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
		// The operator named a node without a slot: bad input, not a failure.
		return Slot{}, &Error{Code: CodeConfig, Gate: "release", Reason: fmt.Sprintf("node %q holds no slot (see `clusterrebootd status`)", node), Err: ErrNoSlot}
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
