package obs

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

// dirNames lists the names in dir, sorted.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func wantOnly(t *testing.T, dir string, names ...string) {
	t.Helper()
	if got := dirNames(t, dir); fmt.Sprint(got) != fmt.Sprint(names) {
		t.Errorf("directory holds %v, want %v (temp file left?)", got, names)
	}
}

func TestWriteFileAtomic(t *testing.T) {
	old := syscall.Umask(0o022)
	t.Cleanup(func() { syscall.Umask(old) })
	tests := []struct {
		name     string
		existing []byte // nil: no file before
		oldPerm  os.FileMode
		data     []byte
		perm     os.FileMode
	}{
		{"new 0600", nil, 0, []byte("hello\n"), 0o600},
		{"new 0644", nil, 0, []byte(`{"a":1}`), 0o644},
		{"new 0666 beats umask", nil, 0, []byte("x"), 0o666},
		{"new empty", nil, 0, []byte{}, 0o640},
		{"replace and tighten", []byte("old content, longer than the new"), 0o644, []byte("new"), 0o600},
		{"replace and widen", []byte("old"), 0o600, bytes.Repeat([]byte("n"), 1<<20), 0o644},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "state.json")
			if tt.existing != nil {
				if err := os.WriteFile(path, tt.existing, tt.oldPerm); err != nil {
					t.Fatal(err)
				}
			}
			if err := WriteFileAtomic(path, tt.data, tt.perm); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, tt.data) {
				t.Errorf("content = %q (%d bytes), want %d bytes", got[:min(len(got), 40)], len(got), len(tt.data))
			}
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode() != tt.perm {
				t.Errorf("mode = %v, want %v", fi.Mode(), tt.perm)
			}
			wantOnly(t, dir, "state.json")
		})
	}
}

func TestWriteFileAtomicRelativePath(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := WriteFileAtomic("metrics.prom", []byte("m 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "metrics.prom")); err != nil || string(got) != "m 1\n" {
		t.Errorf("content = %q, %v", got, err)
	}
	wantOnly(t, dir, "metrics.prom")
}

func TestWriteFileAtomicFailures(t *testing.T) {
	t.Run("path is a directory", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "target")
		if err := os.Mkdir(path, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(path, "inside"), []byte("i"), 0o644); err != nil {
			t.Fatal(err)
		}
		err := WriteFileAtomic(path, []byte("data"), 0o644)
		if err == nil || !strings.Contains(err.Error(), path) {
			t.Fatalf("err = %v, want an error naming %s", err, path)
		}
		wantOnly(t, dir, "target")
		if fi, err := os.Stat(path); err != nil || !fi.IsDir() {
			t.Errorf("target changed: %v, %v", fi, err)
		}
	})
	t.Run("directory missing", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "gone", "state.json")
		err := WriteFileAtomic(path, []byte("data"), 0o644)
		if !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("err = %v, want fs.ErrNotExist", err)
		}
		wantOnly(t, dir)
	})
	t.Run("directory removed", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "d")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(dir); err != nil {
			t.Fatal(err)
		}
		if err := WriteFileAtomic(filepath.Join(dir, "f"), []byte("data"), 0o644); err == nil {
			t.Fatal("write into a removed directory succeeded")
		}
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("directory reappeared: %v", err)
		}
	})
	t.Run("read-only directory", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("root ignores directory permissions; covered by the other cases")
		}
		dir := t.TempDir()
		path := filepath.Join(dir, "state.json")
		if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(dir, 0o755) })
		if err := WriteFileAtomic(path, []byte("new"), 0o644); !errors.Is(err, fs.ErrPermission) {
			t.Fatalf("err = %v, want fs.ErrPermission", err)
		}
		if got, _ := os.ReadFile(path); string(got) != "old" {
			t.Errorf("content = %q, want old", got)
		}
		wantOnly(t, dir, "state.json")
	})
}

