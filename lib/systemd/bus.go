package systemd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	sd "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"
)

// defaultTimeout bounds a D-Bus call when an option leaves it at 0.
const defaultTimeout = 10 * time.Second

// D-Bus error names systemd answers with.
const (
	errUnitExists = "org.freedesktop.systemd1.UnitExists"
	errNoSuchUnit = "org.freedesktop.systemd1.NoSuchUnit"
)

// DialFunc opens a connection to systemd. The connection must not outlive
// ctx (go-systemd closes its connections when their context ends).
type DialFunc func(ctx context.Context) (*sd.Conn, error)

func orTimeout(d time.Duration) time.Duration {
	if d <= 0 {
		return defaultTimeout
	}
	return d
}

func orDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}

// dial opens a connection with dial (nil: the system bus). The dial itself
// is bounded by d, so a bus that accepts the socket but never completes
// authentication does not hang the caller. The connection lives until the
// returned release is called (or ctx ends); release closes it.
func dial(ctx context.Context, dial DialFunc, d time.Duration) (*sd.Conn, func(), error) {
	if dial == nil {
		dial = sd.NewSystemConnectionContext
	}
	cctx, cancel := context.WithCancel(ctx)
	t := time.AfterFunc(d, cancel)
	conn, err := dial(cctx)
	if !t.Stop() {
		if err == nil {
			conn.Close()
		}
		cancel()
		return nil, nil, fmt.Errorf("%w: no connection within %s", ErrNoBus, d)
	}
	if err != nil {
		cancel()
		return nil, nil, fmt.Errorf("%w: %w", ErrNoBus, err)
	}
	return conn, func() { conn.Close(); cancel() }, nil
}

// busErrorName is the D-Bus error name carried by err, or "".
func busErrorName(err error) string {
	var e dbus.Error
	if errors.As(err, &e) {
		return e.Name
	}
	var pe *dbus.Error
	if errors.As(err, &pe) && pe != nil {
		return pe.Name
	}
	return ""
}

// describe renders err with its D-Bus error name, which godbus's own Error()
// leaves out.
func describe(err error) string {
	if name := busErrorName(err); name != "" && name != err.Error() {
		return name + ": " + err.Error()
	}
	return err.Error()
}

// withCause adds ctx's cause to err when ctx ended: the connection closes
// with its context, so a call cut short may report "use of closed network
// connection" instead of the deadline.
func withCause(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil || errors.Is(err, ctx.Err()) {
		return err
	}
	return fmt.Errorf("%w: %w", err, context.Cause(ctx))
}
