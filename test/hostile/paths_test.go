package hostile

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// testOddPaths: a node whose every path (configuration, drop-in, state and
// run directories, kill switch, boot id, health script, reboot command)
// has a space and a newline in it works like any other.
func testOddPaths(t *testing.T, endpoints []string) {
	t.Run("everything under an odd directory", func(t *testing.T) {
		t.Parallel()
		dir := filepath.Join(t.TempDir(), odd)
		gate := script(t, filepath.Join(dir, "health d\n", "gate"), goodScript, 0o755)
		n := newNode(t, endpoints, nodeOpts{dir: dir, script: gate, needsReboot: true})
		writeFile(t, filepath.Join(dir, "config.d", "50 odd\nname.toml"), "[lock]\nbackoff_max = \"400ms\"\n", 0o644)
		r := n.run("validate-config", "--print")
		expect(t, r, exitOK, []string{`backoff_max = "400ms"`, fmt.Sprintf("%q", n.path("state"))})
		expect(t, n.run("check", "--once"), exitOK, []string{"reboot slot taken"})
		if n.reboots() != 1 || !n.hasSlot() {
			t.Fatalf("reboots %d, slot %v", n.reboots(), n.hasSlot())
		}
		expect(t, n.run("status"), exitOK, []string{"n1", "1/1 slot(s) in use"})
		// The reboot: a new boot id, an empty run directory, the update
		// installed. The post-boot check releases the slot and records the
		// reboot in the odd state directory.
		writeFile(t, n.path("boot_id"), "fedcba9876543210fedcba9876543210\n", 0o644)
		must(t, os.Remove(n.path("reboot-required")))
		entries, err := os.ReadDir(n.path("run"))
		must(t, err)
		for _, e := range entries {
			must(t, os.RemoveAll(filepath.Join(n.path("run"), e.Name())))
		}
		expect(t, n.run("check", "--once"), exitOK, nil)
		if n.hasSlot() {
			t.Errorf("the post-boot check kept the slot")
		}
		if _, err := os.Stat(filepath.Join(n.path("state"), "state.json")); err != nil {
			t.Errorf("no state file in the odd state directory: %v", err)
		}
	})
	t.Run("kill switch at an odd path", func(t *testing.T) {
		t.Parallel()
		dir := filepath.Join(t.TempDir(), odd)
		n := newNode(t, endpoints, nodeOpts{dir: dir, needsReboot: true})
		writeFile(t, n.path("disable"), "", 0o644)
		expect(t, n.run("check", "--once"), exitBlocked, []string{"kill switch ", n.path("disable") + " present"})
		if n.reboots() != 0 {
			t.Errorf("rebooted with the kill switch on")
		}
	})
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, n *node)
		code  int
		want  string
	}{
		{"state_dir is a file", func(t *testing.T, n *node) {
			must(t, os.RemoveAll(n.path("state")))
			writeFile(t, n.path("state"), "", 0o644)
		}, exitBlocked, "cannot read the state file"},
		{"state file is garbage", func(t *testing.T, n *node) {
			writeFile(t, filepath.Join(n.path("state"), "state.json"), "\x00garbage{", 0o644)
		}, exitBlocked, "cannot read the state file"},
		{"state file is a FIFO", func(t *testing.T, n *node) {
			mkfifo(t, filepath.Join(n.path("state"), "state.json"))
		}, exitBlocked, "cannot read the state file"},
		{"state file links to /dev/zero", func(t *testing.T, n *node) {
			symlink(t, "/dev/zero", filepath.Join(n.path("state"), "state.json"))
		}, exitBlocked, "cannot read the state file"},
		{"run_dir is a file", func(t *testing.T, n *node) {
			must(t, os.RemoveAll(n.path("run")))
			writeFile(t, n.path("run"), "", 0o644)
		}, exitInternal, "check lock"},
		{"boot_id is empty", func(t *testing.T, n *node) {
			writeFile(t, n.path("boot_id"), "", 0o644)
		}, exitInternal, "boot-id"},
		{"boot_id is a FIFO", func(t *testing.T, n *node) {
			must(t, os.Remove(n.path("boot_id")))
			mkfifo(t, n.path("boot_id"))
		}, exitInternal, "boot-id"},
		{"boot_id is /dev/zero", func(t *testing.T, n *node) {
			must(t, os.Remove(n.path("boot_id")))
			symlink(t, "/dev/zero", n.path("boot_id"))
		}, exitInternal, "boot-id"},
		{"kill switch is a dangling symlink", func(t *testing.T, n *node) {
			symlink(t, n.path("gone"), n.path("disable"))
		}, exitBlocked, "kill switch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			n := newNode(t, endpoints, nodeOpts{needsReboot: true})
			tc.setup(t, n)
			r := n.run("check", "--once")
			expect(t, r, tc.code, []string{tc.want})
			if n.reboots() != 0 || n.hasSlot() {
				t.Errorf("rebooted (%d) or took a slot (%v)", n.reboots(), n.hasSlot())
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
