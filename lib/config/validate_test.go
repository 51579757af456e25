package config

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestProblems is the table of every error class: each case names the file,
// the line and the full key the problem must carry.
func TestProblems(t *testing.T) {
	const m = "config.toml"
	const d = "config.d/50-x.toml"
	cases := []struct {
		name  string
		files map[string]string
		setup func(t *testing.T, dir string)
		opts  *Options
		want  []want
	}{
		// Syntax and file-level problems.
		{"syntax error", map[string]string{m: "cluster = \"a\"\n\n[lock\nttl = \"5s\"\n"},
			nil, nil, []want{{m, 3, "", "syntax error"}}},
		{"syntax error in drop-in", map[string]string{m: "cluster = \"a\"\n", d: "a = 1\na = 2\n"},
			nil, nil, []want{{d, 2, "a", "syntax error"}}},
		{"binary file", map[string]string{m: "\x00\x01\x02\xff\xfe garbage"},
			nil, nil, []want{{m, 1, "", "syntax error"}}},
		{"unexpected end of file", map[string]string{m: "cluster = \"a\"\nx = [1,\n2,\n"},
			nil, nil, []want{{m, 3, "", "syntax error"}}},
		{"invalid utf-8", map[string]string{m: "cluster = \"a\xffb\"\n"},
			nil, nil, []want{{m, 1, "cluster", "syntax error"}}},

		// Unknown keys and inline secrets.
		{"unknown top-level key", map[string]string{m: "cluster = \"a\"\nclustr = \"b\"\n"},
			nil, nil, []want{{m, 2, "clustr", `did you mean "cluster"`}}},
		{"unknown key in table", map[string]string{m: "[lock]\nttl = \"90s\"\nTTL = \"80s\"\n"},
			nil, nil, []want{{m, 3, "lock.TTL", `did you mean "ttl"`}}},
		{"unknown table", map[string]string{m: "[bogus]\nx = 1\n"},
			nil, nil, []want{{m, 1, "bogus", "unknown key"}}},
		{"unknown key in detector", map[string]string{m: "[[detector]]\ntype = \"auto\"\n[[detector]]\ntype = \"auto\"\nfoo = 1\n"},
			nil, nil, []want{{m, 5, "detector[1].foo", "unknown key"}}},
		{"inline password", map[string]string{m: "cluster = \"a\"\npassword = \"hunter2\"\n"},
			nil, nil, []want{{m, 2, "password", "inline secrets are not allowed; use password_file"}}},
		{"inline etcd.password", map[string]string{m: "[etcd]\nusername = \"u\"\npassword = \"hunter2\"\n"},
			nil, nil, []want{
				{m, 3, "etcd.password", "inline secrets are not allowed; use password_file"},
				{m, 2, "etcd.username", "set both or neither"},
			}},
		{"inline tls key", map[string]string{m: "[etcd.tls]\nkey = \"-----BEGIN\"\n"},
			nil, nil, []want{{m, 2, "etcd.tls.key", "etcd.tls.key_file"}}},
		{"inline token", map[string]string{m: "[etcd]\nauth_token = \"abc\"\n"},
			nil, nil, []want{{m, 2, "etcd.auth_token", "inline secrets are not allowed"}}},
		{"secret inside unknown table", map[string]string{m: "[auth]\nuser = \"x\"\nsecret = \"y\"\n"},
			nil, nil, []want{{m, 1, "auth", "inline secrets are not allowed"}}},
		{"quoted unknown key", map[string]string{m: "[lock]\n\"my key\" = 1\n"},
			nil, nil, []want{{m, 2, `lock."my key"`, "unknown key"}}},

		// Wrong types.
		{"string for integer", map[string]string{m: "[lock]\nmax_concurrent = \"2\"\n"},
			nil, nil, []want{{m, 2, "lock.max_concurrent", "must be an integer, not a string"}}},
		{"integer for duration", map[string]string{m: "[lock]\n\nttl = 90\n"},
			nil, nil, []want{{m, 3, "lock.ttl", `must be a duration string such as "90s", not an integer`}}},
		{"float for integer", map[string]string{m: "[policy]\nexpected_nodes = 2.5\n"},
			nil, nil, []want{{m, 2, "policy.expected_nodes", "not a float"}}},
		{"string for bool", map[string]string{m: "dry_run = \"yes\"\n"},
			nil, nil, []want{{m, 1, "dry_run", "must be a boolean"}}},
		{"bool for float", map[string]string{m: "[policy]\nmin_healthy_fraction = true\n"},
			nil, nil, []want{{m, 2, "policy.min_healthy_fraction", "must be a number"}}},
		{"datetime for string", map[string]string{m: "cluster = 1979-05-27T07:32:00Z\n"},
			nil, nil, []want{{m, 1, "cluster", "not a datetime"}}},
		{"local time for string", map[string]string{m: "cluster = 07:32:00\n[lock]\nslot_expiry = 1979-05-27\n"},
			nil, nil, []want{{m, 1, "cluster", "not a datetime"}, {m, 3, "lock.slot_expiry", "not a datetime"}}},
		{"scalar for table", map[string]string{m: "cluster = \"a\"\nlock = 5\n"},
			nil, nil, []want{{m, 2, "lock", "must be a table"}}},
		{"table for scalar", map[string]string{m: "[lock.ttl]\nx = 1\n"},
			nil, nil, []want{{m, 1, "lock.ttl", "must be a duration string"}}},
		{"string for array", map[string]string{m: "[windows]\nallow = \"Tue 22:00-23:00\"\n"},
			nil, nil, []want{{m, 2, "windows.allow", "must be an array of strings, not a string"}}},
		{"array element type", map[string]string{m: "[etcd]\nendpoints = [\n  \"http://a:2379\",\n  2379,\n]\n"},
			nil, nil, []want{{m, 4, "etcd.endpoints[1]", "must be a string, not an integer"}}},
		{"detector not a table", map[string]string{m: "detector = [\"file\"]\n"},
			nil, nil, []want{{m, 1, "detector[0]", "must be a table"}}},
		{"detector a string", map[string]string{m: "detector = \"file\"\n"},
			nil, nil, []want{{m, 1, "detector", "must be an array of tables"}}},
		{"exit code type", map[string]string{m: "[[detector]]\ntype = \"command\"\ncmd = [\"x\"]\nneeded_exit_codes = [\"1\"]\nnot_needed_exit_codes = [0]\n"},
			nil, nil, []want{{m, 4, "detector[0].needed_exit_codes[0]", "must be an integer"}}},
		{"NUL in string", map[string]string{m: "[paths]\nrun_dir = \"/run/a\\u0000b\"\n"},
			nil, nil, []want{{m, 2, "paths.run_dir", "NUL"}}},

		// Durations.
		{"bad duration", map[string]string{m: "alive_ttl = \"15 minutes\"\n"},
			nil, nil, []want{{m, 1, "alive_ttl", "not a duration"}}},
		{"duration without unit", map[string]string{m: "[etcd]\ndial_timeout = \"10\"\n"},
			nil, nil, []want{{m, 2, "etcd.dial_timeout", "not a duration"}}},
		{"negative duration", map[string]string{m: "[lock]\nbackoff_min = \"-5s\"\n"},
			nil, nil, []want{{m, 2, "lock.backoff_min", "must not be negative"}}},
		{"overflowing duration", map[string]string{m: "history_ttl = \"99999999999h\"\n"},
			nil, nil, []want{{m, 1, "history_ttl", "not a duration"}}},
		{"huge duration", map[string]string{m: "history_ttl = \"1000000h\"\n"},
			nil, nil, []want{{m, 1, "history_ttl", "too long"}}},
		{"zero durations", map[string]string{m: "[lock]\nttl = \"0s\"\nmax_hold_wait = \"0s\"\nmax_reboot_duration = \"0s\"\n[etcd]\nrequest_timeout = \"0s\"\n[reboot]\ntimeout = \"0s\"\n[systemd]\ndbus_timeout = \"0s\"\n"},
			nil, nil, []want{
				{m, 2, "lock.ttl", "at least 1s"},
				{m, 2, "lock.ttl", "must exceed health.timeout"},
				{m, 3, "lock.max_hold_wait", "greater than 0"},
				{m, 4, "lock.max_reboot_duration", "greater than 0"},
				{m, 6, "etcd.request_timeout", "greater than 0"},
				{m, 8, "reboot.timeout", "greater than 0"},
				{m, 10, "systemd.dbus_timeout", "greater than 0"},
			}},
		{"zero health timeout and backoff", map[string]string{m: "[health]\ntimeout = \"0s\"\n[lock]\nbackoff_min = \"0s\"\nbackoff_max = \"0s\"\n[etcd]\ndial_timeout = \"0s\"\n"},
			nil, nil, []want{
				{m, 2, "health.timeout", "greater than 0"},
				{m, 4, "lock.backoff_min", "greater than 0"},
				{m, 5, "lock.backoff_max", "greater than 0"},
				{m, 7, "etcd.dial_timeout", "greater than 0"},
			}},
		{"short alive_ttl", map[string]string{m: "alive_ttl = \"30s\"\nhistory_ttl = \"0s\"\n"},
			nil, nil, []want{{m, 1, "alive_ttl", "at least 1m"}, {m, 2, "history_ttl", "at least 1s"}}},

		// Ranges.
		{"max_concurrent zero", map[string]string{m: "[lock]\nmax_concurrent = 0\n"},
			nil, nil, []want{{m, 2, "lock.max_concurrent", "at least 1"}}},
		{"max_concurrent huge", map[string]string{m: "[lock]\nmax_concurrent = 9223372036854775807\n"},
			nil, nil, []want{{m, 2, "lock.max_concurrent", "too large"}}},
		{"fraction above one", map[string]string{m: "[policy]\nmin_healthy_fraction = 1.5\n"},
			nil, nil, []want{{m, 2, "policy.min_healthy_fraction", "between 0 and 1"}}},
		{"fraction negative", map[string]string{m: "[policy]\nmin_healthy_fraction = -0.1\n"},
			nil, nil, []want{{m, 2, "policy.min_healthy_fraction", "between 0 and 1"}}},
		{"fraction nan", map[string]string{m: "[policy]\nmin_healthy_fraction = nan\n"},
			nil, nil, []want{{m, 2, "policy.min_healthy_fraction", "between 0 and 1"}}},
		{"fraction inf", map[string]string{m: "[policy]\nmin_healthy_fraction = inf\n"},
			nil, nil, []want{{m, 2, "policy.min_healthy_fraction", "between 0 and 1"}}},
		{"negative counts", map[string]string{m: "[policy]\nmin_healthy_absolute = -1\nexpected_nodes = -1\nmax_reboots_per_reason = 0\n"},
			nil, nil, []want{
				{m, 2, "policy.min_healthy_absolute", "between 0 and"},
				{m, 3, "policy.expected_nodes", "between 0 and"},
				{m, 4, "policy.max_reboots_per_reason", "between 1 and"},
			}},
		{"huge counts", map[string]string{m: "[policy]\nexpected_nodes = 10000000000\nmax_reboots_per_reason = 5000\n"},
			nil, nil, []want{
				{m, 2, "policy.expected_nodes", "between 0 and"},
				{m, 3, "policy.max_reboots_per_reason", "between 1 and"},
			}},

		// Combinations, attributed to the file that set a key last.
		{"ttl not above health timeout", map[string]string{m: "[health]\ntimeout = \"90s\"\n"},
			nil, nil, []want{{m, 2, "health.timeout", "lock.ttl (1m30s) must exceed health.timeout (1m30s)"}}},
		{"ttl lowered in drop-in", map[string]string{m: "[health]\ntimeout = \"60s\"\n", d: "# lower\n[lock]\nttl = \"45s\"\n"},
			nil, nil, []want{{d, 3, "lock.ttl", "must exceed health.timeout"}}},
		{"health timeout raised in drop-in", map[string]string{m: "[lock]\nttl = \"60s\"\n", d: "[health]\ntimeout = \"60s\"\n"},
			nil, nil, []want{{d, 2, "health.timeout", "must exceed health.timeout"}}},
		{"backoff min above max", map[string]string{m: "[lock]\nbackoff_min = \"2m\"\n"},
			nil, nil, []want{{m, 2, "lock.backoff_min", "must not exceed lock.backoff_max"}}},
		{"command method without command", map[string]string{m: "[reboot]\nmethod = \"command\"\n"},
			nil, nil, []want{{m, 2, "reboot.method", "needs a non-empty reboot.command"}}},
		{"reboot command relative", map[string]string{m: "[reboot]\nmethod = \"command\"\ncommand = [\"./reboot\"]\n"},
			nil, nil, []want{{m, 3, "reboot.command[0]", "absolute path or a bare name"}}},
		{"username without password file", map[string]string{m: "[etcd]\nusername = \"root\"\n"},
			nil, nil, []want{{m, 2, "etcd.username", "set both or neither"}}},
		{"min healthy absolute impossible", map[string]string{m: "[policy]\nexpected_nodes = 3\nmin_healthy_absolute = 3\n"},
			nil, nil, []want{{m, 3, "policy.min_healthy_absolute", "no node could ever reboot"}}},

		// Enums.
		{"enums", map[string]string{m: "[lock]\nslot_expiry = \"expire\"\n[reboot]\nmethod = \"kexec\"\n[systemd]\nholder = \"daemon\"\nholder_unit = \"hold\"\n"},
			nil, nil, []want{
				{m, 2, "lock.slot_expiry", `must be "freeze" or "release"`},
				{m, 4, "reboot.method", `must be "logind" or "command"`},
				{m, 6, "systemd.holder", `must be "transient" or "foreground"`},
				{m, 7, "systemd.holder_unit", "not a valid service unit name"},
			}},
		{"healthy states", map[string]string{m: "[health]\nhealthy_states = [\"running\", \"fine\"]\n"},
			nil, nil, []want{{m, 2, "health.healthy_states[1]", "not a systemd SystemState"}}},
		{"wall message too long", map[string]string{m: "[reboot]\nwall_message = \"" + strings.Repeat("x", 5000) + "\"\n"},
			nil, nil, []want{{m, 2, "reboot.wall_message", "too long"}}},

		// etcd endpoints.
		{"empty endpoints", map[string]string{m: "[etcd]\nendpoints = []\n"},
			nil, nil, []want{{m, 2, "etcd.endpoints", "must not be empty"}}},
		{"bad endpoints", map[string]string{m: "[etcd]\nendpoints = [\n\"ftp://a:1\",\n\"http://a\",\n\"https://a:99999\",\n\"http://u:p@a:1\",\n\"http://a:1/v3\",\n\"a:2379\",\n\"http://b:1\", \"http://b:1\",\n\"http://[::1\",\n]\n"},
			nil, nil, []want{
				{m, 3, "etcd.endpoints[0]", "scheme must be http or https"},
				{m, 4, "etcd.endpoints[1]", "host and a port"},
				{m, 5, "etcd.endpoints[2]", "port must be 1..65535"},
				{m, 6, "etcd.endpoints[3]", "credentials in endpoint URLs are not allowed"},
				{m, 7, "etcd.endpoints[4]", "only scheme://host:port"},
				{m, 8, "etcd.endpoints[5]", "scheme must be http or https"},
				{m, 9, "etcd.endpoints[7]", "listed twice"},
				{m, 10, "etcd.endpoints[8]", "not a URL"},
			}},

		// Secret and TLS files.
		{"tls files missing", map[string]string{m: "[etcd.tls]\nca_file = \"$DIR/nope-ca\"\ncert_file = \"$DIR/nope-cert\"\nkey_file = \"$DIR/nope-key\"\n"},
			nil, nil, []want{
				{m, 2, "etcd.tls.ca_file", "no such file"},
				{m, 3, "etcd.tls.cert_file", "no such file"},
				{m, 4, "etcd.tls.key_file", "no such file"},
			}},
		{"tls file is a directory", map[string]string{m: "[etcd.tls]\nca_file = \"$DIR/config.d\"\n", d: ""},
			nil, nil, []want{{m, 2, "etcd.tls.ca_file", "not a regular file"}}},
		{"tls relative path", map[string]string{m: "[etcd.tls]\nca_file = \"ca.pem\"\n"},
			nil, nil, []want{{m, 2, "etcd.tls.ca_file", "absolute path"}}},
		{"cert without key", map[string]string{m: "[etcd.tls]\ncert_file = \"$DIR/cert.pem\"\n"},
			func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, "cert.pem"), "cert", 0o644) },
			nil, []want{{m, 2, "etcd.tls.cert_file", "set both or neither"}}},
		{"key file too open", map[string]string{m: "[etcd.tls]\ncert_file = \"$DIR/cert.pem\"\nkey_file = \"$DIR/key.pem\"\n"},
			func(t *testing.T, dir string) {
				writeFile(t, filepath.Join(dir, "cert.pem"), "cert", 0o644)
				writeFile(t, filepath.Join(dir, "key.pem"), "key", 0o640)
			},
			nil, []want{{m, 3, "etcd.tls.key_file", "mode 0640 is too open"}}},
		{"password file too open", map[string]string{m: "[etcd]\nusername = \"u\"\npassword_file = \"$DIR/pw\"\n"},
			func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, "pw"), "secret", 0o604) },
			nil, []want{{m, 3, "etcd.password_file", "mode 0604 is too open"}}},
		{"password file missing", map[string]string{m: "[etcd]\npassword_file = \"$DIR/pw\"\nusername = \"u\"\n"},
			nil, nil, []want{{m, 2, "etcd.password_file", "no such file"}}},
		{"password file without username", map[string]string{m: "[etcd]\npassword_file = \"$DIR/pw\"\n"},
			func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, "pw"), "secret", 0o600) },
			nil, []want{{m, 2, "etcd.password_file", "set both or neither"}}},

		// Names.
		{"bad node name and cluster", map[string]string{m: "node_name = \"-node\"\ncluster = \"a/b\"\n"},
			nil, nil, []want{{m, 1, "node_name", "not a valid name"}, {m, 2, "cluster", "not a valid name"}}},
		{"cluster too long", map[string]string{m: "\ncluster = \"" + strings.Repeat("c", 64) + "\"\n"},
			nil, nil, []want{{m, 2, "cluster", "not a valid name"}}},
		{"no host name", map[string]string{m: "cluster = \"a\"\n"},
			nil, &Options{}, []want{{m, 0, "node_name", "no host name is known"}}},
		{"bad host name", map[string]string{m: "cluster = \"a\"\n"},
			nil, &Options{Hostname: "_bad.example.com"}, []want{{m, 0, "node_name", `short host name "_bad"`}}},
		{"fallback nodes", map[string]string{m: "[policy]\nfallback_nodes = [\"a\", \"b c\",\n  \"a\"]\n"},
			nil, nil, []want{
				{m, 2, "policy.fallback_nodes[1]", "not a valid node name"},
				{m, 3, "policy.fallback_nodes[2]", "listed twice"},
			}},

		// Detectors.
		{"detector file", map[string]string{m: "[[detector]]\ntype = \"file\"\n\n[[detector]]\ntype = \"file\"\npath = \"run/reboot-required\"\ncmd = [\"/bin/true\"]\n"},
			nil, nil, []want{
				{m, 1, "detector[0].path", "required for a detector of type file"},
				{m, 6, "detector[1].path", "absolute path"},
				{m, 7, "detector[1].cmd", "only used by detectors of type command"},
			}},
		{"detector command", map[string]string{m: "[[detector]]\ntype = \"command\"\npath = \"/x\"\n[[detector]]\ntype = \"command\"\ncmd = [\"x\"]\nneeded_exit_codes = [1, 256]\nnot_needed_exit_codes = [-1, 1]\ntimeout = \"0s\"\n"},
			nil, nil, []want{
				{m, 3, "detector[0].path", "only used by detectors of type file"},
				{m, 1, "detector[0].cmd", "must not be empty"},
				{m, 1, "detector[0].needed_exit_codes", "must not be empty"},
				{m, 1, "detector[0].not_needed_exit_codes", "must not be empty"},
				{m, 7, "detector[1].needed_exit_codes[1]", "outside 0..255"},
				{m, 8, "detector[1].not_needed_exit_codes[0]", "outside 0..255"},
				{m, 8, "detector[1].not_needed_exit_codes", "exit code 1 is in both"},
				{m, 9, "detector[1].timeout", "greater than 0"},
			}},
		{"detector type", map[string]string{m: "[[detector]]\ntype = \"magic\"\n[[detector]]\npath = \"/x\"\n[[detector]]\ntype = \"auto\"\nneeded_exit_codes = [1]\n"},
			nil, nil, []want{
				{m, 2, "detector[0].type", `not "magic"`},
				{m, 3, "detector[1].type", "is required"},
				{m, 7, "detector[2].needed_exit_codes", "only used by detectors of type command"},
			}},
		{"detectors as inline tables", map[string]string{m: "detector = [\n  { type = \"file\", path = \"/x\" },\n  { type = \"kernel\", cmd = [\"x\"] },\n]\n"},
			nil, nil, []want{{m, 3, "detector[1].cmd", "only used by detectors of type command"}}},
		{"too many detectors", map[string]string{m: "\n" + strings.Repeat("[[detector]]\ntype = \"auto\"\n", 65)},
			nil, nil, []want{{m, 2, "detector", "too many detectors (65; at most 64)"}}},
		{"thousand detectors", map[string]string{m: strings.Repeat("[[detector]]\ntype = \"kernel\"\n", 1000)},
			nil, nil, []want{{m, 1, "detector", "too many detectors (1000; at most 64)"}}},
		{"too many list elements", map[string]string{m: "[policy]\nfallback_nodes = [" + strings.Repeat("\"n\",", 2000) + "]\n"},
			nil, nil, []want{{m, 2, "policy.fallback_nodes", "too many elements"}}},

		// Paths.
		{"relative paths", map[string]string{m: "[health]\nscript = \"gate.sh\"\nnode_health_command = [\"bin/check\"]\n[metrics]\ntextfile = \"x.prom\"\n[paths]\nkill_switch = \"disable\"\nstate_dir = \"\"\nrun_dir = \"run\"\nboot_id = \"boot_id\"\nos_release = \"os-release\"\nboot_dir = \"boot\"\n"},
			nil, nil, []want{
				{m, 2, "health.script", "absolute path"},
				{m, 3, "health.node_health_command[0]", "absolute path or a bare name"},
				{m, 5, "metrics.textfile", "absolute path"},
				{m, 7, "paths.kill_switch", "absolute path"},
				{m, 8, "paths.state_dir", "absolute path"},
				{m, 9, "paths.run_dir", "absolute path"},
				{m, 10, "paths.boot_id", "absolute path"},
				{m, 11, "paths.os_release", "absolute path"},
				{m, 12, "paths.boot_dir", "absolute path"},
			}},

		// Windows.
		{"bad timezone", map[string]string{m: "[windows]\ntimezone = \"Mars/Olympus\"\n"},
			nil, nil, []want{{m, 2, "windows.timezone", "unknown time zone"}}},
		{"empty timezone", map[string]string{m: "[windows]\ntimezone = \"\"\n"},
			nil, nil, []want{{m, 2, "windows.timezone", "must not be empty"}}},
		{"bad windows", map[string]string{m: "[windows]\nallow = [\"Tue 22:00-23:00\", \"bad one\"]\ndeny = [\n  \"\",\n  \"bad two\",\n]\n"},
			nil, nil, []want{
				{m, 2, "windows.allow[1]", "cannot parse window"},
				{m, 4, "windows.deny[0]", "must not be empty"},
				{m, 5, "windows.deny[1]", "cannot parse window"},
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, tc.files)
			if tc.setup != nil {
				tc.setup(t, dir)
			}
			opts := testOpts()
			if tc.opts != nil {
				opts = *tc.opts
			}
			c, err := Load(SourceFor(filepath.Join(dir, m)), opts)
			if c != nil {
				t.Errorf("Load returned a config with an error")
			}
			expectProblems(t, dir, err, tc.want)
		})
	}
}

