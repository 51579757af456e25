package hostile

import (
	"strings"
	"testing"
)

// hostileNodeNames are node names that no node can have. As etcd keys
// (P/slots/<node>, P/members/<node>) they would name keys outside the
// node's record, or nonsense; they must be refused as bad input.
var hostileNodeNames = []struct{ name, node string }{
	{"leading dash", "-n1"},
	{"empty", ""},
	{"dot dot", ".."},
	{"dot", "."},
	{"parent path", "../../x"},
	{"slash", "n1/x"},
	{"absolute", "/clusterrebootd/x"},
	{"trailing slash", "n1/"},
	{"newline", "n1\nn2"},
	{"carriage return", "n1\r"},
	{"space", "n 1"},
	{"NUL-free control", "n1\x1b[2J"},
	{"non-ASCII", "nöde"},
	{"64 bytes", strings.Repeat("a", 64)},
	{"100 KB", strings.Repeat("a", 100<<10)},
	{"prefix escape", "n1\xff"},
}

// testNodeArgs: release --node and forget refuse every hostile node name
// with exit 2, before anything reaches etcd: not one key of the cluster
// changes, and the node's own records stay.
func testNodeArgs(t *testing.T, endpoints []string) {
	n := newNode(t, endpoints, nodeOpts{})
	expect(t, n.run("check", "--once"), exitOK, nil) // registers n1, publishes alive
	// A slot for the operator commands to (not) free.
	n.put(n.prefix+"/slots/n2", `{"node":"n2","boot_id":"b","reason":"r","fence_revision":1,"acquired_at":"2026-01-01T00:00:00Z","deadline":"2099-01-01T00:00:00Z"}`)
	before := n.keys()
	if len(before) < 3 {
		t.Fatalf("cluster keys before: %v", before)
	}
	for _, tc := range hostileNodeNames {
		for _, args := range [][]string{
			{"release", "--node=" + tc.node},
			{"forget", "--", tc.node},
			{"--dry-run", "forget", "--", tc.node},
		} {
			if tc.node == "" && args[0] == "release" {
				continue // --node "" is "this node": see the report
			}
			t.Run(args[0]+" "+tc.name, func(t *testing.T) {
				r := n.run(args...)
				expect(t, r, exitConfig, []string{"is not a valid node name"}, "released", "forgot")
				if len(r.out()) > 4096 {
					t.Errorf("output of %d bytes echoes the argument", len(r.out()))
				}
				if strings.Contains(r.out(), tc.node+"\n") && strings.ContainsAny(tc.node, "\n\r") {
					t.Errorf("the name was printed raw")
				}
			})
		}
	}
	n.sameKeys(before, "a refused operator command")
	// The valid names still work: the commands were not refused wholesale.
	expect(t, n.run("release", "--node", "n2"), exitOK, []string{"released the slot of n2"})
	expect(t, n.run("forget", "n3"), exitOK, []string{"forgot node n3"})
}

