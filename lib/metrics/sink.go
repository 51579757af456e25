package metrics

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/obs"
)

// ErrCorrupt is wrapped by a Store's Load when the stored metrics cannot be
// read back: the Sink then starts again from a zero snapshot (a counter
// reset) instead of never writing metrics again.
var ErrCorrupt = errors.New("metrics: stored metrics unreadable")

// ErrNoTextfileDir: the text file's directory does not exist (node_exporter
// is not installed). The counters are still stored; the Sink logs this at
// debug level only, as it is a normal set-up.
var ErrNoTextfileDir = errors.New("metrics: text file directory missing")

// Store is where the snapshot lives between runs. One store is shared by
// every process of the node (check and holder may run at the same time).
type Store interface {
	// Lock takes the store's lock, held across processes, waiting at most
	// until ctx ends.
	Lock(ctx context.Context) (unlock func(), err error)
	// Load returns the stored snapshot, the zero Snapshot when none is
	// stored yet, or an error (wrapping ErrCorrupt when the stored metrics
	// are unreadable but may be replaced).
	Load() (Snapshot, error)
	// Save stores s.
	Save(s Snapshot) error
}

// DefaultTimeout bounds one background flush (the wait for the store's lock
// included) when Options.Timeout is not set.
const DefaultTimeout = 5 * time.Second

// Options configure a Sink.
type Options struct {
	Textfile string // absolute path of the .prom file node_exporter reads
	Labels   Labels
	Store    Store
	Logger   *slog.Logger  // nil: discard
	Timeout  time.Duration // bounds a background flush; <= 0: DefaultTimeout
}

// Sink collects what a run observes and merges it into the stored snapshot
// in the background. Its recording methods never block on I/O and never
// fail; a nil *Sink records nothing.
type Sink struct {
	opt Options
	log *slog.Logger

	mu      sync.Mutex
	pending Delta

	flushMu sync.Mutex // one store-and-write at a time
	kick    chan struct{}
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
}

// NewSink checks the options and starts the background writer; Close stops
// it.
func NewSink(opt Options) (*Sink, error) {
	if opt.Textfile == "" || !filepath.IsAbs(opt.Textfile) {
		return nil, fmt.Errorf("metrics: textfile %q is not an absolute path", opt.Textfile)
	}
	if opt.Store == nil {
		return nil, errors.New("metrics: no store")
	}
	if opt.Timeout <= 0 {
		opt.Timeout = DefaultTimeout
	}
	log := opt.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Sink{opt: opt, log: log, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go s.loop()
	return s, nil
}

// HealthCheck counts one health script run.
func (s *Sink) HealthCheck(phase, status string) {
	s.add(Delta{HealthChecks: map[[2]string]uint64{{phase, status}: 1}})
}

// LockAcquired observes one wait for the cluster lock.
func (s *Sink) LockAcquired(wait time.Duration) {
	s.add(Delta{LockWaits: []float64{wait.Seconds()}})
}

// Blocked counts a run that ended without a reboot for reason (one of
// Reasons).
func (s *Sink) Blocked(reason string) { s.add(Delta{Blocked: map[string]uint64{reason: 1}}) }

// RebootCompleted counts a completed coordinated reboot of this node.
func (s *Sink) RebootCompleted() { s.add(Delta{Reboots: 1}) }

// Observe sets the gauges of what the run saw.
func (s *Sink) Observe(o Observation) { s.add(Delta{Observed: &o}) }

// RunEnded records the run's outcome.
func (s *Sink) RunEnded(r RunEnd) { s.add(Delta{RunEnded: &r}) }

func (s *Sink) add(d Delta) {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.pending.merge(d)
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default: // a flush is already due; it will take this too
	}
}

func (s *Sink) loop() {
	defer close(s.done)
	for {
		select {
		case <-s.stop:
			return
		case <-s.kick:
			ctx, cancel := context.WithTimeout(context.Background(), s.opt.Timeout)
			_ = s.Flush(ctx) // logged by Flush; what was not stored stays pending
			cancel()
		}
	}
}

// Flush stores what was recorded so far and rewrites the text file, waiting
// at most until ctx ends for the store's lock. What could not be stored
// stays pending for the next flush. The error is for the caller's log only.
func (s *Sink) Flush(ctx context.Context) error {
	if s == nil {
		return nil
	}
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	s.mu.Lock()
	d := s.pending
	s.pending = Delta{}
	s.mu.Unlock()
	if d.empty() {
		return nil
	}
	stored, err := s.store(ctx, d)
	if !stored {
		s.mu.Lock()
		d.merge(s.pending) // what came meanwhile is newer: its gauges win
		s.pending = d
		s.mu.Unlock()
	}
	switch {
	case errors.Is(err, ErrNoTextfileDir):
		s.log.Debug("metrics stored; no text file written", "error", err)
	case err != nil:
		s.log.Warn("could not update the metrics; the run goes on", "error", err, "textfile", s.opt.Textfile)
	}
	return err
}

// store merges d into the stored snapshot and writes the text file, all
// under the store's lock. stored reports whether d reached the store.
func (s *Sink) store(ctx context.Context, d Delta) (stored bool, _ error) {
	unlock, err := s.opt.Store.Lock(ctx)
	if err != nil {
		return false, fmt.Errorf("metrics: lock the store: %w", err)
	}
	defer unlock()
	snap, err := s.opt.Store.Load()
	if errors.Is(err, ErrCorrupt) {
		s.log.Warn("stored metrics unreadable: counters start again from zero", "error", err)
		snap, err = Snapshot{}, nil
	}
	if err != nil {
		return false, fmt.Errorf("metrics: load: %w", err)
	}
	snap.Apply(d)
	if err := s.opt.Store.Save(snap); err != nil {
		return false, fmt.Errorf("metrics: save: %w", err)
	}
	if err := obs.WriteFileAtomic(s.opt.Textfile, Render(snap, s.opt.Labels), 0o644); err != nil {
		if dir := filepath.Dir(s.opt.Textfile); !dirExists(dir) {
			return true, fmt.Errorf("%w: %s", ErrNoTextfileDir, dir)
		}
		return true, fmt.Errorf("metrics: %w", err)
	}
	return true, nil
}

// Close stops the background writer and flushes what is pending, waiting at
// most until ctx ends.
func (s *Sink) Close(ctx context.Context) error {
	if s == nil {
		return nil
	}
	s.once.Do(func() { close(s.stop) })
	select {
	case <-s.done:
	case <-ctx.Done():
		return fmt.Errorf("metrics: close: %w", ctx.Err())
	}
	return s.Flush(ctx)
}

func dirExists(dir string) bool {
	_, err := os.Stat(dir)
	return !errors.Is(err, fs.ErrNotExist)
}