func TestSecretValueNeverPrinted(t *testing.T) {
	_, err, _ := loadString(t, "password = \"hunter2\"\n[etcd]\ntoken = \"tok-s3cr3t\"\n[x]\nsecret = \"deep-s3cr3t\"\n")
	problems(t, err)
	for _, s := range []string{"hunter2", "tok-s3cr3t", "deep-s3cr3t"} {
		if strings.Contains(err.Error(), s) {
			t.Errorf("error text contains the secret %q:\n%v", s, err)
		}
	}
}

func TestThreeMistakes(t *testing.T) {
	_, err, path := loadString(t, `cluster = "prod"

[lock]
tll = "90s"
max_concurrent = 0

[health]
timeout = "thirty seconds"
`)
	expectProblems(t, filepath.Dir(path), err, []want{
		{"config.toml", 4, "lock.tll", `did you mean "ttl"`},
		{"config.toml", 5, "lock.max_concurrent", "at least 1"},
		{"config.toml", 8, "health.timeout", "not a duration"},
	})
	// One problem per line, in line order.
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], ":4: ") || !strings.Contains(lines[1], ":5: ") || !strings.Contains(lines[2], ":8: ") {
		t.Errorf("Error() not one line per problem in order:\n%v", err)
	}
}

func TestErrorsOfAllFiles(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"config.toml":       "nonsense = 1\n",
		"config.d/a.toml":   "[lock]\nttl = 5\n",
		"config.d/b.toml":   "cluster = \"ok\"\n\n[windows]\nallow = [\"bad\"]\n",
		"config.d/c.toml":   "[bogus]\n",
		"config.d/skip.txt": "this is not read",
	})
	_, err := Load(SourceFor(filepath.Join(dir, "config.toml")), testOpts())
	expectProblems(t, dir, err, []want{
		{"config.toml", 1, "nonsense", "unknown key"},
		{"config.d/a.toml", 2, "lock.ttl", "must be a duration string"},
		{"config.d/b.toml", 4, "windows.allow[0]", "cannot parse window"},
		{"config.d/c.toml", 1, "bogus", "unknown key"},
	})
	// Problems are ordered by file.
	text := err.Error()
	if !(strings.Index(text, "config.toml:1") < strings.Index(text, "a.toml:2") &&
		strings.Index(text, "a.toml:2") < strings.Index(text, "b.toml:4") &&
		strings.Index(text, "b.toml:4") < strings.Index(text, "c.toml:1")) {
		t.Errorf("problems not in file order:\n%s", text)
	}
}

