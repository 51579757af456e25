package hostile

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// configCase is one hostile configuration, checked with validate-config
// (no side effects, no etcd).
type configCase struct {
	name string
	// setup writes the files below dir and returns the --config path.
	setup func(t *testing.T, dir string) string
	code  int
	// want are substrings of the output; {cfg} is replaced by the config
	// path as the product prints it, {dir} by dir.
	want    []string
	notWant []string
	root    bool // needs root (chown)
}

// base is the smallest valid configuration: everything else is a default,
// and validate-config neither connects to etcd nor touches the host paths.
const base = "node_name = \"n1\"\n"

// cfg writes base+body as dir/config.toml and returns its path.
func cfg(body string) func(t *testing.T, dir string) string {
	return func(t *testing.T, dir string) string {
		p := filepath.Join(dir, "config.toml")
		writeFile(t, p, base+body, 0o644)
		return p
	}
}

// raw writes content (without base) as dir/config.toml.
func raw(content string) func(t *testing.T, dir string) string {
	return func(t *testing.T, dir string) string {
		p := filepath.Join(dir, "config.toml")
		writeFile(t, p, content, 0o644)
		return p
	}
}

// odd is a directory name with a space and a newline in it.
const odd = "with space\nand newline"

// shownPath is how an error message renders a path: quoted when it holds
// control characters (so it cannot forge further lines), as is otherwise.
func shownPath(p string) string {
	for _, r := range p {
		if r < 0x20 || r == 0x7f {
			return strconv.Quote(p)
		}
	}
	return p
}

