package main

import (
	"errors"
	"fmt"
	"path/filepath"
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
