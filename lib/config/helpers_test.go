package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const testHost = "node1.example.com"

// writeTree writes files (path relative to dir → content) below dir.
// "$DIR" in a content is replaced by dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for rel, content := range files {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(strings.ReplaceAll(content, "$DIR", dir)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func writeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // umask
		t.Fatal(err)
	}
}

func testOpts() Options {
	return Options{
		Hostname: testHost,
		ValidateWindow: func(spec string) error {
			if strings.Contains(spec, "bad") {
				return errors.New("cannot parse window")
			}
			return nil
		},
	}
}

// loadString loads content as the main file of a fresh directory.
func loadString(t *testing.T, content string) (*Config, error, string) {
	t.Helper()
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"config.toml": content})
	path := filepath.Join(dir, "config.toml")
	c, err := Load(SourceFor(path), testOpts())
	return c, err, path
}

func mustLoadString(t *testing.T, content string) *Config {
	t.Helper()
	c, err, _ := loadString(t, content)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return c
}

// problems returns the problems of a Load error, failing unless the error
// is an *Error that matches ErrInvalid.
func problems(t *testing.T, err error) []Problem {
	t.Helper()
	if err == nil {
		t.Fatal("Load succeeded, want an error")
	}
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("errors.Is(err, ErrInvalid) = false for %v", err)
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %T is not *Error", err)
	}
	if len(e.Problems) == 0 {
		t.Fatal("no problems in error")
	}
	return e.Problems
}

// want is an expected problem: file relative to the test directory (or an
// absolute path), exact line, exact key, and a part of the message.
type want struct {
	file string
	line int
	key  string
	msg  string
}

func (w want) String() string {
	return fmt.Sprintf("%s:%d: %s: ...%s...", w.file, w.line, w.key, w.msg)
}

// expectProblems checks that err holds exactly the wanted problems (in any
// order) and that Error() prints each of them as file:line: key: msg.
func expectProblems(t *testing.T, dir string, err error, wants []want) {
	t.Helper()
	ps := problems(t, err)
	text := err.Error()
	used := make([]bool, len(ps))
	for _, w := range wants {
		file := w.file
		if !filepath.IsAbs(file) {
			file = filepath.Join(dir, file)
		}
		found := false
		for i, p := range ps {
			if used[i] || p.File != file || p.Line != w.line || p.Key != w.key || !strings.Contains(p.Msg, w.msg) {
				continue
			}
			used[i], found = true, true
			prefix := file
			if w.line > 0 {
				prefix += fmt.Sprintf(":%d", w.line)
			}
			if w.key != "" {
				prefix += ": " + w.key
			}
			if !strings.Contains(text, prefix+": ") {
				t.Errorf("Error() does not contain %q:\n%s", prefix, text)
			}
			break
		}
		if !found {
			t.Errorf("missing problem %v; got:\n%s", w, text)
		}
	}
	if len(ps) != len(wants) {
		t.Errorf("got %d problems, want %d:\n%s", len(ps), len(wants), text)
	}
}
