package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	co "github.com/clusterrebootd/clusterrebootd/lib/coordinator"
)

// CheckCmd is what clusterrebootd-check.service runs.
type CheckCmd struct {
	Once bool `help:"Run one check and exit. This is the only mode: scheduling belongs to clusterrebootd-check.timer." default:"true" negatable:""`
}

func (c *CheckCmd) Run(e *Env) error {
	if !c.Once {
		return usageError("check runs once per invocation; the timer schedules it (use --once)")
	}
	a, err := e.open()
	if err != nil {
		return err
	}
	defer a.Close()
	lock, err := tryLock(filepath.Join(a.cfg.Paths.RunDir, checkLockFile))
	if errors.Is(err, errLocked) {
		a.log.Info("another check run is in progress; nothing to do", "event", "check", "action", "none")
		return nil
	}
	if err != nil {
		return fmt.Errorf("check lock: %w", err)
	}
	defer lock.Unlock()
	a.metrics.start()
	err = a.coord.Check(e.Ctx)
	a.metrics.end(e.Ctx, err)
	return err
}

// HoldCmd is the lock holder.
type HoldCmd struct{}

func (h *HoldCmd) Run(e *Env) error {
	a, err := e.open()
	if err != nil {
		return err
	}
	defer a.Close()
	lock, err := tryLock(filepath.Join(a.cfg.Paths.RunDir, holdLockFile))
	if errors.Is(err, errLocked) {
		a.log.Info("a holder is already running on this node; not starting a second one", "event", "hold", "action", "none")
		return nil
	}
	if err != nil {
		return fmt.Errorf("hold lock: %w", err)
	}
	defer lock.Unlock()
	reloads := make(chan co.Reload, 1)
	a.coord.Reloads(reloads)
	stop := e.reloadOnHangup(a.log, reloads)
	defer stop()
	a.metrics.start()
	err = a.coord.Hold(e.Ctx)
	a.metrics.end(e.Ctx, err)
	return err
}

// open loads the config, builds the logger and wires the coordinator.
func (e *Env) open() (*app, error) {
	cfg, err := e.loadConfig()
	if err != nil {
		return nil, err
	}
	log, err := e.logger()
	if err != nil {
		return nil, err
	}
	return e.wire(cfg, log)
}

// reloadOnHangup re-reads the configuration on every SIGHUP for the running
// holder (DESIGN §5): a valid one is handed to the coordinator, which applies
// it at its next gate evaluation; an invalid one is logged and the running
// configuration stays. The returned func stops listening.
func (e *Env) reloadOnHangup(log *slog.Logger, reloads chan co.Reload) func() {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-hup:
			case <-done:
				return
			}
			r, err := e.reread(log)
			if err != nil {
				log.Error("SIGHUP: configuration not reloaded, the running one stays", "event", "reload", "error", err)
				continue
			}
			select { // the newest wins over one not yet applied
			case <-reloads:
			default:
			}
			reloads <- r
			log.Info("SIGHUP: configuration read; it applies at the next gate evaluation", "event", "reload")
		}
	}()
	return func() {
		signal.Stop(hup)
		close(done)
	}
}

// reread loads and wires the configuration afresh.
func (e *Env) reread(log *slog.Logger) (co.Reload, error) {
	cfg, err := e.loadConfig()
	if err != nil {
		return co.Reload{}, err
	}
	w, err := assemble(cfg, log, e.holderArgv(), nil)
	if err != nil {
		return co.Reload{}, err
	}
	return co.Reload{Options: w.opts, Deps: w.deps}, nil
}
