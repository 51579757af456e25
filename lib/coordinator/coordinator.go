package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"
)

// Options are the coordinator's settings, filled by cmd from the config.
type Options struct {
	Node, Cluster       string
	Version, Kernel     string
	DryRun              bool
	MaxConcurrent       int
	MaxHoldWait         time.Duration
	BackoffMin          time.Duration
	BackoffMax          time.Duration
	MaxRebootDuration   time.Duration
	PostBootSoak        time.Duration
	SlotExpiryRelease   bool // slot_expiry = "release"
	MaxRebootsPerReason int
	RespectInhibitors   bool
	KillSwitchPath      string // for messages only
	// CleanupTimeout bounds the unlock/revoke/release calls made on the way
	// out after the run's own context ended.
	CleanupTimeout time.Duration
}

// Deps are the adapters. Inhibitors, Notify and Recorder may be nil (no
// logind, no service manager, no metrics).
type Deps struct {
	Cluster    Cluster
	Detector   Detector
	Script     HealthScript
	Windows    Windows
	Policies   Policies
	NodeHealth NodeHealth
	Inhibitors Inhibitors
	Rebooter   Rebooter
	Holder     Holder
	Host       Host
	State      StateStore
	Notify     Notifier
	Recorder   Recorder // metrics; nil records nothing
	Logger     *slog.Logger
	Now        func() time.Time // nil: time.Now
}

// Coordinator runs Check, Hold, Simulate and the operator actions for one
// node.
type Coordinator struct {
	opt Options
	Deps
	log     *slog.Logger
	reloads <-chan Reload // see Reloads; nil: none
}

// New checks that every dependency is present.
func New(opt Options, d Deps) (*Coordinator, error) {
	var missing []string
	for name, v := range map[string]any{
		"Cluster": d.Cluster, "Detector": d.Detector, "Script": d.Script, "Windows": d.Windows,
		"Policies": d.Policies, "NodeHealth": d.NodeHealth, "Rebooter": d.Rebooter,
		"Holder": d.Holder, "Host": d.Host, "State": d.State,
	} {
		if v == nil {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("coordinator: missing dependencies %v", missing)
	}
	if opt.Node == "" {
		return nil, errors.New("coordinator: empty node name")
	}
	if opt.MaxConcurrent < 1 {
		opt.MaxConcurrent = 1
	}
	if opt.MaxRebootsPerReason < 1 {
		opt.MaxRebootsPerReason = 1
	}
	if opt.CleanupTimeout <= 0 {
		opt.CleanupTimeout = 10 * time.Second
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Notify == nil {
		d.Notify = noNotify{}
	}
	log := d.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Coordinator{opt: opt, Deps: d, log: log.With("node", opt.Node)}, nil
}

// cleanupCtx gives the calls made on the way out a bounded context that
// survives the cancellation of the run's own.
func (c *Coordinator) cleanupCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), c.opt.CleanupTimeout)
}

func (c *Coordinator) pid() int { return os.Getpid() }

// noNotify is the Notifier when no service manager listens.
type noNotify struct{}

func (noNotify) Ready()                                {}
func (noNotify) Status(string)                         {}
func (noNotify) Watchdog(context.Context, func() bool) {}
