package systemd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	sd "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"
)

// ErrJob: the holder's start job ended with a result other than "done"
// (as a *JobError, which carries the holder's exit status when it exited
// before it was ready).
var ErrJob = errors.New("systemd: start job failed")

// ErrJobTimeout: systemd did not report the start job's result in time. The
// unit may still come up (a Type=notify unit is "activating" until READY=1);
// Active tells.
var ErrJobTimeout = errors.New("systemd: timed out waiting for the start job")

// ErrUnitState: the unit is in an ActiveState this package does not know,
// or exists but cannot be started.
var ErrUnitState = errors.New("systemd: unexpected unit state")

// DefaultStopTimeout is TimeoutStopSec of the holder when none is given.
const DefaultStopTimeout = 30 * time.Second

// TransientHolder runs the lock holder as a transient service unit started
// over D-Bus (StartTransientUnit), so systemd owns its lifetime, watchdog,
// stop timeout and journal. The unit is sandboxed like
// clusterrebootd-check.service (sandbox.go). It never starts a second holder: a unit that
// already exists and is running counts as "started".
type TransientHolder struct {
	Unit        string        // e.g. "clusterrebootd-hold.service"
	Argv        []string      // ExecStart, Argv[0] absolute
	Description string        // "" → "clusterrebootd lock holder"
	Watchdog    time.Duration // WatchdogSec; 0 = none
	StopTimeout time.Duration // TimeoutStopSec; 0 → DefaultStopTimeout
	Timeout     time.Duration // bounds the dial, every D-Bus call and the job wait; 0 → 10s
	// ReadWritePaths are the only paths the sandboxed holder may write
	// (state_dir, run_dir, the metrics textfile's directory); a missing one
	// is ignored. nil → DefaultReadWritePaths. See sandbox.go.
	ReadWritePaths []string
	Logger         *slog.Logger
	// Dial opens the connection; nil → the system bus.
	Dial DialFunc
}

// Active reports whether the holder unit is running: ActiveState active,
// activating, deactivating, reloading or refreshing. inactive, failed or a
// unit systemd does not know is not running. Any D-Bus error, and any other
// state, is an error, so the caller does not start a second holder.
func (h *TransientHolder) Active(ctx context.Context) (bool, error) {
	d := orTimeout(h.Timeout)
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	conn, release, err := dial(ctx, h.Dial, d)
	if err != nil {
		return false, err
	}
	defer release()
	st, err := activeState(ctx, conn, h.Unit)
	if err != nil {
		return false, withCause(ctx, err)
	}
	return running(h.Unit, st)
}

// activeState is the unit's ActiveState; "" when systemd has no such unit.
func activeState(ctx context.Context, c *sd.Conn, unit string) (string, error) {
	p, err := c.GetUnitPropertyContext(ctx, unit, "ActiveState")
	if busErrorName(err) == errNoSuchUnit {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("systemd: %s ActiveState: %s: %w", unit, describe(err), err)
	}
	s, ok := p.Value.Value().(string)
	if !ok {
		return "", fmt.Errorf("%w: %s ActiveState has type %T", ErrUnitState, unit, p.Value.Value())
	}
	return s, nil
}

// running maps an ActiveState to "a holder runs"; unknown states are errors.
func running(unit, state string) (bool, error) {
	switch state {
	case "active", "activating", "deactivating", "reloading", "refreshing":
		return true, nil
	case "", "inactive", "failed":
		return false, nil
	}
	return false, fmt.Errorf("%w: %s is %q", ErrUnitState, unit, state)
}

// properties are the holder unit's settings.
func (h *TransientHolder) properties() []sd.Property {
	desc := h.Description
	if desc == "" {
		desc = "clusterrebootd lock holder"
	}
	stop := h.StopTimeout
	if stop <= 0 {
		stop = DefaultStopTimeout
	}
	props := []sd.Property{
		sd.PropDescription(desc),
		sd.PropType("notify"),
		// go-systemd's second argument is systemd's "ignore failure"
		// flag (the "-" prefix) despite its name: false keeps a failing
		// holder a failure.
		sd.PropExecStart(h.Argv, false),
		prop("NotifyAccess", "main"),
		prop("KillMode", "mixed"),
		// A holder that exits 3, 4 or 5 was blocked, not broken (as for
		// clusterrebootd-check.service); any other failure leaves the unit
		// "failed" — visible to `systemctl --failed` and readable by the
		// starting check (JobError) — until the next check resets it.
		prop("SuccessExitStatus", exitStatusSet{Status: []int32{3, 4, 5}, Signal: []int32{}}),
		prop("TimeoutStopUSec", usec(stop)),
	}
	if h.Watchdog > 0 {
		props = append(props, prop("WatchdogUSec", usec(h.Watchdog)))
	}
	return append(props, h.sandbox()...)
}