// A full file system must fail the write and keep the old file. Needs root
// to mount a small tmpfs; skipped elsewhere.
func TestWriteFileAtomicFullFileSystem(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "size=64k,mode=0755"); err != nil {
		t.Skipf("cannot mount tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	path := filepath.Join(dir, "state.json")
	if err := WriteFileAtomic(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := WriteFileAtomic(path, bytes.Repeat([]byte("x"), 256<<10), 0o644)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("err = %v, want ENOSPC", err)
	}
	if got, err := os.ReadFile(path); err != nil || string(got) != "old" {
		t.Errorf("old file damaged: %q, %v", got, err)
	}
	wantOnly(t, dir, "state.json")
	// The space of the removed temp file is free again.
	if err := WriteFileAtomic(path, bytes.Repeat([]byte("y"), 16<<10), 0o644); err != nil {
		t.Errorf("write after ENOSPC: %v", err)
	}
}

// Concurrent writers each write a complete, distinct content; a reader must
// only ever see one of them, whole.
func TestWriteFileAtomicConcurrent(t *testing.T) {
	const writers, rounds, size = 8, 40, 64 << 10
	dir := t.TempDir()
	path := filepath.Join(dir, "state")
	content := func(w int) []byte { return bytes.Repeat([]byte{byte('A' + w)}, size) }
	if err := WriteFileAtomic(path, content(0), 0o644); err != nil {
		t.Fatal(err)
	}
	var done atomic.Bool
	var reads atomic.Int64
	readerErr := make(chan error, 1)
	go func() {
		defer close(readerErr)
		for !done.Load() || reads.Load() == 0 {
			got, err := os.ReadFile(path)
			if err != nil {
				readerErr <- err
				return
			}
			reads.Add(1)
			if len(got) != size || !bytes.Equal(got, bytes.Repeat(got[:1], size)) {
				readerErr <- fmt.Errorf("torn read: %d bytes, first %q", len(got), got[:min(len(got), 1)])
				return
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, writers*rounds)
	for w := range writers {
		wg.Go(func() {
			for range rounds {
				if err := WriteFileAtomic(path, content(w), 0o644); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	done.Store(true)
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if err := <-readerErr; err != nil {
		t.Fatal(err)
	}
	wantOnly(t, dir, "state")
}

type testState struct {
	Reasons []string `json:"reasons"`
	Reboots int      `json:"reboots"`
}

func TestWriteJSONAtomicRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	in := testState{Reasons: []string{"kernel", "libc"}, Reboots: 3}
	if err := WriteJSONAtomic(path, in, 0o600); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	if !strings.HasSuffix(string(raw), "}\n") || !strings.Contains(string(raw), "\n  \"reboots\": 3") {
		t.Errorf("file not indented JSON with final newline: %q", raw)
	}
	var out testState
	if err := ReadJSON(path, &out, 1<<20); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(out) != fmt.Sprint(in) {
		t.Errorf("read %+v, want %+v", out, in)
	}
}

func TestWriteJSONAtomicUnencodable(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	if err := WriteJSONAtomic(path, map[string]any{"c": make(chan int)}, 0o600); err == nil {
		t.Fatal("encoding a channel succeeded")
	}
	wantOnly(t, dir)
}

func mkfifo(t *testing.T, path string) string {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestReadJSON(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := `{"reasons":["kernel"],"reboots":1}`
	tests := []struct {
		name      string
		path      string
		max       int64
		notExist  bool
		corrupt   bool
		otherErr  bool
		wantValue testState
	}{
		{"good", write("good.json", good), 1 << 10, false, false, false, testState{[]string{"kernel"}, 1}},
		{"exactly max", write("exact.json", good), int64(len(good)), false, false, false, testState{[]string{"kernel"}, 1}},
		{"max int64", write("big-limit.json", good), math.MaxInt64, false, false, false, testState{[]string{"kernel"}, 1}},
		{"one byte too large", write("over.json", good), int64(len(good)) - 1, false, true, false, testState{}},
		{"oversized", write("huge.json", `{"reasons":["`+strings.Repeat("x", 1<<20)+`"]}`), 1 << 10, false, true, false, testState{}},
		{"missing", filepath.Join(dir, "missing.json"), 1 << 10, true, false, false, testState{}},
		{"truncated", write("trunc.json", good[:10]), 1 << 10, false, true, false, testState{}},
		{"empty", write("empty.json", ""), 1 << 10, false, true, false, testState{}},
		{"garbage", write("garbage.json", "\x00\x01not json"), 1 << 10, false, true, false, testState{}},
		{"trailing data", write("trailing.json", good+"}"), 1 << 10, false, true, false, testState{}},
		{"wrong type", write("type.json", `{"reboots":"many"}`), 1 << 10, false, true, false, testState{}},
		{"directory", dir, 1 << 10, false, true, false, testState{}},
		{"fifo (must not block)", mkfifo(t, filepath.Join(dir, "fifo.json")), 1 << 10, false, true, false, testState{}},
		{"zero max", write("zero.json", good), 0, false, false, true, testState{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got testState
			err := ReadJSON(tt.path, &got, tt.max)
			if errors.Is(err, fs.ErrNotExist) != tt.notExist {
				t.Errorf("err = %v; errors.Is(fs.ErrNotExist) want %v", err, tt.notExist)
			}
			if errors.Is(err, ErrCorruptState) != tt.corrupt {
				t.Errorf("err = %v; errors.Is(ErrCorruptState) want %v", err, tt.corrupt)
			}
			if (err != nil) != (tt.notExist || tt.corrupt || tt.otherErr) {
				t.Fatalf("err = %v", err)
			}
			if err != nil {
				if !strings.Contains(err.Error(), tt.path) {
					t.Errorf("error %q does not name %s", err, tt.path)
				}
				return
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.wantValue) {
				t.Errorf("value = %+v, want %+v", got, tt.wantValue)
			}
		})
	}
}

func TestReadFileBounded(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "boot_id")
	if err := os.WriteFile(p, []byte("abc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFileBounded(p, 4); err != nil || string(b) != "abc\n" {
		t.Fatalf("ReadFileBounded = %q, %v", b, err)
	}
	for name, path := range map[string]string{
		"too large": p, "fifo": mkfifo(t, filepath.Join(dir, "fifo")), "device": "/dev/zero", "directory": dir,
	} {
		if _, err := ReadFileBounded(path, 3); !errors.Is(err, ErrUnreadable) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v, want ErrUnreadable naming %s", name, err, path)
		}
	}
	if _, err := ReadFileBounded(filepath.Join(dir, "missing"), 3); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
	if _, err := ReadFileBounded(p, 0); err == nil {
		t.Error("maxBytes 0 accepted")
	}
}
