package reboot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/godbus/dbus/v5"
)

// ErrLogind wraps every failure to talk to systemd-logind: bus unreachable,
// a D-Bus error reply (refused, inhibited, access denied) or no answer in
// time.
var ErrLogind = errors.New("reboot: logind")

const (
	logindName  = "org.freedesktop.login1"
	logindPath  = dbus.ObjectPath("/org/freedesktop/login1")
	logindIface = "org.freedesktop.login1.Manager"
)

// defaultTimeout bounds a logind call when Logind.Timeout is 0.
const defaultTimeout = 10 * time.Second

// Logind reboots through systemd-logind (`[reboot] method = "logind"`) and
// reports its shutdown inhibitors.
type Logind struct {
	// WallMessage is shown to logged-in users; {reason} is replaced by the
	// reboot reason. "" leaves logind's wall message alone.
	WallMessage string
	Timeout     time.Duration // bounds the dial and each call; 0 → 10s
	Logger      *slog.Logger
	// Dial opens the connection (authenticated, Hello done); nil → the
	// system bus. The connection must not outlive ctx.
	Dial func(ctx context.Context) (*dbus.Conn, error)
}

func (l *Logind) log() *slog.Logger {
	if l.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l.Logger
}

// conn opens a connection bounded by ctx; the caller closes it.
func (l *Logind) conn(ctx context.Context) (*dbus.Conn, error) {
	dial := l.Dial
	if dial == nil {
		dial = func(ctx context.Context) (*dbus.Conn, error) {
			return dbus.ConnectSystemBus(dbus.WithContext(ctx))
		}
	}
	c, err := dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: system bus: %w", ErrLogind, err)
	}
	return c, nil
}

func (l *Logind) timeout() time.Duration {
	if l.Timeout <= 0 {
		return defaultTimeout
	}
	return l.Timeout
}

// Reboot sets the wall message (a failure is logged, not fatal) and calls
// Manager.Reboot(interactive=false). It returns nil only when logind
// accepted the call; every D-Bus error surfaces, wrapped in ErrLogind.
func (l *Logind) Reboot(ctx context.Context, reason string) error {
	ctx, cancel := context.WithTimeout(ctx, l.timeout())
	defer cancel()
	c, err := l.conn(ctx)
	if err != nil {
		if noBus(err) {
			return fmt.Errorf("%w: %w", ErrRefused, err) // never asked: no bus at all
		}
		// The bus was there but the connection broke or hung during the
		// handshake: what dbus-daemon does while the machine shuts down
		// (someone else's reboot, a power-off). logind was never asked,
		// but the node is most likely going down: keep the slot rather
		// than let another node reboot now.
		return withCause(ctx, err)
	}
	defer c.Close()
	obj := c.Object(logindName, logindPath)
	if l.WallMessage != "" {
		msg := strings.ReplaceAll(l.WallMessage, "{reason}", reason)
		if err := obj.CallWithContext(ctx, logindIface+".SetWallMessage", 0, msg, true).Err; err != nil {
			l.log().Warn("logind: setting the wall message failed", "err", describe(err))
		}
	}
	if err := obj.CallWithContext(ctx, logindIface+".Reboot", 0, false).Err; err != nil {
		err = withCause(ctx, fmt.Errorf("%w: Reboot: %s: %w", ErrLogind, describe(err), err))
		var reply dbus.Error
		if errors.As(err, &reply) && !busNoAnswer[reply.Name] {
			// logind answered no (access denied, inhibited, ...): definite.
			return fmt.Errorf("%w: %w", ErrRefused, err)
		}
		// No answer (timeout, connection lost, or the bus telling us logind
		// went away without replying — as it does when the shutdown logind
		// started stops it): the reboot may be on its way.
		return err
	}
	return nil
}

// noBus reports a dial error that means no message bus listens at all
// (no socket, nobody accepting): a reboot call cannot have gone anywhere.
func noBus(err error) bool {
	return errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED)
}

// busNoAnswer are the errors the message bus itself sends in place of a
// reply to a call it delivered: they say nothing about what logind did.
// NoReply ("Message recipient disconnected from message bus without
// replying") is what a caller sees when logind accepted the reboot and was
// stopped by it before its reply went out.
var busNoAnswer = map[string]bool{
	"org.freedesktop.DBus.Error.NoReply":      true,
	"org.freedesktop.DBus.Error.Timeout":      true,
	"org.freedesktop.DBus.Error.TimedOut":     true,
	"org.freedesktop.DBus.Error.Disconnected": true,
}

// inhibitor is one entry of ListInhibitors, signature (ssssuu).
type inhibitor struct {
	What, Who, Why, Mode string
	UID, PID             uint32
}

// Blocking lists logind's inhibitors and reports those that block a
// reboot: mode "block" with "shutdown" among the colon-separated "what".
// Each reads "who (why, pid N, uid M)", several joined with "; "; "" when
// nothing blocks. ("delay" only postpones a shutdown briefly, and
// "block-weak" does not hold back a privileged caller.)
func (l *Logind) Blocking(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, l.timeout())
	defer cancel()
	c, err := l.conn(ctx)
	if err != nil {
		return "", err
	}
	defer c.Close()
	var list []inhibitor
	err = c.Object(logindName, logindPath).CallWithContext(ctx, logindIface+".ListInhibitors", 0).Store(&list)
	if err != nil {
		return "", withCause(ctx, fmt.Errorf("%w: ListInhibitors: %s: %w", ErrLogind, describe(err), err))
	}
	var out []string
	for _, in := range list {
		if in.Mode != "block" || !slices.Contains(strings.Split(in.What, ":"), "shutdown") {
			continue
		}
		out = append(out, fmt.Sprintf("%s (%s, pid %d, uid %d)", in.Who, in.Why, in.PID, in.UID))
	}
	return strings.Join(out, "; "), nil
}

// describe renders err with its D-Bus error name, which godbus's Error()
// leaves out.
func describe(err error) string {
	var e dbus.Error
	if errors.As(err, &e) && e.Name != err.Error() {
		return e.Name + ": " + err.Error()
	}
	return err.Error()
}

// withCause adds ctx's cause to err when ctx ended: the connection closes
// with its context, so a call cut short may report "use of closed network
// connection" instead of the deadline.
func withCause(ctx context.Context, err error) error {
	if ctx.Err() == nil || errors.Is(err, ctx.Err()) {
		return err
	}
	return fmt.Errorf("%w: %w", err, context.Cause(ctx))
}
