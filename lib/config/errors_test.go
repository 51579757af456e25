package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFileProblems(t *testing.T) {
	t.Run("missing main file", func(t *testing.T) {
		dir := t.TempDir()
		_, err := Load(SourceFor(filepath.Join(dir, "config.toml")), testOpts())
		expectProblems(t, dir, err, []want{{"config.toml", 0, "", "no such file"}})
	})
	t.Run("no main file given", func(t *testing.T) {
		_, err := Load(Source{}, testOpts())
		expectProblems(t, "", err, []want{{"", 0, "", "no configuration file given"}})
	})
	t.Run("main file is a directory", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.Mkdir(filepath.Join(dir, "config.toml"), 0o755); err != nil {
			t.Fatal(err)
		}
		_, err := Load(SourceFor(filepath.Join(dir, "config.toml")), testOpts())
		expectProblems(t, dir, err, []want{{"config.toml", 0, "", "not a regular file"}})
	})
	t.Run("ten megabytes", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "config.toml"), strings.Repeat("# padding\n", 1<<20), 0o644)
		_, err := Load(SourceFor(filepath.Join(dir, "config.toml")), testOpts())
		expectProblems(t, dir, err, []want{{"config.toml", 0, "", "file too large"}})
	})
	t.Run("drop-in dir is a file", func(t *testing.T) {
		dir := t.TempDir()
		writeTree(t, dir, map[string]string{"config.toml": "", "config.d": "not a dir"})
		_, err := Load(SourceFor(filepath.Join(dir, "config.toml")), testOpts())
		expectProblems(t, dir, err, []want{{"config.d", 0, "", "cannot read drop-in directory"}})
	})
	t.Run("drop-in is a directory", func(t *testing.T) {
		dir := t.TempDir()
		writeTree(t, dir, map[string]string{"config.toml": "", "config.d/x.toml/y": ""})
		_, err := Load(SourceFor(filepath.Join(dir, "config.toml")), testOpts())
		expectProblems(t, dir, err, []want{{"config.d/x.toml", 0, "", "not a regular file"}})
	})
	t.Run("dangling drop-in symlink", func(t *testing.T) {
		dir := t.TempDir()
		writeTree(t, dir, map[string]string{"config.toml": ""})
		if err := os.Symlink(filepath.Join(dir, "gone"), filepath.Join(dir, "config.d", "x.toml")); err != nil {
			if err := os.MkdirAll(filepath.Join(dir, "config.d"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join(dir, "gone"), filepath.Join(dir, "config.d", "x.toml")); err != nil {
				t.Fatal(err)
			}
		}
		_, err := Load(SourceFor(filepath.Join(dir, "config.toml")), testOpts())
		expectProblems(t, dir, err, []want{{"config.d/x.toml", 0, "", "cannot read"}})
	})
	t.Run("unreadable file (non-root only)", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("root reads every file")
		}
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "config.toml"), "", 0o000)
		_, err := Load(SourceFor(filepath.Join(dir, "config.toml")), testOpts())
		expectProblems(t, dir, err, []want{{"config.toml", 0, "", "permission denied"}})
	})
}

func TestReadableFileUnreadable(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads every file")
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "ca.pem"), "ca", 0o000)
	_, err, path := loadString(t, "[etcd.tls]\nca_file = \""+filepath.Join(dir, "ca.pem")+"\"\n")
	expectProblems(t, filepath.Dir(path), err, []want{{"config.toml", 2, "etcd.tls.ca_file", "permission denied"}})
}

func TestProblemString(t *testing.T) {
	for _, tc := range []struct {
		p    Problem
		want string
	}{
		{Problem{"/etc/c.toml", 3, "lock.ttl", "bad"}, "/etc/c.toml:3: lock.ttl: bad"},
		{Problem{"/etc/c.toml", 0, "lock.ttl", "bad"}, "/etc/c.toml: lock.ttl: bad"},
		{Problem{"/etc/c.toml", 7, "", "syntax error"}, "/etc/c.toml:7: syntax error"},
		{Problem{"", 0, "", "no file"}, "config: no file"},
	} {
		if got := tc.p.String(); got != tc.want {
			t.Errorf("%#v.String() = %q, want %q", tc.p, got, tc.want)
		}
	}
	var e *Error
	if e.Error() != ErrInvalid.Error() {
		t.Errorf("nil *Error prints %q", e.Error())
	}
}