// TestLaterFileFixesBadValue: a value rejected in one file and set right by
// a later one is still checked in the merged result.
func TestLaterFileFixesBadValue(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"config.toml":      "[lock]\nttl = 90\n[windows]\nallow = [1]\n",
		"config.d/10.toml": "[lock]\nttl = \"10s\"\n[windows]\nallow = [\"bad\"]\n",
	})
	_, err := Load(SourceFor(filepath.Join(dir, "config.toml")), testOpts())
	expectProblems(t, dir, err, []want{
		{"config.toml", 2, "lock.ttl", "must be a duration string"},
		{"config.toml", 4, "windows.allow[0]", "must be a string"},
		{"config.d/10.toml", 2, "lock.ttl", "must exceed health.timeout"},
		{"config.d/10.toml", 4, "windows.allow[0]", "cannot parse window"},
	})
}

func TestValidUnit(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"clusterrebootd-hold.service", true},
		{"my-hold@x.service", true},
		{strings.Repeat("a", 247) + ".service", true},
		{strings.Repeat("a", 248) + ".service", false},
		{".service", false},
		{"hold", false},
		{"a b.service", false},
		{"hold.service\n", false},
	} {
		if got := validUnit(tc.name); got != tc.ok {
			t.Errorf("validUnit(%q) = %v, want %v", tc.name, got, tc.ok)
		}
	}
}
