package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestSyntaxErrorNamesKey: a syntax error on a line that defines a key
// names that key (with its table), so that an out-of-range integer reads
// "file:line: lock.max_concurrent: syntax error: ...".
func TestSyntaxErrorNamesKey(t *testing.T) {
	for _, tc := range []struct {
		name, content string
		line          int
		key           string
	}{
		{"int64 overflow in a table", "node_name = \"n\"\n[lock]\nmax_concurrent = 99999999999999999999\n", 3, "lock.max_concurrent"},
		{"negative overflow at the top", "\nnode_name = \"n\"\ncluster = -99999999999999999999\n", 3, "cluster"},
		{"duplicate key in a table", "[lock]\nttl = \"9s\"\n  ttl = \"8s\"\n", 3, "lock.ttl"},
		{"duplicate table", "[lock]\nttl = \"9s\"\n[lock]\n", 3, "lock"},
		{"dotted and quoted key", "[policy]\n\"a b\".c = 99999999999999999999\n", 2, `policy."a b".c`},
		{"key of a detector", "[[detector]]\ntype = \"auto\"\n[[detector]]\nneeded_exit_codes = [99999999999999999999]\n", 4, "detector[1].needed_exit_codes"},
		{"invalid UTF-8 in a value", "[reboot]\nwall_message = \"\xff\"\n", 2, "reboot.wall_message"},
		{"error inside a multi-line array", "[etcd]\nendpoints = [\n  99999999999999999999,\n]\n", 3, ""},
		{"error after a multi-line string", "[reboot]\nwall_message = \"\"\"\n[x]\n\"\"\"\nmethod = 99999999999999999999\n", 5, "reboot.method"},
		{"unterminated header", "cluster = \"a\"\n[lock\n", 2, ""},
		{"line without a key", "cluster = \"a\"\n= 1\n", 2, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err, path := loadString(t, tc.content)
			expectProblems(t, filepath.Dir(path), err, []want{{"config.toml", tc.line, tc.key, "syntax error"}})
		})
	}
}

func TestKeyAtLine(t *testing.T) {
	data := "a = 1\n[t]\nb = 2\n\"\"\"\n"
	for _, tc := range []struct {
		n    int
		want string
	}{{0, ""}, {1, "a"}, {2, "t"}, {3, "t.b"}, {4, ""}, {5, ""}, {6, ""}} {
		if got := keyAtLine(data, tc.n); got != tc.want {
			t.Errorf("keyAtLine(line %d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

// TestProblemQuotesOddPaths: a file name with a newline cannot forge a
// second problem line; ordinary names (spaces included) stay as they are.
func TestProblemQuotesOddPaths(t *testing.T) {
	for _, tc := range []struct {
		file, want string
	}{
		{"/etc/with space/c.toml", "/etc/with space/c.toml:3: k: m"},
		{"/etc/a\nb.toml", `"/etc/a\nb.toml":3: k: m`},
		{"/etc/a\x1b[31m.toml", `"/etc/a\x1b[31m.toml":3: k: m`},
		{"/etc/\xff.toml", `"/etc/\xff.toml":3: k: m`},
		{"/etc/a\u2028b.toml", `"/etc/a\u2028b.toml":3: k: m`},
		{"/etc/é.toml", "/etc/é.toml:3: k: m"},
		{"/" + strings.Repeat("p", 5000), "/" + strings.Repeat("p", maxPathShown-1) + "…:3: k: m"},
	} {
		if got := (Problem{File: tc.file, Line: 3, Key: "k", Msg: "m"}).String(); got != tc.want {
			t.Errorf("Problem in %q prints %q, want %q", tc.file, got, tc.want)
		}
	}

	dir := filepath.Join(t.TempDir(), "x\ny")
	main := filepath.Join(dir, "config.toml")
	pw := filepath.Join(dir, "pw")
	writeFile(t, main, fmt.Sprintf("[etcd]\nusername = \"u\"\npassword_file = %q\n", pw), 0o644)
	writeFile(t, pw, "secret", 0o644)
	_, err := Load(SourceFor(main), testOpts())
	if err == nil {
		t.Fatal("a world-readable password file was accepted")
	}
	text := err.Error()
	if strings.Count(text, "\n") != 0 {
		t.Errorf("one problem printed on several lines:\n%s", text)
	}
	for _, w := range []string{fmt.Sprintf("%q:3: etcd.password_file: %q: mode 0644 is too open", main, pw)} {
		if !strings.Contains(text, w) {
			t.Errorf("error lacks %q:\n%s", w, text)
		}
	}
}

// TestHugeKeyIsClipped: a megabyte-long key name is not echoed in full.
func TestHugeKeyIsClipped(t *testing.T) {
	long := strings.Repeat("k", 1<<19)
	for _, content := range []string{
		long + " = 1\n",
		"[lock]\n" + long + " = 1\n",
		"[" + long + "]\n",
	} {
		_, err, _ := loadString(t, content)
		ps := problems(t, err)
		if len(ps) != 1 || !strings.Contains(ps[0].Msg, "unknown key") {
			t.Fatalf("problems = %v", err)
		}
		if n := len(ps[0].Key); n > 2*maxValueLen+len("…") {
			t.Errorf("key of %d bytes in the problem", n)
		}
		if n := len(err.Error()); n > 1024 {
			t.Errorf("error of %d bytes", n)
		}
	}
}

// TestNotRegularFiles: devices, FIFOs, sockets and directories are refused,
// as the configuration file or as a file it names, without blocking.
func TestNotRegularFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "sock")
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: sock}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path, kind string
	}{
		{fifo, "a FIFO"},
		{sock, "a socket"},
		{dir, "a directory"},
		{"/dev/zero", "a character device"},
	} {
		if _, err := readFile(tc.path); err == nil || err.Error() != "not a regular file ("+tc.kind+")" {
			t.Errorf("readFile(%s) = %v, want not a regular file (%s)", tc.path, err, tc.kind)
		}
		main := filepath.Join(t.TempDir(), "config.toml")
		writeFile(t, main, fmt.Sprintf("[etcd.tls]\nca_file = %q\n", tc.path), 0o644)
		_, err := Load(SourceFor(main), testOpts())
		expectProblems(t, filepath.Dir(main), err, []want{{"config.toml", 2, "etcd.tls.ca_file", "not a regular file (" + tc.kind + ")"}})
	}
	if m := notRegular(os.ModeIrregular).Error(); !strings.HasPrefix(m, "not a regular file (mode ") {
		t.Errorf("notRegular(irregular) = %q", m)
	}
}

// TestReadFileRegular: the non-blocking open does not change how a regular
// file reads.
func TestReadFileRegular(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.toml")
	want := strings.Repeat("x", 100000)
	writeFile(t, p, want, 0o644)
	got, err := readFile(p)
	if err != nil || string(got) != want {
		t.Fatalf("readFile = %d bytes, %v", len(got), err)
	}
}