// testOperatorArgs: hostile arguments of the other operator commands and of
// the global flags are bad input (exit 2) and change nothing.
func testOperatorArgs(t *testing.T, endpoints []string) {
	n := newNode(t, endpoints, nodeOpts{})
	expect(t, n.run("check", "--once"), exitOK, nil)
	before := n.keys()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"set-max -1", []string{"set-max", "-1"}, "unknown flag -1"},
		{"set-max 0", []string{"set-max", "0"}, "N must be >= 1, got 0"},
		{"set-max -- -1", []string{"set-max", "--", "-1"}, "N must be >= 1, got -1"},
		{"set-max 1e9", []string{"set-max", "1e9"}, `expected a valid 64 bit int but got "1e9"`},
		{"set-max 1.5", []string{"set-max", "1.5"}, `expected a valid 64 bit int but got "1.5"`},
		{"set-max overflow", []string{"set-max", "99999999999999999999"}, "expected a valid 64 bit int"},
		{"set-max empty", []string{"set-max", ""}, "expected a valid 64 bit int"},
		{"set-max missing", []string{"set-max"}, "expected \"<n>\""},
		{"set-max two", []string{"set-max", "1", "2"}, "unexpected argument 2"},
		{"set-max hex", []string{"set-max", "0x10"}, ""},
		{"pause without reason", []string{"pause"}, "missing flags: --reason"},
		{"pause empty reason", []string{"pause", "--reason", ""}, "a reason is required"},
		{"pause reason with newline", []string{"pause", "--reason", "x\nn2    yes    yes      no      idle"}, "must be one line of printable text"},
		{"pause reason with escape", []string{"pause", "--reason", "x\x1b[2J"}, "must be one line of printable text"},
		{"pause reason 100 KB", []string{"pause", "--reason", strings.Repeat("r", 100<<10)}, "the reason is too long (102400 bytes; at most 1024)"},
		{"status history garbage", []string{"status", "--history", "garbage"}, `--history: expected duration but got "garbage"`},
		{"status history overflow", []string{"status", "--history", "9999999999999h"}, "--history: expected duration"},
		{"history since garbage", []string{"history", "--since", "garbage"}, "history --since: "},
		{"history since negative", []string{"history", "--since=-5h"}, "must not be negative"},
		{"unknown command", []string{"reboot-now"}, "unexpected argument reboot-now"},
		{"unknown flag", []string{"--bogus", "status"}, "unknown flag --bogus"},
		{"log format", []string{"--log-format", "xml", "status"}, "--log-format must be one of"},
		{"log level", []string{"--log-level", "trace", "status"}, "--log-level must be one of"},
		{"check without once", []string{"check", "--no-once"}, "check runs once per invocation"},
		{"no command", nil, "expected one of"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := n.run(tc.args...)
			if tc.name == "set-max hex" {
				// Either refused or read as 16; never a crash or a hang.
				if r.code != exitConfig && r.code != exitOK {
					t.Errorf("exit %d\n%s", r.code, r)
				}
				if r.code == exitOK {
					ctx, cancel := n.ctx()
					defer cancel()
					if _, err := n.cli.Delete(ctx, n.prefix+"/settings"); err != nil {
						t.Fatal(err)
					}
				}
				return
			}
			expect(t, r, exitConfig, []string{tc.want})
			if len(r.out()) > 8192 {
				t.Errorf("output of %d bytes echoes the argument", len(r.out()))
			}
		})
	}
	t.Run("log format 100 KB", func(t *testing.T) {
		r := n.run("--log-format", strings.Repeat("x", 100<<10), "status")
		expect(t, r, exitConfig, []string{"--log-format must be one of"})
		if len(r.out()) >= 8192 {
			t.Errorf("a refused --log-format is echoed in full (%d bytes of output)", len(r.out()))
		}
	})
	t.Run("history since 100 KB", func(t *testing.T) {
		r := n.run("history", "--since", strings.Repeat("9", 100<<10))
		expect(t, r, exitConfig, []string{"history --since: "})
		assertf(t, len(r.out()) < 8192, "a refused history --since is echoed in full (%d bytes of output)", len(r.out()))
	})
	t.Run("history since far past", func(t *testing.T) {
		for _, since := range []string{"99999999999d", "2562047h", "0001-01-01", "9999-12-31T23:59:59Z"} {
			r := n.run("history", "--since", since)
			if r.code != exitOK && r.code != exitConfig {
				t.Errorf("history --since %s: exit %d\n%s", since, r.code, r)
			}
		}
	})
	t.Run("history node", func(t *testing.T) {
		for _, tc := range hostileNodeNames {
			r := n.run("history", "--node="+tc.node)
			if tc.node == "" {
				continue
			}
			assertf(t, r.code == exitConfig, "history --node=%.40q exits %d, want %d (an impossible node name is not refused)", tc.node, r.code, exitConfig)
			if len(r.out()) > 8192 {
				t.Errorf("history --node: output of %d bytes echoes the argument", len(r.out()))
			}
		}
	})
	t.Run("status history negative", func(t *testing.T) {
		r := n.run("status", "--history=-5h")
		assertf(t, r.code == exitConfig, "status --history -5h exits %d, want %d (a negative look-back is accepted)", r.code, exitConfig)
	})
	settings := n.prefix + "/settings"
	after := n.keys()
	delete(after, settings)
	delete(before, settings)
	for k, rev := range before {
		if after[k] != rev {
			t.Errorf("a refused operator command changed %q", k)
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			t.Errorf("a refused operator command created %q", k)
		}
	}
	// Huge --config paths and paths that are not files.
	for _, tc := range []struct {
		name, path, want string
	}{
		{"config path 100 KB", "/" + strings.Repeat("c", 100<<10), "file name too long"},
		{"config path component too long", "/tmp/" + strings.Repeat("c", 300) + "/config.toml", "file name too long"},
		{"config is /", "/", "not a regular file (a directory)"},
		{"config is empty", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, "--config", tc.path, "validate-config")
			if tc.path == "" {
				// --config "" means the default location; on a test machine
				// it usually does not exist. Exit 0 or 2, never a crash.
				if r.code != exitOK && r.code != exitConfig {
					t.Errorf("exit %d\n%s", r.code, r)
				}
				return
			}
			expect(t, r, exitConfig, []string{tc.want})
			if len(r.out()) > 8192 {
				t.Errorf("output of %d bytes echoes the path", len(r.out()))
			}
		})
	}
}
