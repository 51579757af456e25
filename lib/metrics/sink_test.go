package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// fileStore keeps the snapshot as JSON in a real file and locks with flock
// on a separate lock file, like the state file of cmd/clusterrebootd: two
// stores on the same files exclude each other like two processes do (flock
// locks belong to the open file description).
type fileStore struct {
	path, lockPath string
	loadErr        error // returned by Load instead of reading
	saveErr        error
	loads, saves   int
	mu             sync.Mutex
}

func newFileStore(dir string) *fileStore {
	return &fileStore{path: filepath.Join(dir, "state.json"), lockPath: filepath.Join(dir, "state.lock")}
}

func (s *fileStore) Lock(ctx context.Context) (func(), error) {
	f, err := os.OpenFile(s.lockPath, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, err
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

func (s *fileStore) Load() (Snapshot, error) {
	s.mu.Lock()
	s.loads++
	loadErr := s.loadErr
	s.mu.Unlock()
	if loadErr != nil {
		return Snapshot{}, loadErr
	}
	var snap Snapshot
	b, err := os.ReadFile(s.path)
	if errors.Is(err, os.ErrNotExist) {
		return snap, nil
	}
	if err != nil {
		return snap, err
	}
	return snap, json.Unmarshal(b, &snap)
}

func (s *fileStore) Save(snap Snapshot) error {
	s.mu.Lock()
	s.saves++
	saveErr := s.saveErr
	s.mu.Unlock()
	if saveErr != nil {
		return saveErr
	}
	b, err := json.Marshal(snap)
	if err != nil {
		return err
	}
	tmp := s.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, s.path)
}

func (s *fileStore) set(loadErr, saveErr error) {
	s.mu.Lock()
	s.loadErr, s.saveErr = loadErr, saveErr
	s.mu.Unlock()
}

func (s *fileStore) stored(t *testing.T) Snapshot {
	t.Helper()
	s.set(nil, nil)
	snap, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func newSink(t *testing.T, store Store, textfile string) *Sink {
	t.Helper()
	s, err := NewSink(Options{Textfile: textfile, Labels: Labels{Cluster: "c", Node: "n"}, Store: store, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

func readText(t *testing.T, path string) Families {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return parseOK(t, b)
}

func TestNewSinkOptions(t *testing.T) {
	store := newFileStore(t.TempDir())
	for name, opt := range map[string]Options{
		"empty textfile":    {Store: store},
		"relative textfile": {Textfile: "x.prom", Store: store},
		"no store":          {Textfile: "/x.prom"},
	} {
		if _, err := NewSink(opt); err == nil {
			t.Errorf("%s: NewSink accepted %+v", name, opt)
		}
	}
	s, err := NewSink(Options{Textfile: "/nonexistent/x.prom", Store: store})
	if err != nil {
		t.Fatal(err)
	}
	if s.opt.Timeout != DefaultTimeout {
		t.Errorf("timeout = %s", s.opt.Timeout)
	}
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(t.Context()); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

func TestNilSink(t *testing.T) {
	var s *Sink
	s.HealthCheck(PhasePreLock, StatusPass)
	s.LockAcquired(time.Second)
	s.Blocked(ReasonWindow)
	s.RebootCompleted()
	s.Observe(Observation{})
	s.RunEnded(RunEnd{})
	if s.Flush(t.Context()) != nil || s.Close(t.Context()) != nil {
		t.Error("nil sink returned an error")
	}
}

// TestSinkRuns: three runs of the life of a node, each its own sink on the
// same store; the text file after each is valid, shows what was recorded,
// and no counter goes down from one run to the next.
func TestSinkRuns(t *testing.T) {
	dir := t.TempDir()
	store, prom := newFileStore(dir), filepath.Join(dir, "m.prom")
	runs := []struct {
		record func(s *Sink)
		check  func(t *testing.T, fs Families)
	}{
		{func(s *Sink) { // check: needed, window closed
			s.HealthCheck(PhasePreLock, StatusPass)
			s.Observe(Observation{RebootRequired: true})
			s.Blocked(ReasonWindow)
			s.RunEnded(RunEnd{At: t0, ExitCode: 5, Success: true})
		}, func(t *testing.T, fs Families) {
			wantValue(t, fs, 1, NameBlocked, "reason", ReasonWindow)
			wantValue(t, fs, 1, NameRebootRequired)
			wantValue(t, fs, 5, NameLastExitCode)
		}},
		{func(s *Sink) { // holder: lock, reboot requested (the process ends at the shutdown)
			s.HealthCheck(PhaseUnderLock, StatusPass)
			s.LockAcquired(1500 * time.Millisecond)
		}, func(t *testing.T, fs Families) {
			wantValue(t, fs, 1, NameLockAcquire+"_count")
			wantValue(t, fs, 1, NameLockAcquire+"_bucket", "le", "5")
			wantValue(t, fs, 0, NameLockAcquire+"_bucket", "le", "1")
			wantValue(t, fs, 1, NameRebootRequired) // gauges of the last check stay
		}},
		{func(s *Sink) { // post-boot check: released
			s.HealthCheck(PhasePostBoot, StatusPass)
			s.RebootCompleted()
			s.Observe(Observation{})
			s.RunEnded(RunEnd{At: t0.Add(time.Hour), Success: true})
		}, func(t *testing.T, fs Families) {
			wantValue(t, fs, 1, NameReboots)
			wantValue(t, fs, 0, NameRebootRequired)
			wantValue(t, fs, 1, NameBlocked, "reason", ReasonWindow)
			for _, p := range Phases {
				wantValue(t, fs, 1, NameHealthChecks, "phase", p, "status", StatusPass)
			}
			wantValue(t, fs, float64(t0.Add(time.Hour).UnixMilli())/1000, NameLastSuccess)
		}},
	}
	var prev Families
	for i, r := range runs {
		s := newSink(t, store, prom)
		r.record(s)
		if err := s.Close(t.Context()); err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		fs := readText(t, prom)
		r.check(t, fs)
		if prev != nil {
			if err := Monotonic(prev, fs); err != nil {
				t.Errorf("run %d: %v", i, err)
			}
		}
		prev = fs
	}
	if snap := store.stored(t); snap.Reboots != 1 || snap.LockAcquire.Count != 1 {
		t.Errorf("stored = %+v", snap)
	}
}

// TestSinkConcurrentProcesses: a check and a holder recording at the same
// time on one store lose no count.
func TestSinkConcurrentProcesses(t *testing.T) {
	dir := t.TempDir()
	prom := filepath.Join(dir, "m.prom")
	const per = 40
	var wg sync.WaitGroup
	for _, reason := range []string{ReasonWindow, ReasonHealth} {
		// Each "process" has its own store (own lock file descriptor).
		s := newSink(t, newFileStore(dir), prom)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				s.Blocked(reason)
				s.LockAcquired(time.Millisecond)
				time.Sleep(100 * time.Microsecond) // interleave with the background flushes
			}
			if err := s.Close(context.Background()); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	fs := readText(t, prom)
	wantValue(t, fs, per, NameBlocked, "reason", ReasonWindow)
	wantValue(t, fs, per, NameBlocked, "reason", ReasonHealth)
	wantValue(t, fs, 2*per, NameLockAcquire+"_count")
}

func TestSinkStoreFailures(t *testing.T) {
	t.Run("lock busy: kept pending, stored later", func(t *testing.T) {
		dir := t.TempDir()
		store, prom := newFileStore(dir), filepath.Join(dir, "m.prom")
		other := newFileStore(dir)
		unlock, err := other.Lock(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		s, err := NewSink(Options{Textfile: prom, Store: store, Timeout: 20 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		s.Blocked(ReasonEtcd)
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		err = s.Flush(ctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Flush with the lock held elsewhere = %v", err)
		}
		if _, err := os.Stat(prom); !os.IsNotExist(err) {
			t.Errorf("text file written without the lock: %v", err)
		}
		s.Blocked(ReasonEtcd)
		unlock()
		if err := s.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		wantValue(t, readText(t, prom), 2, NameBlocked, "reason", ReasonEtcd)
	})
	t.Run("load fails: kept pending", func(t *testing.T) {
		dir := t.TempDir()
		store, prom := newFileStore(dir), filepath.Join(dir, "m.prom")
		s := newSink(t, store, prom)
		store.set(errors.New("disk on fire"), nil)
		s.RebootCompleted()
		waitLoads(t, store, 1)
		if err := s.Flush(t.Context()); err == nil || !strings.Contains(err.Error(), "disk on fire") {
			t.Errorf("Flush = %v", err)
		}
		store.set(nil, nil)
		if err := s.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		wantValue(t, readText(t, prom), 1, NameReboots)
	})
	t.Run("save fails: kept pending", func(t *testing.T) {
		dir := t.TempDir()
		store, prom := newFileStore(dir), filepath.Join(dir, "m.prom")
		s := newSink(t, store, prom)
		store.set(nil, errors.New("read-only"))
		s.RebootCompleted()
		if err := s.Flush(t.Context()); err == nil || !strings.Contains(err.Error(), "read-only") {
			// the background flush may have taken it first: flush again
			s.RebootCompleted()
			if err := s.Flush(t.Context()); err == nil {
				t.Error("Flush with a failing Save succeeded")
			}
		}
		store.set(nil, nil)
		if err := s.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		if v, _ := readText(t, prom).Value(NameReboots); v < 1 {
			t.Errorf("reboots = %v after the store recovered", v)
		}
	})
	t.Run("corrupt stored metrics: start from zero", func(t *testing.T) {
		dir := t.TempDir()
		store, prom := newFileStore(dir), filepath.Join(dir, "m.prom")
		if err := store.Save(Snapshot{Reboots: 7}); err != nil {
			t.Fatal(err)
		}
		store.set(errors.Join(ErrCorrupt, errors.New("bad json")), nil)
		s := newSink(t, store, prom)
		s.RebootCompleted()
		if err := s.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		wantValue(t, readText(t, prom), 1, NameReboots)
	})
	t.Run("text file fails: counts stored once", func(t *testing.T) {
		dir := t.TempDir()
		store, prom := newFileStore(dir), filepath.Join(dir, "missing", "m.prom")
		s := newSink(t, store, prom)
		s.RebootCompleted()
		// The failure is logged by whichever flush met it (background or
		// Close's), never returned to the run's decision.
		_ = s.Close(t.Context())
		s.RebootCompleted()
		if err := s.Flush(t.Context()); !errors.Is(err, ErrNoTextfileDir) {
			t.Errorf("Flush into a missing directory = %v, want ErrNoTextfileDir", err)
		}
		if _, err := os.Stat(prom); !os.IsNotExist(err) {
			t.Fatalf("text file in a missing directory: %v", err)
		}
		if snap := store.stored(t); snap.Reboots != 2 {
			t.Fatalf("stored reboots = %d, want 2 (stored although the file failed)", snap.Reboots)
		}
		if err := os.Mkdir(filepath.Dir(prom), 0o755); err != nil {
			t.Fatal(err)
		}
		s2 := newSink(t, store, prom)
		s2.RunEnded(RunEnd{At: t0, Success: true})
		if err := s2.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		wantValue(t, readText(t, prom), 2, NameReboots)
	})
	t.Run("text file fails otherwise: logged as a failure", func(t *testing.T) {
		dir := t.TempDir()
		prom := filepath.Join(dir, "m.prom")
		if err := os.Mkdir(prom, 0o755); err != nil { // a directory where the file goes
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(prom, "x"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		s := newSink(t, newFileStore(dir), prom)
		if err := s.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		s2 := newSink(t, newFileStore(dir), prom)
		s2.RebootCompleted()
		if err := s2.Close(t.Context()); err != nil && errors.Is(err, ErrNoTextfileDir) {
			t.Errorf("Close = %v: the directory exists", err)
		}
	})
}

func waitLoads(t *testing.T, s *fileStore, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		got := s.loads
		s.mu.Unlock()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("background flush did not run (%d loads)", got)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestSinkCloseBounded(t *testing.T) {
	dir := t.TempDir()
	store := newFileStore(dir)
	unlock, err := newFileStore(dir).Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	s, err := NewSink(Options{Textfile: filepath.Join(dir, "m.prom"), Store: store, Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	s.Blocked(ReasonWindow) // the background flush now waits for the lock
	waitLocking(t, s)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if err := s.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close while the store stays locked = %v", err)
	}
}

// waitLocking waits until the background flush took the pending delta.
func waitLocking(t *testing.T, s *Sink) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		empty := s.pending.empty()
		s.mu.Unlock()
		if empty {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("background flush never started")
		}
		time.Sleep(time.Millisecond)
	}
}
