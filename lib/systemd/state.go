package systemd

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	sd "github.com/coreos/go-systemd/v22/dbus"
)

// ErrNoBus: the system bus or systemd could not be reached.
var ErrNoBus = errors.New("systemd: system bus unreachable")

// Manager reaches the system manager for read-only questions.
type Manager struct {
	Timeout time.Duration // bounds each call, dial included; 0 → 10s
	// Dial opens the connection; nil → the system bus
	// (dbus.NewSystemConnectionContext). Tests point it at a private bus.
	Dial DialFunc
}

// call runs f on a fresh connection, the whole bounded by m.Timeout.
func (m Manager) call(ctx context.Context, f func(ctx context.Context, c *sd.Conn) error) error {
	d := orTimeout(m.Timeout)
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	conn, release, err := dial(ctx, m.Dial, d)
	if err != nil {
		return err
	}
	defer release()
	return withCause(ctx, f(ctx, conn))
}

// SystemState returns systemd's SystemState ("running", "degraded",
// "starting", ...).
func (m Manager) SystemState(ctx context.Context) (string, error) {
	var s string
	err := m.call(ctx, func(ctx context.Context, c *sd.Conn) error {
		p, err := c.SystemStateContext(ctx)
		if err != nil {
			return fmt.Errorf("systemd: SystemState: %s: %w", describe(err), err)
		}
		v, ok := p.Value.Value().(string)
		if !ok {
			return fmt.Errorf("systemd: SystemState has type %T, want string", p.Value.Value())
		}
		if v2, err := strconv.Unquote(v); err == nil {
			v = v2
		}
		s = v
		return nil
	})
	if err != nil {
		return "", err
	}
	return s, nil
}
