package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/cluster"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	co "github.com/clusterrebootd/clusterrebootd/lib/coordinator"
	"github.com/clusterrebootd/clusterrebootd/lib/detect"
	"github.com/clusterrebootd/clusterrebootd/lib/gate"
	"github.com/clusterrebootd/clusterrebootd/lib/metrics"
	"github.com/clusterrebootd/clusterrebootd/lib/reboot"
	"github.com/clusterrebootd/clusterrebootd/lib/systemd"
)

// systemBusSocket is where the system D-Bus listens.
const systemBusSocket = "/run/dbus/system_bus_socket"

// Files in [paths].run_dir.
const (
	checkLockFile = "check.lock"
	holdLockFile  = "hold.lock"
	stateFileName = "state.json"
)

// app is one command's wired world.
type app struct {
	cfg     *config.Config
	log     *slog.Logger
	coord   *co.Coordinator
	cluster *lazyCluster
	metrics *metricsPort // started by check and hold only
}

func (a *app) Close() { a.cluster.close() }

// wire builds the coordinator and its adapters from the configuration. etcd
// is dialled lazily, on the first call that needs it, so that a run blocked
// by the kill switch never touches the network.
func (e *Env) wire(cfg *config.Config, log *slog.Logger) (*app, error) {
	w, err := assemble(cfg, log, e.holderArgv(), e.notifier(log))
	if err != nil {
		return nil, err
	}
	coord, err := co.New(w.opts, w.deps)
	if err != nil {
		return nil, err
	}
	w.fg.hold = coord.Hold
	return &app{cfg: cfg, log: log, coord: coord, cluster: w.lazy, metrics: w.metrics}, nil
}

// wiring is the coordinator's options and adapters before construction.
type wiring struct {
	opts    co.Options
	deps    co.Deps
	lazy    *lazyCluster
	fg      *foregroundHolder
	metrics *metricsPort
}

