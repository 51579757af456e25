package hostile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const goodScript = "#!/bin/sh\necho \"gate ok in phase $CLUSTERREBOOTD_PHASE\"\n"

// scriptCase places a health script (or something in its place) and says
// how check must end.
type scriptCase struct {
	name string
	// setup creates what the configuration names below dir and returns the
	// path of health.script.
	setup func(t *testing.T, dir string) string
	code  int      // exit code of check --once
	want  []string // substrings; {script} is the configured path
	root  bool     // needs root (chown)
}

func script(t *testing.T, p, body string, mode os.FileMode) string {
	t.Helper()
	writeFile(t, p, body, mode)
	return p
}

func testHealthScript(t *testing.T, endpoints []string) {
	refused := "health script failed, counting as unhealthy: gate: script refused: "
	cases := []scriptCase{
		{name: "plain script runs", code: exitOK,
			setup: func(t *testing.T, dir string) string { return script(t, filepath.Join(dir, "gate"), goodScript, 0o755) }},
		{name: "path with space and newline runs", code: exitOK,
			setup: func(t *testing.T, dir string) string {
				return script(t, filepath.Join(dir, odd, "cluster gate"), goodScript, 0o755)
			}},
		{name: "symlink to a good script runs", code: exitOK,
			setup: func(t *testing.T, dir string) string {
				target := script(t, filepath.Join(dir, "real", "gate"), goodScript, 0o755)
				symlink(t, target, filepath.Join(dir, "gate"))
				return filepath.Join(dir, "gate")
			}},
		{name: "relative symlink through .. runs", code: exitOK,
			setup: func(t *testing.T, dir string) string {
				script(t, filepath.Join(dir, "real", "gate"), goodScript, 0o755)
				mkdir(t, filepath.Join(dir, "links"))
				symlink(t, "../real/gate", filepath.Join(dir, "links", "gate"))
				return filepath.Join(dir, "links", "gate")
			}},
		{name: "symlink to a world-writable script", code: exitHealth, want: []string{refused + "{script}: ", "real/gate is writable by group or others (mode -rwxrwxrwx)"},
			setup: func(t *testing.T, dir string) string {
				target := script(t, filepath.Join(dir, "real", "gate"), goodScript, 0o777)
				symlink(t, target, filepath.Join(dir, "gate"))
				return filepath.Join(dir, "gate")
			}},
		{name: "symlink in a world-writable directory", code: exitHealth, want: []string{refused + "{script}: ", "open/gate", "writable by group or others (mode -rwxrwxrwx)"},
			setup: func(t *testing.T, dir string) string {
				target := script(t, filepath.Join(dir, "real", "gate"), goodScript, 0o755)
				open := filepath.Join(dir, "open")
				mkdir(t, open)
				chmod(t, open, 0o777)
				symlink(t, target, filepath.Join(open, "gate"))
				return filepath.Join(open, "gate")
			}},
		{name: "script in a world-writable directory", code: exitHealth, want: []string{refused + "{script}: directory ", "open is writable by group or others (mode -rwxrwxrwx)"},
			setup: func(t *testing.T, dir string) string {
				open := filepath.Join(dir, "open")
				mkdir(t, open)
				chmod(t, open, 0o777)
				return script(t, filepath.Join(open, "gate"), goodScript, 0o755)
			}},
		{name: "script in a group-writable directory", code: exitHealth, want: []string{refused + "{script}: directory ", "is writable by group or others (mode -rwxrwxr-x)"},
			setup: func(t *testing.T, dir string) string {
				open := filepath.Join(dir, "grp")
				mkdir(t, open)
				chmod(t, open, 0o775)
				return script(t, filepath.Join(open, "gate"), goodScript, 0o755)
			}},
		{name: "script in a sticky world-writable directory runs", code: exitOK,
			setup: func(t *testing.T, dir string) string {
				sticky := filepath.Join(dir, "sticky")
				mkdir(t, sticky)
				chmod(t, sticky, 0o777|os.ModeSticky)
				return script(t, filepath.Join(sticky, "gate"), goodScript, 0o755)
			}},
		{name: "group-writable script", code: exitHealth, want: []string{refused + "{script}: {script} is writable by group or others (mode -rwxrwxr-x)"},
			setup: func(t *testing.T, dir string) string { return script(t, filepath.Join(dir, "gate"), goodScript, 0o775) }},
		{name: "world-writable script", code: exitHealth, want: []string{refused + "{script}: {script} is writable by group or others (mode -rwxr-xrwx)"},
			setup: func(t *testing.T, dir string) string { return script(t, filepath.Join(dir, "gate"), goodScript, 0o757) }},
		{name: "script not executable", code: exitHealth, want: []string{refused + "{script}: {script} is not executable (mode -rw-r--r--)"},
			setup: func(t *testing.T, dir string) string { return script(t, filepath.Join(dir, "gate"), goodScript, 0o644) }},
		{name: "script missing", code: exitHealth, want: []string{"gate: script missing: {script}: {script} does not exist"},
			setup: func(t *testing.T, dir string) string { return filepath.Join(dir, "gate") }},
		{name: "dangling symlink", code: exitHealth, want: []string{"gate: script missing: {script}: ", "gone does not exist"},
			setup: func(t *testing.T, dir string) string {
				symlink(t, filepath.Join(dir, "gone"), filepath.Join(dir, "gate"))
				return filepath.Join(dir, "gate")
			}},
		{name: "symlink loop", code: exitHealth, want: []string{refused + "{script}: too many levels of symbolic links"},
			setup: func(t *testing.T, dir string) string {
				symlink(t, "b", filepath.Join(dir, "a"))
				symlink(t, "a", filepath.Join(dir, "b"))
				return filepath.Join(dir, "a")
			}},
		{name: "script is a directory", code: exitHealth, want: []string{refused + "{script}: {script} is not a regular file"},
			setup: func(t *testing.T, dir string) string {
				p := filepath.Join(dir, "gate")
				mkdir(t, p)
				return p
			}},
		{name: "script is a FIFO", code: exitHealth, want: []string{refused + "{script}: {script} is not a regular file"},
			setup: func(t *testing.T, dir string) string {
				p := filepath.Join(dir, "gate")
				mkfifo(t, p)
				chmod(t, p, 0o755)
				return p
			}},
		{name: "script is /dev/null", code: exitHealth, want: []string{refused + "/dev/null: /dev/null is not a regular file"},
			setup: func(*testing.T, string) string { return "/dev/null" }},
		{name: "script below a file", code: exitHealth, want: []string{refused + "{script}: ", "gate is not a directory"},
			setup: func(t *testing.T, dir string) string {
				return filepath.Join(script(t, filepath.Join(dir, "gate"), goodScript, 0o755), "x")
			}},
		{name: "script owned by another user", code: exitHealth, root: true,
			want: []string{refused + "{script}: {script} is owned by uid 65534, not by root"},
			setup: func(t *testing.T, dir string) string {
				p := script(t, filepath.Join(dir, "gate"), goodScript, 0o755)
				chown(t, p, nobody)
				return p
			}},
		{name: "directory owned by another user", code: exitHealth, root: true,
			want: []string{refused + "{script}: ", "theirs is owned by uid 65534, not by root"},
			setup: func(t *testing.T, dir string) string {
				p := script(t, filepath.Join(dir, "theirs", "gate"), goodScript, 0o755)
				chown(t, filepath.Dir(p), nobody)
				return p
			}},
		{name: "symlink owned by another user in a sticky directory", code: exitHealth, root: true,
			want: []string{refused + "{script}: {script} is owned by uid 65534, not by root"},
			setup: func(t *testing.T, dir string) string {
				target := script(t, filepath.Join(dir, "real", "gate"), goodScript, 0o755)
				sticky := filepath.Join(dir, "sticky")
				mkdir(t, sticky)
				chmod(t, sticky, 0o777|os.ModeSticky)
				p := filepath.Join(sticky, "gate")
				symlink(t, target, p)
				chown(t, p, nobody)
				return p
			}},
		{name: "symlink to a script owned by another user", code: exitHealth, root: true,
			want: []string{refused + "{script}: ", "real/gate is owned by uid 65534, not by root"},
			setup: func(t *testing.T, dir string) string {
				target := script(t, filepath.Join(dir, "real", "gate"), goodScript, 0o755)
				chown(t, target, nobody)
				symlink(t, target, filepath.Join(dir, "gate"))
				return filepath.Join(dir, "gate")
			}},
		{name: "script floods its output", code: exitOK,
			setup: func(t *testing.T, dir string) string {
				return script(t, filepath.Join(dir, "gate"), "#!/bin/sh\nhead -c 20000000 /dev/zero | tr '\\0' x\necho\n", 0o755)
			}},
		{name: "script hangs", code: exitHealth, want: []string{"gate: script timed out: {script} after 5s"},
			setup: func(t *testing.T, dir string) string {
				return script(t, filepath.Join(dir, "gate"), "#!/bin/sh\nsleep 600 &\nexec sleep 600\n", 0o755)
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.root && !isRoot() {
				t.Skip("needs root (chown)")
			}
			dir := t.TempDir()
			path := tc.setup(t, dir)
			n := newNode(t, endpoints, nodeOpts{dir: filepath.Join(dir, "node"), script: path, needsReboot: true})
			r := n.run("check", "--once")
			want := make([]string, len(tc.want))
			for i, w := range tc.want {
				want[i] = strings.ReplaceAll(w, "{script}", path)
			}
			expect(t, r, tc.code, want)
			wantReboots := 0
			if tc.code == exitOK {
				wantReboots = 1
			}
			if k := n.reboots(); k != wantReboots {
				t.Errorf("%d reboot(s), want %d\n%s", k, wantReboots, r)
			}
			if n.hasSlot() != (wantReboots == 1) {
				t.Errorf("slot held: %v, want %v", n.hasSlot(), wantReboots == 1)
			}
			if len(r.out()) > 256<<10 {
				t.Errorf("output of %d bytes: the script's output is not bounded", len(r.out()))
			}
		})
	}
}

func chmod(t *testing.T, p string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}