func TestConfigHostile(t *testing.T) {
	t.Parallel()
	cases := []configCase{
		// Paths with spaces and newlines.
		{name: "config path with space and newline", code: exitOK, want: []string{"configuration ok"},
			setup: func(t *testing.T, dir string) string {
				p := filepath.Join(dir, odd, "config.toml")
				writeFile(t, p, base, 0o644)
				return p
			}},
		{name: "config path with space and newline, bad key", code: exitConfig,
			want: []string{"{cfg}:2: lock: must be a table, not an integer"},
			setup: func(t *testing.T, dir string) string {
				p := filepath.Join(dir, odd, "config.toml")
				writeFile(t, p, base+"lock = 1\n", 0o644)
				return p
			}},
		{name: "drop-in name with space and newline", code: exitConfig,
			want: []string{`config.d/b a\nd.toml":3: lock.ttl: not a duration`},
			setup: func(t *testing.T, dir string) string {
				p := cfg("")(t, dir)
				writeFile(t, filepath.Join(dir, "config.d", "b a\nd.toml"), "[lock]\n\nttl = \"soon\"\n", 0o644)
				return p
			}},
		{name: "drop-in is a directory", code: exitConfig, want: []string{"config.d/x.toml: not a regular file"},
			setup: func(t *testing.T, dir string) string {
				p := cfg("")(t, dir)
				mkdir(t, filepath.Join(dir, "config.d", "x.toml"))
				return p
			}},
		{name: "drop-in is a FIFO", code: exitConfig, want: []string{"config.d/x.toml: not a regular file"},
			setup: func(t *testing.T, dir string) string {
				p := cfg("")(t, dir)
				mkdir(t, filepath.Join(dir, "config.d"))
				mkfifo(t, filepath.Join(dir, "config.d", "x.toml"))
				return p
			}},
		{name: "drop-in is a symlink loop", code: exitConfig, want: []string{"config.d/x.toml: cannot read: too many levels of symbolic links"},
			setup: func(t *testing.T, dir string) string {
				p := cfg("")(t, dir)
				mkdir(t, filepath.Join(dir, "config.d"))
				symlink(t, "x.toml", filepath.Join(dir, "config.d", "x.toml"))
				return p
			}},
		{name: "drop-in links to /dev/zero", code: exitConfig, want: []string{"config.d/z.toml: not a regular file"},
			setup: func(t *testing.T, dir string) string {
				p := cfg("")(t, dir)
				mkdir(t, filepath.Join(dir, "config.d"))
				symlink(t, "/dev/zero", filepath.Join(dir, "config.d", "z.toml"))
				return p
			}},
		{name: "dangling drop-in symlink", code: exitConfig, want: []string{"config.d/d.toml: cannot read: no such file or directory"},
			setup: func(t *testing.T, dir string) string {
				p := cfg("")(t, dir)
				mkdir(t, filepath.Join(dir, "config.d"))
				symlink(t, filepath.Join(dir, "gone"), filepath.Join(dir, "config.d", "d.toml"))
				return p
			}},
		{name: "drop-in linked to /dev/null masks", code: exitOK, want: []string{"configuration ok"},
			setup: func(t *testing.T, dir string) string {
				p := cfg("")(t, dir)
				mkdir(t, filepath.Join(dir, "config.d"))
				symlink(t, "/dev/null", filepath.Join(dir, "config.d", "n.toml"))
				return p
			}},

		// The main file is not a file.
		{name: "config is a directory", code: exitConfig, want: []string{"{cfg}: not a regular file"},
			setup: func(t *testing.T, dir string) string {
				p := filepath.Join(dir, "config.toml")
				mkdir(t, p)
				return p
			}},
		{name: "config is a FIFO", code: exitConfig, want: []string{"{cfg}: not a regular file"},
			setup: func(t *testing.T, dir string) string {
				p := filepath.Join(dir, "config.toml")
				mkfifo(t, p)
				return p
			}},
		{name: "config is a symlink loop", code: exitConfig, want: []string{"{cfg}: cannot read: too many levels of symbolic links"},
			setup: func(t *testing.T, dir string) string {
				p := filepath.Join(dir, "config.toml")
				symlink(t, "other.toml", p)
				symlink(t, "config.toml", filepath.Join(dir, "other.toml"))
				return p
			}},
		{name: "config is /dev/zero", code: exitConfig, want: []string{"/dev/zero: not a regular file"},
			setup: func(*testing.T, string) string { return "/dev/zero" }},
		{name: "config links to /dev/zero", code: exitConfig, want: []string{"{cfg}: not a regular file"},
			setup: func(t *testing.T, dir string) string {
				p := filepath.Join(dir, "config.toml")
				symlink(t, "/dev/zero", p)
				return p
			}},
		{name: "config is missing", code: exitConfig, want: []string{"{cfg}: cannot read: no such file or directory"},
			setup: func(t *testing.T, dir string) string { return filepath.Join(dir, "config.toml") }},

		// Huge input.
		{name: "10 MB config", code: exitConfig, want: []string{"{cfg}: file too large (10485760 bytes; at most 1048576)"},
			setup: raw(base + strings.Repeat("#", 10<<20-len(base)))},
		{name: "1 MB string value", code: exitConfig,
			want:    []string{"{cfg}:2: cluster: \"aaaa", "is not a valid name"},
			notWant: []string{strings.Repeat("a", 1000)},
			setup:   cfg("cluster = \"" + strings.Repeat("a", 1<<20-100) + "\"\n")},
		{name: "1 MB unknown key name", code: exitConfig,
			want:    []string{"{cfg}:2: ", "unknown key"},
			notWant: []string{strings.Repeat("k", 1000)},
			setup:   cfg(strings.Repeat("k", 1<<20-100) + " = 1\n")},
		{name: "100k list entries", code: exitConfig,
			want:  []string{"{cfg}:3: policy.fallback_nodes: too many elements (100000; at most 1024)"},
			setup: cfg("[policy]\nfallback_nodes = [" + strings.Repeat(`"a",`, 100000) + "]\n")},
		{name: "70k detectors", code: exitConfig, want: []string{"{cfg}:2: detector: too many detectors (70000; at most 64)"},
			setup: cfg(strings.Repeat("[[detector]]\n", 70000))},
		{name: "deeply nested arrays", code: exitConfig, want: []string{"{cfg}:2: arrays and tables nested too deeply"},
			setup: cfg("x = " + strings.Repeat("[", 200000) + strings.Repeat("]", 200000) + "\n")},
		{name: "deeply nested inline tables", code: exitConfig, want: []string{"{cfg}:2: arrays and tables nested too deeply"},
			setup: cfg("x = " + strings.Repeat("{a=", 10000) + "1" + strings.Repeat("}", 10000) + "\n")},
		{name: "deeply nested table header", code: exitConfig, want: []string{"{cfg}:2: key has too many dotted parts"},
			setup: cfg("[" + strings.Repeat("a.", 50000) + "a]\n")},
		{name: "deeply nested dotted key", code: exitConfig, want: []string{"{cfg}:2: key has too many dotted parts"},
			setup: cfg(strings.Repeat("a.", 50000) + "a = 1\n")},

		// Integers, floats and durations out of range.
		{name: "max_concurrent overflows int64", code: exitConfig,
			want:  []string{"{cfg}:3: lock.max_concurrent: ", "out of range"},
			setup: cfg("[lock]\nmax_concurrent = 99999999999999999999\n")},
		{name: "max_concurrent int64 max", code: exitConfig,
			want:  []string{"{cfg}:3: lock.max_concurrent: 9223372036854775807 is too large"},
			setup: cfg("[lock]\nmax_concurrent = 9223372036854775807\n")},
		{name: "max_concurrent negative", code: exitConfig, want: []string{"{cfg}:3: lock.max_concurrent: must be at least 1, not -1"},
			setup: cfg("[lock]\nmax_concurrent = -1\n")},
		{name: "max_concurrent zero", code: exitConfig, want: []string{"{cfg}:3: lock.max_concurrent: must be at least 1, not 0"},
			setup: cfg("[lock]\nmax_concurrent = 0\n")},
		{name: "expected_nodes overflows in a drop-in", code: exitConfig,
			want: []string{"config.d/10-x.toml:2: policy.expected_nodes: ", "out of range"},
			setup: func(t *testing.T, dir string) string {
				p := cfg("")(t, dir)
				writeFile(t, filepath.Join(dir, "config.d", "10-x.toml"), "[policy]\nexpected_nodes = -99999999999999999999\n", 0o644)
				return p
			}},
		{name: "negative duration", code: exitConfig, want: []string{`{cfg}:3: lock.ttl: must not be negative: "-90s"`},
			setup: cfg("[lock]\nttl = \"-90s\"\n")},
		{name: "negative duration in a detector", code: exitConfig,
			want:  []string{`{cfg}:5: detector[0].timeout: must not be negative: "-1s"`},
			setup: cfg("[[detector]]\ntype = \"file\"\npath = \"/run/reboot-required\"\ntimeout = \"-1s\"\n")},
		{name: "duration overflows", code: exitConfig, want: []string{"{cfg}:3: lock.max_hold_wait: not a duration"},
			setup: cfg("[lock]\nmax_hold_wait = \"99999999999h\"\n")},
		{name: "duration too long", code: exitConfig, want: []string{"{cfg}:3: lock.max_hold_wait: ", "is too long"},
			setup: cfg("[lock]\nmax_hold_wait = \"2000000h\"\n")},
		{name: "zero lock.ttl", code: exitConfig, want: []string{"{cfg}:3: lock.ttl: must be at least 1s, not 0s"},
			setup: cfg("[lock]\nttl = \"0s\"\n")},
		{name: "zero backoff", code: exitConfig, want: []string{"{cfg}:3: lock.backoff_min: must be greater than 0"},
			setup: cfg("[lock]\nbackoff_min = \"0s\"\n")},
		{name: "zero health timeout", code: exitConfig, want: []string{"{cfg}:3: health.timeout: must be greater than 0"},
			setup: cfg("[health]\ntimeout = \"0s\"\n")},
		{name: "zero alive_ttl", code: exitConfig, want: []string{"{cfg}:2: alive_ttl: must be at least 1m (it should cover about 3 timer intervals), not 0s"},
			setup: cfg("alive_ttl = \"0s\"\n")},
		{name: "zero dial timeout", code: exitConfig, want: []string{"{cfg}:3: etcd.dial_timeout: must be greater than 0"},
			setup: cfg("[etcd]\ndial_timeout = \"0\"\n")},
		{name: "lock.ttl not above health.timeout", code: exitConfig,
			want:  []string{"{cfg}:5: lock.ttl: lock.ttl (30s) must exceed health.timeout (30s)"},
			setup: cfg("[health]\ntimeout = \"30s\"\n[lock]\nttl = \"30s\"\n")},
		{name: "fraction nan", code: exitConfig, want: []string{"{cfg}:3: policy.min_healthy_fraction: must be between 0 and 1, not NaN"},
			setup: cfg("[policy]\nmin_healthy_fraction = nan\n")},
		{name: "fraction inf", code: exitConfig, want: []string{"{cfg}:3: policy.min_healthy_fraction: must be between 0 and 1, not +Inf"},
			setup: cfg("[policy]\nmin_healthy_fraction = inf\n")},
		{name: "fraction -inf", code: exitConfig, want: []string{"{cfg}:3: policy.min_healthy_fraction: must be between 0 and 1, not -Inf"},
			setup: cfg("[policy]\nmin_healthy_fraction = -inf\n")},
		{name: "fraction 1.5", code: exitConfig, want: []string{"{cfg}:3: policy.min_healthy_fraction: must be between 0 and 1, not 1.5"},
			setup: cfg("[policy]\nmin_healthy_fraction = 1.5\n")},
		{name: "fraction -0.5", code: exitConfig, want: []string{"{cfg}:3: policy.min_healthy_fraction: must be between 0 and 1, not -0.5"},
			setup: cfg("[policy]\nmin_healthy_fraction = -0.5\n")},
		{name: "fraction -0 is zero", code: exitOK, want: []string{"configuration ok"},
			setup: cfg("[policy]\nmin_healthy_fraction = -0.0\n")},
		{name: "fraction 1e-400 underflows to zero", code: exitOK, want: []string{"configuration ok"},
			setup: cfg("[policy]\nmin_healthy_fraction = 1e-400\n")},
		{name: "fraction 1e400 overflows", code: exitConfig, want: []string{"{cfg}:3: "},
			setup: cfg("[policy]\nmin_healthy_fraction = 1e400\n")},

		// Duplicates, unknown keys, wrong types.
		{name: "duplicate key", code: exitConfig, want: []string{"{cfg}:3: node_name: syntax error: Key 'node_name' has already been defined"},
			setup: cfg("cluster = \"c\"\nnode_name = \"n2\"\n")},
		{name: "duplicate key in a table", code: exitConfig, want: []string{"{cfg}:4: lock.ttl: syntax error: ", "has already been defined"},
			setup: cfg("[lock]\nttl = \"90s\"\nttl = \"91s\"\n")},
		{name: "duplicate table", code: exitConfig, want: []string{"{cfg}:5: lock: syntax error: Key 'lock' has already been defined"},
			setup: cfg("[lock]\nttl = \"90s\"\n\n[lock]\nmax_concurrent = 2\n")},
		{name: "table redefines a key", code: exitConfig, want: []string{"{cfg}:3: lock: syntax error: ", "has already been defined"},
			setup: cfg("lock = 1\n[lock]\n")},
		{name: "unknown key", code: exitConfig, want: []string{`{cfg}:2: nodename: unknown key (did you mean "node_name"?)`},
			setup: cfg("nodename = \"x\"\n")},
		{name: "unknown key in a table", code: exitConfig, want: []string{`{cfg}:4: lock.tll: unknown key (did you mean "ttl"?)`},
			setup: cfg("[lock]\n\ntll = \"9s\"\n")},
		{name: "unknown table", code: exitConfig, want: []string{"{cfg}:2: locks: unknown key"},
			setup: cfg("[locks]\nttl = \"9s\"\n")},
		{name: "inline secret never echoed", code: exitConfig,
			want:    []string{"{cfg}:3: etcd.password: unknown key: inline secrets are not allowed; use password_file"},
			notWant: []string{"hunter2"},
			setup:   cfg("[etcd]\npassword = \"hunter2\"\n")},
		{name: "duration as integer", code: exitConfig, want: []string{`{cfg}:3: lock.ttl: must be a duration string such as "90s", not an integer`},
			setup: cfg("[lock]\nttl = 90\n")},
		{name: "integer as string", code: exitConfig, want: []string{"{cfg}:3: lock.max_concurrent: must be an integer, not a string"},
			setup: cfg("[lock]\nmax_concurrent = \"1\"\n")},
		{name: "integer as float", code: exitConfig, want: []string{"{cfg}:3: lock.max_concurrent: must be an integer, not a float"},
			setup: cfg("[lock]\nmax_concurrent = 1.5\n")},
		{name: "list as string", code: exitConfig, want: []string{"{cfg}:3: etcd.endpoints: must be an array of strings, not a string"},
			setup: cfg("[etcd]\nendpoints = \"http://127.0.0.1:2379\"\n")},
		{name: "list of wrong elements", code: exitConfig, want: []string{"{cfg}:3: etcd.endpoints[1]: must be a string, not an integer"},
			setup: cfg("[etcd]\nendpoints = [\"http://127.0.0.1:2379\", 1]\n")},
		{name: "bool as string", code: exitConfig, want: []string{"{cfg}:2: dry_run: must be a boolean (true or false), not a string"},
			setup: cfg("dry_run = \"yes\"\n")},
		{name: "table as integer", code: exitConfig, want: []string{"{cfg}:2: health: must be a table, not an integer"},
			setup: cfg("health = 5\n")},
		{name: "datetime", code: exitConfig, want: []string{"{cfg}:2: cluster: must be a string, not a datetime"},
			setup: cfg("cluster = 1979-05-27T07:32:00Z\n")},
		{name: "detectors as a table", code: exitConfig, want: []string{"{cfg}:2: detector: must be an array of tables"},
			setup: cfg("[detector]\ntype = \"file\"\n")},

		// Encoding.
		{name: "invalid UTF-8 in a string", code: exitConfig, want: []string{"{cfg}:3: cluster: syntax error: invalid UTF-8"},
			setup: cfg("\ncluster = \"a\xff\xfeb\"\n")},
		{name: "invalid UTF-8 in a comment", code: exitConfig, want: []string{"{cfg}:2: syntax error: invalid UTF-8"},
			setup: cfg("# \xc3\x28\n")},
		{name: "raw NUL byte", code: exitConfig, want: []string{"{cfg}:2: cluster: syntax error: ", "control characters"},
			setup: cfg("cluster = \"a\x00b\"\n")},
		{name: "escaped NUL in a string", code: exitConfig, want: []string{"{cfg}:2: cluster: must not contain NUL characters"},
			setup: cfg("cluster = \"a\\u0000b\"\n")},
		{name: "escaped NUL in a path", code: exitConfig, want: []string{"{cfg}:3: paths.state_dir: must not contain NUL characters"},
			setup: cfg("[paths]\nstate_dir = \"/var/lib/x\\u0000y\"\n")},
		{name: "UTF-8 BOM is fine", code: exitOK, want: []string{"configuration ok"}, setup: raw("\xef\xbb\xbf" + base)},
		{name: "UTF-8 BOM keeps line numbers", code: exitConfig, want: []string{"{cfg}:3: lock.bogus: unknown key"},
			setup: raw("\xef\xbb\xbf" + base + "[lock]\nbogus = 1\n")},
		{name: "BOM in the middle", code: exitConfig, want: []string{"{cfg}:2: ", "syntax error"},
			setup: cfg("\xef\xbb\xbfcluster = \"c\"\n")},
		{name: "UTF-16 file", code: exitConfig, want: []string{"{cfg}"},
			setup: raw("\xff\xfen\x00o\x00d\x00e\x00")},
		{name: "CRLF line endings are fine", code: exitOK, want: []string{"configuration ok"},
			setup: raw("node_name = \"n1\"\r\n[lock]\r\nttl = \"90s\"\r\n")},
		{name: "CRLF keeps line numbers", code: exitConfig, want: []string{"{cfg}:4: lock.bogus: unknown key"},
			setup: raw("node_name = \"n1\"\r\n[lock]\r\nttl = \"90s\"\r\nbogus = 1\r\n")},
		{name: "bare CR", code: exitConfig, want: []string{"{cfg}:1: node_name: syntax error: ", "control characters"},
			setup: raw("node_name = \"n1\"\r[lock]\r\n")},
		{name: "control character in a value", code: exitConfig, want: []string{"{cfg}:2: cluster: syntax error: ", "control characters"},
			setup: cfg("cluster = \"a\x1bb\"\n")},
		{name: "newline escape in a node name", code: exitConfig, want: []string{`{cfg}:1: node_name: "n1\nx" is not a valid name`},
			setup: raw("node_name = \"n1\\nx\"\n")},

		// Files named by the configuration.
		{name: "key file not 0600", code: exitConfig, want: []string{"{cfg}:5: etcd.tls.key_file: ", "mode 0640 is too open"},
			setup: func(t *testing.T, dir string) string {
				writeFile(t, filepath.Join(dir, "c.pem"), "cert", 0o644)
				writeFile(t, filepath.Join(dir, "k.pem"), "key", 0o640)
				return cfg(fmt.Sprintf("[etcd.tls]\ncert_file = %q\n\nkey_file = %q\n", filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")))(t, dir)
			}},
		{name: "password file world-readable", code: exitConfig, want: []string{"{cfg}:4: etcd.password_file: ", "mode 0604 is too open"},
			setup: func(t *testing.T, dir string) string {
				writeFile(t, filepath.Join(dir, "pw"), "secret\n", 0o604)
				return cfg(fmt.Sprintf("[etcd]\nusername = \"u\"\npassword_file = %q\n", filepath.Join(dir, "pw")))(t, dir)
			}},
		{name: "password file 0600 with space and newline in its path", code: exitOK, want: []string{"configuration ok"},
			setup: func(t *testing.T, dir string) string {
				pw := filepath.Join(dir, odd, "pass word")
				writeFile(t, pw, "secret\n", 0o600)
				return cfg(fmt.Sprintf("[etcd]\nusername = \"u\"\npassword_file = %q\n", pw))(t, dir)
			}},
		{name: "password file missing, path with newline", code: exitConfig,
			want: []string{"{cfg}:4: etcd.password_file: ", `with space\nand newline/pw": no such file or directory`},
			setup: func(t *testing.T, dir string) string {
				return cfg(fmt.Sprintf("[etcd]\nusername = \"u\"\npassword_file = %q\n", filepath.Join(dir, odd, "pw")))(t, dir)
			}},
		{name: "password file is a FIFO", code: exitConfig, want: []string{"{cfg}:4: etcd.password_file: ", "not a regular file"},
			setup: func(t *testing.T, dir string) string {
				mkfifo(t, filepath.Join(dir, "pw"))
				return cfg(fmt.Sprintf("[etcd]\nusername = \"u\"\npassword_file = %q\n", filepath.Join(dir, "pw")))(t, dir)
			}},
		{name: "password file is /dev/zero", code: exitConfig, want: []string{"{cfg}:4: etcd.password_file: ", "not a regular file"},
			setup: cfg("[etcd]\nusername = \"u\"\npassword_file = \"/dev/zero\"\n")},
		{name: "password file relative", code: exitConfig, want: []string{"{cfg}:4: etcd.password_file: must be an absolute path"},
			setup: cfg("[etcd]\nusername = \"u\"\npassword_file = \"pw\"\n")},
		{name: "CA file missing", code: exitConfig, want: []string{"{cfg}:3: etcd.tls.ca_file: ", "no such file or directory"},
			setup: func(t *testing.T, dir string) string {
				return cfg(fmt.Sprintf("[etcd.tls]\nca_file = %q\n", filepath.Join(dir, "ca.pem")))(t, dir)
			}},
		{name: "CA file is a directory", code: exitConfig, want: []string{"{cfg}:3: etcd.tls.ca_file: ", "not a regular file"},
			setup: func(t *testing.T, dir string) string {
				return cfg(fmt.Sprintf("[etcd.tls]\nca_file = %q\n", dir))(t, dir)
			}},
		{name: "key file symlink loop", code: exitConfig, want: []string{"{cfg}:4: etcd.tls.key_file: ", "too many levels of symbolic links"},
			setup: func(t *testing.T, dir string) string {
				writeFile(t, filepath.Join(dir, "c.pem"), "cert", 0o644)
				symlink(t, "k.pem", filepath.Join(dir, "k.pem"))
				return cfg(fmt.Sprintf("[etcd.tls]\ncert_file = %q\nkey_file = %q\n", filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")))(t, dir)
			}},
		{name: "key file owned by another user, 0600", code: exitOK, want: []string{"configuration ok"}, root: true,
			setup: func(t *testing.T, dir string) string {
				writeFile(t, filepath.Join(dir, "c.pem"), "cert", 0o644)
				writeFile(t, filepath.Join(dir, "k.pem"), "key", 0o600)
				chown(t, filepath.Join(dir, "k.pem"), nobody)
				return cfg(fmt.Sprintf("[etcd.tls]\ncert_file = %q\nkey_file = %q\n", filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")))(t, dir)
			}},
		{name: "relative state_dir", code: exitConfig, want: []string{`{cfg}:3: paths.state_dir: must be an absolute path, not "state dir"`},
			setup: cfg("[paths]\nstate_dir = \"state dir\"\n")},
		{name: "state_dir with space and newline is fine", code: exitOK, want: []string{"configuration ok"},
			setup: cfg("[paths]\nstate_dir = \"/var/lib/with space\\nand newline\"\n")},
		{name: "relative health script", code: exitConfig, want: []string{`{cfg}:3: health.script: must be an absolute path or "", not "gate"`},
			setup: cfg("[health]\nscript = \"gate\"\n")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.root && !isRoot() {
				t.Skip("needs root (chown)")
			}
			dir := t.TempDir()
			path := tc.setup(t, dir)
			r := run(t, "--config", path, "validate-config")
			expect(t, r, tc.code, expand(tc.want, path, dir), expand(tc.notWant, path, dir)...)
			if len(r.out()) > 64<<10 {
				t.Errorf("output is %d bytes: a hostile value must not be echoed in full", len(r.out()))
			}
		})
	}
}

// TestConfigErrorEveryCommand: every command loads the configuration first
// and exits 2 on a bad one, naming file, line and key, before it touches
// etcd, the host or the state directory.
func TestConfigErrorEveryCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	path := cfg(fmt.Sprintf("[paths]\nstate_dir = %q\nrun_dir = %q\n[lock]\nmax_concurrent = 0\n", state, state))(t, dir)
	for _, args := range [][]string{
		{"check", "--once"}, {"hold"}, {"status"}, {"status", "--json"}, {"simulate"}, {"validate-config", "--print"},
		{"pause", "--reason", "x"}, {"resume"}, {"set-max", "2"}, {"release"}, {"release", "--node", "n2"}, {"ack"}, {"forget", "n2"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			r := run(t, append([]string{"--config", path}, args...)...)
			expect(t, r, exitConfig, []string{path + ":6: lock.max_concurrent: must be at least 1, not 0"})
		})
	}
	if _, err := os.Stat(state); err == nil {
		t.Errorf("a command with a bad configuration created %s", state)
	}
}

func expand(ss []string, cfgPath, dir string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		s = strings.ReplaceAll(s, "{cfg}", shownPath(cfgPath))
		out[i] = strings.ReplaceAll(s, "{dir}", dir)
	}
	return out
}

func mkdir(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
}

func mkfifo(t *testing.T, p string) {
	t.Helper()
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, p string) {
	t.Helper()
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}

// nobody is the uid of another, unprivileged user.
const nobody = 65534

func chown(t *testing.T, p string, uid int) {
	t.Helper()
	if err := os.Lchown(p, uid, uid); err != nil {
		t.Fatal(err)
	}
}