// assemble converts the configuration into each package's options.
// holderArgv is how the transient holder unit runs this binary; notifier
// talks to the service manager (nil: none).
func assemble(cfg *config.Config, log *slog.Logger, holderArgv []string, notifier co.Notifier) (*wiring, error) {
	specs := make([]detect.Spec, 0, len(cfg.Detectors))
	for _, d := range cfg.Detectors {
		specs = append(specs, detect.Spec{Type: d.Type, Path: d.Path, Cmd: d.Cmd,
			NeededExitCodes: d.NeededExitCodes, NotNeededExitCodes: d.NotNeededExitCodes, Timeout: d.Timeout.Std()})
	}
	detectors, err := detect.New(detect.Options{Specs: specs, OSRelease: cfg.Paths.OSRelease, BootDir: cfg.Paths.BootDir, Logger: log})
	if err != nil {
		return nil, configError{fmt.Errorf("detector: %w", err)}
	}
	schedule, err := gate.NewSchedule(cfg.Windows.Allow, cfg.Windows.Deny, cfg.Windows.Timezone, cfg.Windows.ExpectedRebootDuration.Std())
	if err != nil {
		return nil, configError{fmt.Errorf("windows: %w", err)}
	}
	policy := gate.Policy{
		SlotExpiry: cfg.Lock.SlotExpiry, MinHealthyFraction: cfg.Policy.MinHealthyFraction,
		MinHealthyAbsolute: cfg.Policy.MinHealthyAbsolute, ExpectedNodes: cfg.Policy.ExpectedNodes,
		FallbackNodes: cfg.Policy.FallbackNodes, ForbidIfOnlyFallbackLeft: cfg.Policy.ForbidIfOnlyFallbackLeft,
	}
	uid := -1
	if os.Geteuid() != 0 {
		uid = os.Geteuid() // unprivileged runs (tests, demo) trust their own files too
	}
	script := scriptPort{
		script: &gate.Script{Path: cfg.Health.Script, Timeout: cfg.Health.Timeout.Std(), Logger: log, UID: uid},
		env: gate.ScriptEnv{Node: cfg.NodeName, Cluster: cfg.Cluster, FallbackSet: cfg.Policy.FallbackNodes,
			EtcdEndpoints: cfg.Etcd.Endpoints, MinHealthyFraction: cfg.Policy.MinHealthyFraction,
			MinHealthyAbsolute: cfg.Policy.MinHealthyAbsolute},
		policy: policy,
	}
	var rebooter co.Rebooter
	var inhibitors co.Inhibitors
	switch cfg.Reboot.Method {
	case config.RebootCommand:
		rebooter = rebootPort{&reboot.Command{Argv: cfg.Reboot.Command, Timeout: cfg.Reboot.Timeout.Std(), Logger: log}}
		// A command (e.g. `systemctl reboot` as root) goes through block
		// inhibitors, so ask logind about them too — where there is a system
		// bus at all (containers and the demo have none: nothing can hold
		// an inhibitor there).
		if _, err := os.Stat(systemBusSocket); err == nil {
			inhibitors = &reboot.Logind{Timeout: cfg.Reboot.Timeout.Std(), Logger: log}
		}
	default:
		logind := &reboot.Logind{WallMessage: cfg.Reboot.WallMessage, Timeout: cfg.Reboot.Timeout.Std(), Logger: log}
		rebooter, inhibitors = rebootPort{logind}, logind
	}
	holdLock := filepath.Join(cfg.Paths.RunDir, holdLockFile)
	fg := &foregroundHolder{lockPath: holdLock}
	var holder co.Holder = fg
	if cfg.Systemd.Holder == config.HolderTransient {
		// With Type=notify the start job ends at READY=1, once the holder's
		// etcd session exists: the wait covers the dial and a request.
		startWait := cfg.Systemd.DBusTimeout.Std() + cfg.Etcd.DialTimeout.Std() + 2*cfg.Etcd.RequestTimeout.Std()
		rw := []string{cfg.Paths.StateDir, cfg.Paths.RunDir}
		if cfg.Metrics.Textfile != "" {
			rw = append(rw, filepath.Dir(cfg.Metrics.Textfile))
		}
		holder = &systemd.TransientHolder{Unit: cfg.Systemd.HolderUnit, Argv: holderArgv,
			Watchdog: cfg.Systemd.Watchdog.Std(), Timeout: startWait, Logger: log, ReadWritePaths: rw}
	}

	lc := &lazyCluster{opts: cluster.Options{
		Endpoints: cfg.Etcd.Endpoints, DialTimeout: cfg.Etcd.DialTimeout.Std(), RequestTimeout: cfg.Etcd.RequestTimeout.Std(),
		Username: cfg.Etcd.Username, PasswordFile: cfg.Etcd.PasswordFile,
		CAFile: cfg.Etcd.TLS.CAFile, CertFile: cfg.Etcd.TLS.CertFile, KeyFile: cfg.Etcd.TLS.KeyFile, ServerName: cfg.Etcd.TLS.ServerName,
		Cluster: cfg.Cluster, Logger: log,
	}}
	port := &clusterPort{lazy: lc, aliveTTL: cfg.AliveTTL.Std(), historyTTL: cfg.HistoryTTL.Std(), lockTTL: cfg.Lock.TTL.Std()}
	state := stateFile{path: filepath.Join(cfg.Paths.StateDir, stateFileName)}
	mp := &metricsPort{textfile: cfg.Metrics.Textfile, state: state, log: log, now: time.Now,
		labels: metrics.Labels{Cluster: cfg.Cluster, Node: cfg.NodeName, Version: version}}

	return &wiring{opts: co.Options{
		Node: cfg.NodeName, Cluster: cfg.Cluster, Version: version, Kernel: kernelRelease(),
		DryRun: cfg.DryRun, MaxConcurrent: cfg.Lock.MaxConcurrent, MaxHoldWait: cfg.Lock.MaxHoldWait.Std(),
		BackoffMin: cfg.Lock.BackoffMin.Std(), BackoffMax: cfg.Lock.BackoffMax.Std(),
		MaxRebootDuration: cfg.Lock.MaxRebootDuration.Std(), PostBootSoak: cfg.Policy.PostBootSoak.Std(),
		SlotExpiryRelease: cfg.Lock.SlotExpiry == config.SlotExpiryRelease, MaxRebootsPerReason: cfg.Policy.MaxRebootsPerReason,
		RespectInhibitors: cfg.Reboot.RespectInhibitors, KillSwitchPath: cfg.Paths.KillSwitch,
		CleanupTimeout: cfg.Etcd.RequestTimeout.Std() * 2,
	}, deps: co.Deps{
		Cluster: port, Detector: detectPort{detectors}, Script: scriptMetrics{next: script, m: mp, configured: cfg.Health.Script != ""},
		Windows:  windowPort{schedule},
		Policies: policyPort{p: policy},
		NodeHealth: gate.NodeHealth{States: cfg.Health.HealthyStates, SystemState: systemd.Manager{Timeout: cfg.Systemd.DBusTimeout.Std()}.SystemState,
			Command: cfg.Health.NodeHealthCommand, Timeout: cfg.Health.Timeout.Std()},
		Rebooter: rebooter, Inhibitors: inhibitors, Holder: holder, Notify: notifier,
		Host:  hostPort{bootIDPath: cfg.Paths.BootID, killSwitch: cfg.Paths.KillSwitch, runDir: cfg.Paths.RunDir},
		State: state, Recorder: mp,
		Logger: log,
	}, lazy: lc, fg: fg, metrics: mp}, nil
}

// lazyCluster dials etcd on first use and keeps the client for the run.
type lazyCluster struct {
	opts cluster.Options
	once sync.Once
	c    *cluster.Client
	err  error
}

func (l *lazyCluster) get(ctx context.Context) (*cluster.Client, error) {
	l.once.Do(func() { l.c, l.err = cluster.Dial(ctx, l.opts) })
	return l.c, l.err
}

func (l *lazyCluster) close() {
	if l.c != nil {
		l.c.Close()
	}
}

// kernelRelease is the running kernel for the alive record.
func kernelRelease() string {
	var u syscall.Utsname
	if syscall.Uname(&u) != nil {
		return ""
	}
	b := make([]byte, 0, len(u.Release))
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	return string(b)
}

// rebootPort maps lib/reboot's definite refusal onto the coordinator's, so
// that only a refused reboot frees the slot.
type rebootPort struct{ r co.Rebooter }

func (p rebootPort) Reboot(ctx context.Context, reason string) error {
	err := p.r.Reboot(ctx, reason)
	if errors.Is(err, reboot.ErrRefused) {
		return fmt.Errorf("%w: %w", co.ErrRebootRefused, err)
	}
	return err
}