// exitStatusSet is SuccessExitStatus on the bus, signature (aiai).
type exitStatusSet struct {
	Status []int32
	Signal []int32
}

func prop(name string, v any) sd.Property {
	return sd.Property{Name: name, Value: dbus.MakeVariant(v)}
}

func usec(d time.Duration) uint64 { return uint64(d / time.Microsecond) }

func (h *TransientHolder) validate() error {
	if !strings.HasSuffix(h.Unit, ".service") || len(h.Unit) == len(".service") {
		return fmt.Errorf("systemd: holder unit %q is not a service name", h.Unit)
	}
	if len(h.Argv) == 0 || !filepath.IsAbs(h.Argv[0]) {
		return fmt.Errorf("systemd: holder command %q must start with an absolute path", h.Argv)
	}
	return nil
}

// Start creates and starts the holder unit in mode "fail" and waits for its
// start job: nil once the job finished "done" (for Type=notify: the holder
// sent READY=1). When the unit already exists and runs, a holder is already
// there: Start logs it and returns nil without starting another. A leftover
// inactive or failed unit is reset once and the start retried. Other job
// results wrap ErrJob; no result within Timeout wraps ErrJobTimeout.
func (h *TransientHolder) Start(ctx context.Context) error {
	if err := h.validate(); err != nil {
		return err
	}
	log := orDiscard(h.Logger).With("unit", h.Unit)
	d := orTimeout(h.Timeout)
	conn, release, err := dial(ctx, h.Dial, d)
	if err != nil {
		return err
	}
	defer release()
	props := h.properties()
	for attempt := 0; ; attempt++ {
		err := h.startOnce(ctx, conn, props, d)
		if busErrorName(err) != errUnitExists {
			if err == nil {
				log.Info("holder unit started", "event", "holder-started")
			}
			return err
		}
		cctx, cancel := context.WithTimeout(ctx, d)
		st, serr := activeState(cctx, conn, h.Unit)
		cancel()
		if serr != nil {
			return fmt.Errorf("systemd: %s exists, state unknown: %w", h.Unit, serr)
		}
		run, rerr := running(h.Unit, st)
		if rerr != nil {
			return rerr
		}
		if run {
			log.Info("holder unit already running; not starting another", "event", "holder-running", "state", st)
			return nil
		}
		if attempt > 0 {
			return fmt.Errorf("%w: %s exists in state %q and cannot be started", ErrUnitState, h.Unit, st)
		}
		log.Warn("holder unit left over; resetting it", "state", st)
		cctx, cancel = context.WithTimeout(ctx, d)
		if err := conn.ResetFailedUnitContext(cctx, h.Unit); err != nil {
			log.Warn("reset-failed of the holder unit failed", "err", describe(err))
		}
		cancel()
	}
}

// startOnce issues StartTransientUnit and waits for the job's result. The
// result channel is buffered so go-systemd's signal dispatcher never blocks
// on it, even after Start returned.
func (h *TransientHolder) startOnce(ctx context.Context, c *sd.Conn, props []sd.Property, d time.Duration) error {
	ch := make(chan string, 1)
	cctx, cancel := context.WithTimeout(ctx, d)
	_, err := c.StartTransientUnitContext(cctx, h.Unit, "fail", props, ch)
	cancel()
	if err != nil {
		if busErrorName(err) == errUnitExists {
			return err
		}
		if cause := context.Cause(ctx); cause != nil {
			return fmt.Errorf("systemd: StartTransientUnit %s: %w", h.Unit, cause)
		}
		return fmt.Errorf("systemd: StartTransientUnit %s: %s: %w", h.Unit, describe(err), err)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case res := <-ch:
		if res != "done" {
			return jobError(ctx, c, h.Unit, res, d)
		}
		return nil
	case <-t.C:
		return fmt.Errorf("%w: %s, no result within %s (the unit may still come up)", ErrJobTimeout, h.Unit, d)
	case <-ctx.Done():
		return fmt.Errorf("systemd: %s: waiting for the start job: %w", h.Unit, context.Cause(ctx))
	}
}
