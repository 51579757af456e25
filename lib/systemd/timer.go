package systemd

import (
	"context"
	"fmt"
	"math"
	"time"

	sd "github.com/coreos/go-systemd/v22/dbus"
)

// NextElapse returns when the timer unit fires next on the realtime clock
// (NextElapseUSecRealtime). A timer with no realtime trigger pending (0, or
// infinity) yields the zero time; an unknown unit or any D-Bus error is an
// error.
func (m Manager) NextElapse(ctx context.Context, timerUnit string) (time.Time, error) {
	var at time.Time
	err := m.call(ctx, func(ctx context.Context, c *sd.Conn) error {
		p, err := c.GetUnitTypePropertyContext(ctx, timerUnit, "Timer", "NextElapseUSecRealtime")
		if err != nil {
			return fmt.Errorf("systemd: %s NextElapseUSecRealtime: %s: %w", timerUnit, describe(err), err)
		}
		us, ok := p.Value.Value().(uint64)
		if !ok {
			return fmt.Errorf("systemd: %s NextElapseUSecRealtime has type %T, want uint64", timerUnit, p.Value.Value())
		}
		switch {
		case us == 0 || us == math.MaxUint64:
			// nothing scheduled
		case us > math.MaxInt64:
			return fmt.Errorf("systemd: %s NextElapseUSecRealtime %d out of range", timerUnit, us)
		default:
			at = time.UnixMicro(int64(us))
		}
		return nil
	})
	if err != nil {
		return time.Time{}, err
	}
	return at, nil
}
