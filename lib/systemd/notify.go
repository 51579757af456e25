package systemd

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
)

// Notifier speaks the sd_notify protocol for a Type=notify service (the
// holder). Without NOTIFY_SOCKET (go-systemd reads it) every method is a
// no-op. Notifications are best effort: a failed send is logged, not
// returned, because the service manager's own timeouts (start timeout,
// watchdog) are what acts on a missing message.
type Notifier struct {
	// WatchdogInterval is the service's watchdog timeout (WATCHDOG_USEC,
	// as daemon.SdWatchdogEnabled reports it); 0 disables Watchdog.
	WatchdogInterval time.Duration
	log              *slog.Logger
}

// NewNotifier returns a Notifier logging failed sends to logger (nil:
// discard).
func NewNotifier(logger *slog.Logger) *Notifier {
	return &Notifier{log: orDiscard(logger)}
}

func (n *Notifier) send(state string) bool {
	sent, err := daemon.SdNotify(false, state)
	if err != nil {
		n.log.Warn("sd_notify failed", "state", strings.SplitN(state, "=", 2)[0], "err", err)
	}
	return sent
}

// Ready sends READY=1: the holder's session exists.
func (n *Notifier) Ready() { n.send(daemon.SdNotifyReady) }

// Stopping sends STOPPING=1.
func (n *Notifier) Stopping() { n.send(daemon.SdNotifyStopping) }

// Status sends STATUS=line, the text `systemctl status` shows. Line breaks
// become spaces, so a line can never smuggle in another assignment.
func (n *Notifier) Status(line string) {
	line = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, line)
	n.send("STATUS=" + line)
}

// Watchdog runs RunWatchdog with WatchdogInterval.
func (n *Notifier) Watchdog(ctx context.Context, healthy func() bool) {
	n.RunWatchdog(ctx, n.WatchdogInterval, healthy)
}

// RunWatchdog sends WATCHDOG=1 at once and then every interval/2, but only
// while healthy() returns true: a holder whose lease keepalive fails stops
// pinging and systemd's watchdog kills it. It returns when ctx ends, at once
// when interval is not positive or healthy is nil.
func (n *Notifier) RunWatchdog(ctx context.Context, interval time.Duration, healthy func() bool) {
	if interval <= 0 || healthy == nil {
		return
	}
	period := interval / 2
	if period <= 0 {
		period = interval
	}
	t := time.NewTicker(period)
	defer t.Stop()
	fed := true
	for ctx.Err() == nil { // a ready ticker must not win over a done ctx
		if healthy() {
			if !fed {
				n.log.Info("watchdog resumed: healthy again")
			}
			fed = true
			n.send(daemon.SdNotifyWatchdog)
		} else if fed {
			fed = false
			n.log.Warn("watchdog withheld: not healthy")
		}
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
}
