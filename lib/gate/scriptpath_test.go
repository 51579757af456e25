package gate

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func chmod(t *testing.T, p string, m os.FileMode) {
	t.Helper()
	if err := os.Chmod(p, m); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) string {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	return link
}

func mkdir(t *testing.T, p string, m os.FileMode) string {
	t.Helper()
	if err := os.Mkdir(p, 0o700); err != nil {
		t.Fatal(err)
	}
	chmod(t, p, m)
	return p
}

// TestScriptRefusals: every unsafe case is an error, the script never runs
// (it would create a marker file), and the result never allows.
func TestScriptRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		// setup returns the configured path; marker is the file the
		// script would create if it ran.
		setup   func(t *testing.T, dir, body string) string
		want    error
		errText string
	}{
		{"group-writable file", func(t *testing.T, dir, body string) string {
			p := writeScript(t, dir, "gate", body)
			chmod(t, p, 0o775)
			return p
		}, ErrScriptRefused, "writable by group or others"},
		{"world-writable file", func(t *testing.T, dir, body string) string {
			p := writeScript(t, dir, "gate", body)
			chmod(t, p, 0o757)
			return p
		}, ErrScriptRefused, "writable by group or others"},
		{"not executable", func(t *testing.T, dir, body string) string {
			p := writeScript(t, dir, "gate", body)
			chmod(t, p, 0o644)
			return p
		}, ErrScriptRefused, "not executable"},
		{"world-writable parent dir", func(t *testing.T, dir, body string) string {
			d := mkdir(t, filepath.Join(dir, "open"), 0o777)
			return writeScript(t, d, "gate", body)
		}, ErrScriptRefused, "directory"},
		{"group-writable grandparent dir", func(t *testing.T, dir, body string) string {
			d := mkdir(t, filepath.Join(dir, "grp"), 0o775)
			d2 := mkdir(t, filepath.Join(d, "inner"), 0o755)
			return writeScript(t, d2, "gate", body)
		}, ErrScriptRefused, "grp is writable"},
		{"symlink to group-writable file", func(t *testing.T, dir, body string) string {
			p := writeScript(t, dir, "real", body)
			chmod(t, p, 0o775)
			return symlink(t, p, filepath.Join(dir, "gate"))
		}, ErrScriptRefused, "writable by group or others"},
		{"symlink in world-writable dir to safe file", func(t *testing.T, dir, body string) string {
			p := writeScript(t, dir, "real", body)
			d := mkdir(t, filepath.Join(dir, "open"), 0o777)
			return symlink(t, p, filepath.Join(d, "gate"))
		}, ErrScriptRefused, "open is writable"},
		{"symlink to file in world-writable dir", func(t *testing.T, dir, body string) string {
			d := mkdir(t, filepath.Join(dir, "open"), 0o777)
			p := writeScript(t, d, "real", body)
			chmod(t, d, 0o777)
			return symlink(t, p, filepath.Join(dir, "gate"))
		}, ErrScriptRefused, "open is writable"},
		{"symlink loop", func(t *testing.T, dir, body string) string {
			symlink(t, "b", filepath.Join(dir, "a"))
			return symlink(t, "a", filepath.Join(dir, "b"))
		}, ErrScriptRefused, "too many levels"},
		{"directory", func(t *testing.T, dir, body string) string {
			return mkdir(t, filepath.Join(dir, "d"), 0o755)
		}, ErrScriptRefused, "not a regular file"},
		{"path through a file", func(t *testing.T, dir, body string) string {
			return writeScript(t, dir, "gate", body) + "/more"
		}, ErrScriptRefused, "not a directory"},
		{"relative path", func(t *testing.T, dir, body string) string {
			return "gate"
		}, ErrScriptRefused, "not an absolute path"},
		{"missing", func(t *testing.T, dir, body string) string {
			return filepath.Join(dir, "nope")
		}, ErrScriptMissing, "does not exist"},
		{"missing directory", func(t *testing.T, dir, body string) string {
			return filepath.Join(dir, "nodir", "gate")
		}, ErrScriptMissing, "does not exist"},
		{"dangling symlink", func(t *testing.T, dir, body string) string {
			return symlink(t, filepath.Join(dir, "gone"), filepath.Join(dir, "gate"))
		}, ErrScriptMissing, "gone does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			marker := filepath.Join(dir, "ran")
			p := tc.setup(t, dir, "touch "+marker+"\nexit 0\n")
			res, err := newScript(p).Run(t.Context(), PhaseUnderLock, testEnv)
			if !errors.Is(err, tc.want) {
				t.Fatalf("want %v, got %v", tc.want, err)
			}
			if !strings.Contains(err.Error(), tc.errText) {
				t.Errorf("error %q does not say %q", err, tc.errText)
			}
			if res.Allowed || res.ExitCode != -1 {
				t.Errorf("refused script allowed: %+v", res)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Errorf("refused script was executed")
			}
		})
	}
}

// TestScriptWrongOwner: the script, a directory or a symlink on the path
// owned by someone other than root (or Script.UID) is refused. As root the
// test chowns to another uid; otherwise it trusts root only, so the test's
// own files are "someone else's".
func TestScriptWrongOwner(t *testing.T) {
	const other = 54321
	type setup func(t *testing.T, dir string) string
	cases := map[string]setup{
		"file": func(t *testing.T, dir string) string {
			p := writeScript(t, dir, "gate", "exit 0\n")
			lchown(t, p, other)
			return p
		},
		"directory": func(t *testing.T, dir string) string {
			d := mkdir(t, filepath.Join(dir, "d"), 0o755)
			p := writeScript(t, d, "gate", "exit 0\n")
			lchown(t, d, other)
			return p
		},
		"symlink": func(t *testing.T, dir string) string {
			p := writeScript(t, dir, "real", "exit 0\n")
			l := symlink(t, p, filepath.Join(dir, "gate"))
			lchown(t, l, other)
			return l
		},
		"file in sticky dir": func(t *testing.T, dir string) string {
			d := mkdir(t, filepath.Join(dir, "tmp"), 0o777|os.ModeSticky)
			chmod(t, d, 0o777|os.ModeSticky)
			p := writeScript(t, d, "gate", "exit 0\n")
			lchown(t, p, other)
			return p
		},
	}
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) {
			p := mk(t, t.TempDir())
			s := newScript(p)
			if os.Getuid() != 0 {
				s.UID = -1 // our own files are not root's
			}
			res, err := s.Run(t.Context(), PhasePreLock, testEnv)
			if !errors.Is(err, ErrScriptRefused) || res.Allowed {
				t.Fatalf("want refusal, got %+v %v", res, err)
			}
			if !strings.Contains(err.Error(), "owned by uid") {
				t.Errorf("error does not name the owner: %v", err)
			}
		})
	}
	// UID >= 0 trusts that uid besides root.
	if os.Getuid() == 0 {
		p := writeScript(t, t.TempDir(), "gate", "exit 0\n")
		lchown(t, p, other)
		s := newScript(p)
		s.UID = other
		if res, err := s.Run(t.Context(), PhasePreLock, testEnv); err != nil || !res.Allowed {
			t.Errorf("file owned by Script.UID: %+v %v", res, err)
		}
	}
}

// lchown changes the owner as root; not as root there is nothing to do
// because the test trusts root only (see TestScriptWrongOwner).
func lchown(t *testing.T, p string, uid int) {
	t.Helper()
	if os.Getuid() != 0 {
		return
	}
	if err := os.Lchown(p, uid, -1); err != nil {
		t.Fatal(err)
	}
}
