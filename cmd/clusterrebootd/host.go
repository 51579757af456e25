package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	co "github.com/clusterrebootd/clusterrebootd/lib/coordinator"
	"github.com/clusterrebootd/clusterrebootd/lib/obs"
)

// hostPort is coordinator.Host over the [paths] of the config.
type hostPort struct {
	bootIDPath, killSwitch, runDir string
}

const (
	markerRequested = "reboot-requested"
	markerRebooted  = "rebooted"
)

func (h hostPort) BootID() (string, error) {
	b, err := obs.ReadFileBounded(h.bootIDPath, 4096)
	if err != nil {
		return "", fmt.Errorf("boot id: %w", err)
	}
	id := strings.TrimSpace(string(b))
	if id == "" || len(id) > 128 {
		return "", fmt.Errorf("boot id: %s holds no usable id", h.bootIDPath)
	}
	return id, nil
}

func (h hostPort) KillSwitch() (bool, error) {
	_, err := os.Lstat(h.killSwitch)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	}
	return false, err
}

func (h hostPort) MarkRebootRequested(bootID string) error {
	if err := os.MkdirAll(h.runDir, 0o755); err != nil {
		return err
	}
	return obs.WriteFileAtomic(filepath.Join(h.runDir, markerRequested), []byte(bootID+"\n"), 0o644)
}

func (h hostPort) RebootRequested(bootID string) (bool, error) {
	b, err := obs.ReadFileBounded(filepath.Join(h.runDir, markerRequested), 4096)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return strings.TrimSpace(string(b)) == bootID, nil
}

func (h hostPort) ClearRebootRequested() error {
	err := os.Remove(filepath.Join(h.runDir, markerRequested))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

func (h hostPort) MarkRebooted(at time.Time) error {
	if err := os.MkdirAll(h.runDir, 0o755); err != nil {
		return err
	}
	return obs.WriteFileAtomic(filepath.Join(h.runDir, markerRebooted), []byte(at.UTC().Format(time.RFC3339Nano)+"\n"), 0o644)
}

// stateFile is coordinator.StateStore: JSON in [paths].state_dir, written
// atomically. The file also keeps the node's metrics (metricsStore), so every
// write is a read-modify-write under an flock on <path>.lock: the check, the
// holder and operator commands may run at the same time and never lose each
// other's part.
type stateFile struct{ path string }

const (
	maxStateBytes = 1 << 20
	// stateLockWait bounds the wait for another process's state write
	// (a read and an atomic write of a small file).
	stateLockWait = 5 * time.Second
)

// stateDoc is the state file: the coordinator's State and, as raw JSON, the
// metrics. Keeping them raw means a metrics section this version cannot
// read never stops the coordinator from loading its state, and a State
// write never drops the metrics. Files written before metrics existed load
// as they are.
type stateDoc struct {
	co.State
	Metrics json.RawMessage `json:"metrics,omitempty"`
}

func (s stateFile) Load() (co.State, error) {
	doc, err := s.read()
	return doc.State, err
}

// read returns the whole file; a missing file is an empty document.
func (s stateFile) read() (stateDoc, error) {
	var doc stateDoc
	err := obs.ReadJSON(s.path, &doc, maxStateBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return stateDoc{}, nil
	}
	return doc, err
}

func (s stateFile) Save(st co.State) error {
	ctx, cancel := context.WithTimeout(context.Background(), stateLockWait)
	defer cancel()
	l, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer l.Unlock()
	doc, err := s.read()
	if err != nil {
		// Unreadable: the coordinator's new State replaces it (as before
		// metrics were kept here); the metrics start again from zero.
		doc = stateDoc{}
	}
	doc.State = st
	return s.write(doc)
}

// write stores doc; the caller holds the lock.
func (s stateFile) write(doc stateDoc) error {
	if err := os.MkdirAll(filepath.Dir(s.path), 0o755); err != nil {
		return err
	}
	return obs.WriteJSONAtomic(s.path, doc, 0o644)
}

// lock takes the state file's lock, waiting until ctx ends.
func (s stateFile) lock(ctx context.Context) (*flock, error) {
	return waitLock(ctx, s.path+".lock")
}

// waitLock takes an exclusive flock on path, polling until ctx ends.
func waitLock(ctx context.Context, path string) (*flock, error) {
	for {
		l, err := tryLock(path)
		if !errors.Is(err, errLocked) {
			return l, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("lock %s: %w", path, context.Cause(ctx))
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// flock is a host-local exclusive lock on a file in the run directory.
type flock struct{ f *os.File }

// errLocked: another process holds the lock.
var errLocked = errors.New("lock held by another process")

func tryLock(path string) (*flock, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errLocked
		}
		return nil, err
	}
	return &flock{f: f}, nil
}

func (l *flock) Unlock() { l.f.Close() }

// holderLockBusy reports whether a holder process holds the hold lock.
func holderLockBusy(path string) (bool, error) {
	l, err := tryLock(path)
	if errors.Is(err, errLocked) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	l.Unlock()
	return false, nil
}

// foregroundHolder runs the holder inside the check process
// ([systemd] holder = "foreground").
type foregroundHolder struct {
	lockPath string
	hold     func(ctx context.Context) error // set after the coordinator exists
}

func (f *foregroundHolder) Active(context.Context) (bool, error) { return holderLockBusy(f.lockPath) }

func (f *foregroundHolder) Start(ctx context.Context) error {
	l, err := tryLock(f.lockPath)
	if errors.Is(err, errLocked) {
		return nil // a holder appeared meanwhile: never two
	}
	if err != nil {
		return err
	}
	defer l.Unlock()
	return f.hold(ctx)
}
