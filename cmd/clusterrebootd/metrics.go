package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	co "github.com/clusterrebootd/clusterrebootd/lib/coordinator"
	"github.com/clusterrebootd/clusterrebootd/lib/gate"
	"github.com/clusterrebootd/clusterrebootd/lib/metrics"
)

// metricsPort feeds lib/metrics from a check or holder run: it is the
// coordinator's Recorder, counts the health script's runs (scriptMetrics)
// and records how the run ended. It records nothing until start (only check
// and hold start it: status and simulate run the health script too, and
// must not count) and nothing at all when [metrics] textfile is "". A
// metrics failure is logged and never changes the run's exit code.
type metricsPort struct {
	textfile string
	labels   metrics.Labels
	state    stateFile
	log      *slog.Logger
	now      func() time.Time

	sink *metrics.Sink // set by start, before the run begins
}

// start begins recording for this run.
func (m *metricsPort) start() {
	if m == nil || m.textfile == "" {
		return
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	s, err := metrics.NewSink(metrics.Options{Textfile: m.textfile, Labels: m.labels,
		Store: metricsStore{m.state}, Logger: m.log})
	if err != nil {
		m.log.Warn("metrics disabled for this run", "error", err)
		return
	}
	m.sink = s
}

// end records the run's outcome and writes the metrics, waiting a bounded
// time even when the run's context ended (the holder is stopped by the
// shutdown it asked for).
func (m *metricsPort) end(ctx context.Context, err error) {
	if m == nil || m.sink == nil {
		return
	}
	code := exitCodeFor(err)
	if reason, ok := blockedReason(err); ok {
		m.sink.Blocked(reason)
	}
	m.sink.RunEnded(metrics.RunEnd{At: m.now(), ExitCode: code, Success: code == 0 || code == 3 || code == 4 || code == 5})
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), metrics.DefaultTimeout)
	defer cancel()
	if err := m.sink.Close(cctx); err != nil {
		m.log.Warn("metrics not written", "error", err)
	}
}

func (m *metricsPort) LockAcquired(wait time.Duration) { m.sink.LockAcquired(wait) }
func (m *metricsPort) RebootCompleted()                { m.sink.RebootCompleted() }
func (m *metricsPort) Observed(o co.Observation) {
	m.sink.Observe(metrics.Observation{RebootRequired: o.RebootRequired, SlotHeld: o.SlotHeld, SlotsOverdue: o.OverdueSlots})
}

// scriptMetrics counts every run of a configured health script by phase
// and status.
type scriptMetrics struct {
	next       co.HealthScript
	m          *metricsPort
	configured bool // a script is configured (else there is nothing to count)
}

func (s scriptMetrics) Run(ctx context.Context, phase string, v co.View) (co.ScriptVerdict, error) {
	verdict, err := s.next.Run(ctx, phase, v)
	if s.configured {
		s.m.sink.HealthCheck(phase, healthCheckStatus(verdict, err))
	}
	return verdict, err
}

// healthCheckStatus is the status label of one health script run.
func healthCheckStatus(v co.ScriptVerdict, err error) string {
	switch {
	case err == nil && v.Allowed:
		return metrics.StatusPass
	case err == nil:
		return metrics.StatusFail
	case errors.Is(err, gate.ErrScriptTimeout):
		return metrics.StatusTimeout
	}
	return metrics.StatusError
}

// exitCodeFor is the exit code main gives err (DESIGN §6).
func exitCodeFor(err error) int {
	if err == nil {
		return 0
	}
	var ec interface{ ExitCode() int }
	if errors.As(err, &ec) {
		return ec.ExitCode()
	}
	return 1
}

// blockedReason is the reason label of a run that ended without a reboot,
// from the coordinator's *Error (exit code, then gate). ok is false for a
// run that ended fine.
func blockedReason(err error) (reason string, ok bool) {
	if err == nil {
		return "", false
	}
	var ce *co.Error
	if !errors.As(err, &ce) {
		return metrics.ReasonInternal, true
	}
	switch ce.Code {
	case co.CodeOK:
		return "", false
	case co.CodeHealth:
		if ce.Gate == "policy" || ce.Gate == "policy-under-lock" {
			return metrics.ReasonPolicy, true
		}
		return metrics.ReasonHealth, true // health-script, post-boot
	case co.CodeBusy:
		if ce.Gate == "slots" {
			return metrics.ReasonSlots, true
		}
		return metrics.ReasonLock, true // session, fence, lock, slot deadline
	case co.CodeEtcd:
		return metrics.ReasonEtcd, true
	case co.CodeDetector:
		return metrics.ReasonDetector, true
	case co.CodeBlocked:
		if r, ok := blockedGates[ce.Gate]; ok {
			return r, true
		}
		return metrics.ReasonOther, true
	}
	return metrics.ReasonInternal, true
}

// blockedGates maps the gates that exit 5 to their reason.
var blockedGates = map[string]string{
	"kill-switch": metrics.ReasonKillSwitch, "pause": metrics.ReasonPaused, "window": metrics.ReasonWindow,
	"reboot-loop-guard": metrics.ReasonLoopGuard, "inhibitors": metrics.ReasonInhibitor, "hold": metrics.ReasonStopped,
}

// metricsStore keeps the metrics in the state file (metrics.Store).
type metricsStore struct{ f stateFile }

func (s metricsStore) Lock(ctx context.Context) (func(), error) {
	l, err := s.f.lock(ctx)
	if err != nil {
		return nil, err
	}
	return l.Unlock, nil
}

// Load returns the stored metrics. A state file that cannot be read at all
// is an error (never overwritten from here: it holds the reboot-loop
// guard); an unreadable metrics section is metrics.ErrCorrupt.
func (s metricsStore) Load() (metrics.Snapshot, error) {
	doc, err := s.f.read()
	if err != nil {
		return metrics.Snapshot{}, err
	}
	var snap metrics.Snapshot
	if len(doc.Metrics) == 0 {
		return snap, nil
	}
	if err := json.Unmarshal(doc.Metrics, &snap); err != nil {
		return metrics.Snapshot{}, fmt.Errorf("%w: %s: %w", metrics.ErrCorrupt, s.f.path, err)
	}
	return snap, nil
}

// Save replaces the metrics section and keeps the rest of the file.
func (s metricsStore) Save(snap metrics.Snapshot) error {
	doc, err := s.f.read()
	if err != nil {
		return err
	}
	raw, err := json.Marshal(snap)
	if err != nil {
		return err
	}
	doc.Metrics = raw
	return s.f.write(doc)
}
