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

// Manager reaches the system manager.
type Manager struct {
	Timeout time.Duration // bounds each call; 0 → 10s
}

func (m Manager) timeout() time.Duration {
	if m.Timeout <= 0 {
		return 10 * time.Second
	}
	return m.Timeout
}

// SystemState returns systemd's SystemState ("running", "degraded",
// "starting", ...).
func (m Manager) SystemState(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, m.timeout())
	defer cancel()
	conn, err := sd.NewSystemConnectionContext(ctx)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNoBus, err)
	}
	defer conn.Close()
	p, err := conn.SystemStateContext(ctx)
	if err != nil {
		return "", fmt.Errorf("systemd: SystemState: %w", err)
	}
	s, ok := p.Value.Value().(string)
	if !ok {
		return "", fmt.Errorf("systemd: SystemState has type %T, want string", p.Value.Value())
	}
	if s2, err := strconv.Unquote(s); err == nil {
		s = s2
	}
	return s, nil
}
