package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestDefaults(t *testing.T) {
	c := mustLoadString(t, "")
	want := Default()
	want.NodeName = "node1"
	want.Detectors = []Detector{DefaultDetector()}
	c.Files = nil
	if !reflect.DeepEqual(*c, want) {
		t.Errorf("defaults:\n got %+v\nwant %+v", *c, want)
	}
	// Spot checks against DESIGN §5, so that Default itself is tested.
	checks := []struct {
		name string
		got  any
		want any
	}{
		{"cluster", c.Cluster, "default"},
		{"dry_run", c.DryRun, false},
		{"alive_ttl", c.AliveTTL.Std(), 15 * time.Minute},
		{"history_ttl", c.HistoryTTL.Std(), 720 * time.Hour},
		{"detector", c.Detectors, []Detector{{Type: "auto", Cmd: []string{}, NeededExitCodes: []int{}, NotNeededExitCodes: []int{}, Timeout: Duration(time.Minute)}}},
		{"health.timeout", c.Health.Timeout.Std(), 30 * time.Second},
		{"health.healthy_states", c.Health.HealthyStates, []string{"running"}},
		{"etcd.dial_timeout", c.Etcd.DialTimeout.Std(), 5 * time.Second},
		{"etcd.request_timeout", c.Etcd.RequestTimeout.Std(), 5 * time.Second},
		{"lock.ttl", c.Lock.TTL.Std(), 90 * time.Second},
		{"lock.max_concurrent", c.Lock.MaxConcurrent, 1},
		{"lock.max_hold_wait", c.Lock.MaxHoldWait.Std(), 6 * time.Hour},
		{"lock.backoff_min", c.Lock.BackoffMin.Std(), 5 * time.Second},
		{"lock.backoff_max", c.Lock.BackoffMax.Std(), 60 * time.Second},
		{"lock.max_reboot_duration", c.Lock.MaxRebootDuration.Std(), 30 * time.Minute},
		{"lock.slot_expiry", c.Lock.SlotExpiry, "freeze"},
		{"policy.forbid_if_only_fallback_left", c.Policy.ForbidIfOnlyFallbackLeft, true},
		{"policy.max_reboots_per_reason", c.Policy.MaxRebootsPerReason, 1},
		{"windows.timezone", c.Windows.Timezone, "Local"},
		{"windows.expected_reboot_duration", c.Windows.ExpectedRebootDuration.Std(), 10 * time.Minute},
		{"reboot.method", c.Reboot.Method, "logind"},
		{"reboot.wall_message", c.Reboot.WallMessage, "clusterrebootd: coordinated reboot ({reason})"},
		{"reboot.respect_inhibitors", c.Reboot.RespectInhibitors, true},
		{"reboot.timeout", c.Reboot.Timeout.Std(), 60 * time.Second},
		{"systemd.holder", c.Systemd.Holder, "transient"},
		{"systemd.holder_unit", c.Systemd.HolderUnit, "clusterrebootd-hold.service"},
		{"systemd.watchdog", c.Systemd.Watchdog.Std(), 30 * time.Second},
		{"systemd.dbus_timeout", c.Systemd.DBusTimeout.Std(), 10 * time.Second},
		{"metrics.textfile", c.Metrics.Textfile, "/var/lib/prometheus/node-exporter/clusterrebootd.prom"},
		{"paths.kill_switch", c.Paths.KillSwitch, "/etc/clusterrebootd/disable"},
		{"paths.state_dir", c.Paths.StateDir, "/var/lib/clusterrebootd"},
		{"paths.run_dir", c.Paths.RunDir, "/run/clusterrebootd"},
		{"paths.boot_id", c.Paths.BootID, "/proc/sys/kernel/random/boot_id"},
		{"paths.os_release", c.Paths.OSRelease, "/etc/os-release"},
		{"paths.boot_dir", c.Paths.BootDir, "/boot"},
	}
	for _, ck := range checks {
		if !reflect.DeepEqual(ck.got, ck.want) {
			t.Errorf("%s = %#v, want %#v", ck.name, ck.got, ck.want)
		}
	}
	if d := Default(); d.NodeName != "" || len(d.Detectors) != 0 {
		t.Errorf("Default() NodeName %q, %d detectors; want empty", d.NodeName, len(d.Detectors))
	}
}

func TestNodeName(t *testing.T) {
	for _, tc := range []struct{ host, content, want string }{
		{"web-3.dc1.example.com", "", "web-3"},
		{"plain", "", "plain"},
		{"web-3.example.com", "node_name = \"db.1\"\n", "db.1"},
		{"web-3.example.com", "node_name = \"\"\n", "web-3"},
	} {
		dir := t.TempDir()
		writeTree(t, dir, map[string]string{"config.toml": tc.content})
		c, err := Load(SourceFor(filepath.Join(dir, "config.toml")), Options{Hostname: tc.host})
		if err != nil {
			t.Fatalf("%q: %v", tc.host, err)
		}
		if c.NodeName != tc.want {
			t.Errorf("host %q, %q: node_name = %q, want %q", tc.host, tc.content, c.NodeName, tc.want)
		}
	}
}

func TestDuration(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		str  string
		err  string
	}{
		{"90s", 90 * time.Second, "1m30s", ""},
		{"15m", 15 * time.Minute, "15m", ""},
		{"720h", 720 * time.Hour, "720h", ""},
		{"1h0m5s", time.Hour + 5*time.Second, "1h0m5s", ""},
		{"1h30m", 90 * time.Minute, "1h30m", ""},
		{"0s", 0, "0s", ""},
		{"0", 0, "0s", ""},
		{"1.5s", 1500 * time.Millisecond, "1.5s", ""},
		{"-1s", 0, "", "must not be negative"},
		{"10", 0, "", "not a duration"},
		{"", 0, "", "not a duration"},
	} {
		var d Duration
		err := d.UnmarshalText([]byte(tc.in))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || d.Std() != tc.want {
			t.Errorf("%q: %v, %v; want %v", tc.in, d.Std(), err, tc.want)
		}
		b, _ := d.MarshalText()
		if string(b) != tc.str || d.String() != tc.str {
			t.Errorf("%q: marshals as %q, want %q", tc.in, b, tc.str)
		}
	}
}

// TestDropInMerge covers the three default directories: masking by name
// across directories, lexical order of names, later wins per key, arrays
// replaced as a whole, /dev/null and empty masks, ignored files.
func TestDropInMerge(t *testing.T) {
	root := t.TempDir()
	src := Source{
		MainFile: filepath.Join(root, "etc/config.toml"),
		DropInDirs: []string{
			filepath.Join(root, "usr/lib/config.d"),
			filepath.Join(root, "etc/config.d"),
			filepath.Join(root, "run/config.d"),
		},
	}
	writeTree(t, root, map[string]string{
		"etc/config.toml": `cluster = "main"
dry_run = true
[lock]
max_concurrent = 5
[windows]
allow = ["main-1", "main-2"]
[[detector]]
type = "file"
path = "/run/reboot-required"
[[detector]]
type = "kernel"
`,
		// 10-base: set in /usr/lib, masked entirely by /etc's 10-base.
		"usr/lib/config.d/10-base.toml": "cluster = \"usrlib\"\n[lock]\nmax_concurrent = 9\n",
		"etc/config.d/10-base.toml":     "[policy]\nexpected_nodes = 7\n",
		// 20-win: /usr/lib only; replaces the allow list.
		"usr/lib/config.d/20-win.toml": "[windows]\nallow = [\"usr-1\"]\n",
		// 30-det: /etc, masked by an empty file in /run.
		"etc/config.d/30-det.toml": "[[detector]]\ntype = \"needrestart\"\n",
		"run/config.d/30-det.toml": "",
		// 40-late: /run only; wins over everything before it.
		"run/config.d/40-late.toml": "cluster = \"runtime\"\n[lock]\nbackoff_max = \"2m\"\n",
		// 05-first: in /run but applied first among drop-ins (name order).
		"run/config.d/05-first.toml": "cluster = \"first\"\n[lock]\nbackoff_max = \"3m\"\nmax_concurrent = 2\n",
		// Ignored: wrong suffix, hidden.
		"etc/config.d/50-x.conf":  "garbage = [",
		"etc/config.d/.60-x.toml": "garbage = [",
	})
	// 50-null: masked by a symlink to /dev/null.
	writeTree(t, root, map[string]string{"usr/lib/config.d/50-null.toml": "dry_run = false\n"})
	if err := os.Symlink(os.DevNull, filepath.Join(root, "etc/config.d/50-null.toml")); err != nil {
		t.Fatal(err)
	}

	c, err := Load(src, testOpts())
	if err != nil {
		t.Fatal(err)
	}
	wantFiles := []string{
		"etc/config.toml", "run/config.d/05-first.toml", "etc/config.d/10-base.toml",
		"usr/lib/config.d/20-win.toml", "run/config.d/30-det.toml", "run/config.d/40-late.toml",
		"etc/config.d/50-null.toml",
	}
	for i := range wantFiles {
		wantFiles[i] = filepath.Join(root, wantFiles[i])
	}
	if !reflect.DeepEqual(c.Files, wantFiles) {
		t.Errorf("Files:\n got %q\nwant %q", c.Files, wantFiles)
	}
	if c.Cluster != "runtime" {
		t.Errorf("cluster = %q, want runtime (40-late wins)", c.Cluster)
	}
	if c.Lock.MaxConcurrent != 2 {
		t.Errorf("max_concurrent = %d, want 2 (05-first; /usr/lib 10-base masked)", c.Lock.MaxConcurrent)
	}
	if c.Lock.BackoffMax.Std() != 2*time.Minute {
		t.Errorf("backoff_max = %v, want 2m (40-late after 05-first)", c.Lock.BackoffMax)
	}
	if c.Policy.ExpectedNodes != 7 {
		t.Errorf("expected_nodes = %d, want 7", c.Policy.ExpectedNodes)
	}
	if !reflect.DeepEqual(c.Windows.Allow, []string{"usr-1"}) {
		t.Errorf("allow = %q, want [usr-1] (array replaced, not appended)", c.Windows.Allow)
	}
	if !c.DryRun {
		t.Error("dry_run = false: /usr/lib 50-null was not masked by /dev/null")
	}
	if len(c.Detectors) != 2 || c.Detectors[0].Type != "file" || c.Detectors[1].Type != "kernel" {
		t.Errorf("detectors = %+v, want main file's [file kernel] (30-det masked)", c.Detectors)
	}
}

func TestDetectorListReplaced(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"config.toml": "[[detector]]\ntype = \"file\"\npath = \"/a\"\n[[detector]]\ntype = \"kernel\"\n[[detector]]\ntype = \"auto\"\n",
		"config.d/10.toml": `[[detector]]
type = "command"
cmd = ["needs-restarting", "-r"]
needed_exit_codes = [1]
not_needed_exit_codes = [0]
timeout = "2m"
`,
		"config.d/20.toml": "[lock]\nmax_concurrent = 0\n",
	})
	_, err := Load(SourceFor(filepath.Join(dir, "config.toml")), testOpts())
	// The error from 20.toml proves the list of 10.toml is what is checked;
	// now fix it and look at the list.
	expectProblems(t, dir, err, []want{{"config.d/20.toml", 2, "lock.max_concurrent", "at least 1"}})
	writeTree(t, dir, map[string]string{"config.d/20.toml": ""})
	c, err := Load(SourceFor(filepath.Join(dir, "config.toml")), testOpts())
	if err != nil {
		t.Fatal(err)
	}
	want := []Detector{{
		Type: "command", Cmd: []string{"needs-restarting", "-r"},
		NeededExitCodes: []int{1}, NotNeededExitCodes: []int{0}, Timeout: Duration(2 * time.Minute),
	}}
	if !reflect.DeepEqual(c.Detectors, want) {
		t.Errorf("detectors = %+v, want %+v", c.Detectors, want)
	}
}

// TestDetectorProblemInReplacedList: a problem of a detector is reported in
// the file whose list is in effect, with that file's lines.
func TestDetectorProblemInReplacedList(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"config.toml":      "[[detector]]\ntype = \"file\"\npath = \"/a\"\n",
		"config.d/10.toml": "\n\n[[detector]]\ntype = \"auto\"\n\n[[detector]]\ntype = \"command\"\n",
	})
	_, err := Load(SourceFor(filepath.Join(dir, "config.toml")), testOpts())
	expectProblems(t, dir, err, []want{
		{"config.d/10.toml", 6, "detector[1].cmd", "must not be empty"},
		{"config.d/10.toml", 6, "detector[1].needed_exit_codes", "must not be empty"},
		{"config.d/10.toml", 6, "detector[1].not_needed_exit_codes", "must not be empty"},
	})
}

// TestSourceFor: --config reads its own config.d only, never the host's or
// a neighbour's drop-ins.
func TestSourceFor(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"a/config.toml":           "cluster = \"a\"\n",
		"a/config.d/10.toml":      "[lock]\nmax_concurrent = 3\n",
		"config.d/10.toml":        "[lock]\nmax_concurrent = 4\n",
		"a/sub/config.d/10.toml":  "[lock]\nmax_concurrent = 5\n",
		"a/conf.d/10.toml":        "[lock]\nmax_concurrent = 6\n",
		"b/config.toml":           "cluster = \"b\"\n",
		"b/other/config.d/x.toml": "bogus = 1\n",
	})
	src := SourceFor(filepath.Join(dir, "a/config.toml"))
	if want := []string{filepath.Join(dir, "a/config.d")}; !reflect.DeepEqual(src.DropInDirs, want) {
		t.Errorf("DropInDirs = %q, want %q", src.DropInDirs, want)
	}
	c, err := Load(src, testOpts())
	if err != nil {
		t.Fatal(err)
	}
	if c.Lock.MaxConcurrent != 3 || len(c.Files) != 2 {
		t.Errorf("max_concurrent %d from %q; want 3 from a/config.toml and a/config.d/10.toml", c.Lock.MaxConcurrent, c.Files)
	}
	c, err = Load(SourceFor(filepath.Join(dir, "b/config.toml")), testOpts())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.Files, []string{filepath.Join(dir, "b/config.toml")}) {
		t.Errorf("Files = %q", c.Files)
	}
}

func TestDefaultSource(t *testing.T) {
	want := Source{
		MainFile: "/etc/clusterrebootd/config.toml",
		DropInDirs: []string{
			"/usr/lib/clusterrebootd/config.d",
			"/etc/clusterrebootd/config.d",
			"/run/clusterrebootd/config.d",
		},
	}
	got := DefaultSource()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("DefaultSource() = %+v, want %+v", got, want)
	}
	got.DropInDirs[0] = "changed"
	if DefaultSource().DropInDirs[0] != want.DropInDirs[0] {
		t.Error("DefaultSource shares its slice")
	}
}

// TestShippedExample loads packaging/config.toml as shipped, checks that
// every key of the schema appears in it, and that uncommenting every key
// (with its documented default) still loads to the defaults.
func TestShippedExample(t *testing.T) {
	raw, err := os.ReadFile("../../packaging/config.toml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"config.toml": string(raw)})
	c, err := Load(SourceFor(filepath.Join(dir, "config.toml")), testOpts())
	if err != nil {
		t.Fatalf("shipped example does not load: %v", err)
	}
	if c.Cluster != "default" || len(c.Detectors) != 1 || c.Detectors[0].Type != "auto" {
		t.Errorf("shipped example is not all defaults: %+v", c)
	}
	for _, key := range schemaKeys(reflect.TypeOf(Config{}), "") {
		last := key[strings.LastIndexByte(key, '.')+1:]
		if !strings.Contains(string(raw), "#"+last+" = ") {
			t.Errorf("key %s is missing from packaging/config.toml", key)
		}
	}
	// Uncomment every "#key = value" line and every "#[table]" header except
	// the commented example detectors (they are examples, not defaults).
	var out []string
	inDetectors := false
	for _, line := range strings.Split(string(raw), "\n") {
		switch {
		case strings.HasPrefix(line, "#[[detector]]"):
			inDetectors = true
		case strings.HasPrefix(line, "#[health]"):
			inDetectors = false
		}
		if !inDetectors && (strings.HasPrefix(line, "#[") || strings.HasPrefix(line, "#") && !strings.HasPrefix(line, "# ") && strings.Contains(line, " = ")) {
			line = line[1:]
		}
		out = append(out, line)
	}
	uncommented := strings.Join(out, "\n")
	uncommented = strings.ReplaceAll(uncommented, `script = "/etc/clusterrebootd/health.d/cluster-gate"`, `script = ""`)
	uncommented = strings.ReplaceAll(uncommented, `node_name = "node-1"`, `node_name = "node1"`)
	writeTree(t, dir, map[string]string{"config.toml": uncommented})
	c2, err := Load(SourceFor(filepath.Join(dir, "config.toml")), testOpts())
	if err != nil {
		t.Fatalf("uncommented example does not load: %v\n%s", err, uncommented)
	}
	c.Files, c2.Files = nil, nil
	if !reflect.DeepEqual(c, c2) {
		t.Errorf("documented defaults differ from the built-in ones:\n got %+v\nwant %+v", c2, c)
	}
}

// schemaKeys lists every leaf key of the schema.
func schemaKeys(t reflect.Type, prefix string) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		tag := t.Field(i).Tag.Get("toml")
		if tag == "" || tag == "-" {
			continue
		}
		ft := t.Field(i).Type
		switch {
		case ft == detectorsType:
			out = append(out, schemaKeys(ft.Elem(), joinKey(prefix, "detector"))...)
		case ft.Kind() == reflect.Struct:
			out = append(out, schemaKeys(ft, joinKey(prefix, tag))...)
		default:
			out = append(out, joinKey(prefix, tag))
		}
	}
	return out
}

// fullConfig sets every key to a non-default value.
const fullConfig = `node_name = "db-7.rack2"
cluster = "prod_eu-1"
dry_run = true
alive_ttl = "20m"
history_ttl = "2160h"

[[detector]]
type = "file"
path = "/run/reboot-required"
timeout = "5s"

[[detector]]
type = "command"
cmd = ["/usr/bin/needs-restarting", "-r", "with \"quotes\" and \\ backslash"]
needed_exit_codes = [1, 2]
not_needed_exit_codes = [0]
timeout = "1m30s"

[[detector]]
type = "needrestart"

[health]
script = "/etc/clusterrebootd/health.d/cluster-gate"
timeout = "45s"
healthy_states = ["running", "degraded"]
node_health_command = ["/usr/local/bin/check", "--quick"]

[etcd]
endpoints = ["https://etcd-1:2379", "https://[fd00::1]:2379"]
dial_timeout = "3s"
request_timeout = "7s"
username = "reboot"
password_file = "$DIR/secrets/pw"

[etcd.tls]
ca_file = "$DIR/secrets/ca.pem"
cert_file = "$DIR/secrets/cert.pem"
key_file = "$DIR/secrets/key.pem"
server_name = "etcd.internal"

[lock]
ttl = "2m"
max_concurrent = 3
max_hold_wait = "12h"
backoff_min = "1s"
backoff_max = "5m"
max_reboot_duration = "1h"
slot_expiry = "release"

[policy]
min_healthy_fraction = 0.75
min_healthy_absolute = 2
expected_nodes = 10
fallback_nodes = ["db-1", "db-2"]
forbid_if_only_fallback_left = false
post_boot_soak = "5m"
max_reboots_per_reason = 3

[windows]
timezone = "Europe/Berlin"
allow = ["Tue 22:00-23:00", "* 01:00-04:00"]
deny = ["Fri 18:00-Mon 08:00"]
expected_reboot_duration = "0s"

[reboot]
method = "command"
command = ["/sbin/shutdown", "-r", "now"]
wall_message = "reboot: {reason} — ünïcödé"
respect_inhibitors = false
timeout = "2m"

[systemd]
holder = "foreground"
holder_unit = "my-hold@x.service"
watchdog = "0s"
dbus_timeout = "20s"

[metrics]
textfile = ""

[paths]
kill_switch = "/tmp/cr/disable"
state_dir = "/tmp/cr/state"
run_dir = "/tmp/cr/run"
boot_id = "/tmp/cr/boot_id"
os_release = "/tmp/cr/os-release"
boot_dir = "/tmp/cr/boot"
`

func writeSecrets(t *testing.T, dir string) {
	t.Helper()
	writeFile(t, filepath.Join(dir, "secrets/pw"), "pw", 0o600)
	writeFile(t, filepath.Join(dir, "secrets/ca.pem"), "ca", 0o644)
	writeFile(t, filepath.Join(dir, "secrets/cert.pem"), "cert", 0o644)
	writeFile(t, filepath.Join(dir, "secrets/key.pem"), "key", 0o400)
}

func TestFullConfig(t *testing.T) {
	dir := t.TempDir()
	writeSecrets(t, dir)
	writeTree(t, dir, map[string]string{"config.toml": fullConfig})
	c, err := Load(SourceFor(filepath.Join(dir, "config.toml")), testOpts())
	if err != nil {
		t.Fatal(err)
	}
	// Every leaf differs from its default: the decoder reached every field.
	def := Default()
	def.Detectors = []Detector{DefaultDetector()}
	cv, dv := reflect.ValueOf(*c), reflect.ValueOf(def)
	for _, key := range schemaKeys(reflect.TypeOf(Config{}), "") {
		if strings.HasPrefix(key, "detector.") {
			continue
		}
		a, b := fieldByKey(cv, key), fieldByKey(dv, key)
		if reflect.DeepEqual(a.Interface(), b.Interface()) {
			t.Errorf("%s still has its default %v", key, a.Interface())
		}
	}
	if c.Detectors[1].Cmd[2] != `with "quotes" and \ backslash` || c.Policy.MinHealthyFraction != 0.75 {
		t.Errorf("values: %+v", c)
	}
	roundTrip(t, c)
}

func fieldByKey(v reflect.Value, key string) reflect.Value {
	for _, seg := range strings.Split(key, ".") {
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).Tag.Get("toml") == seg {
				v = v.Field(i)
				break
			}
		}
	}
	return v
}

// roundTrip marshals c, loads the output and compares.
func roundTrip(t *testing.T, c *Config) {
	t.Helper()
	out, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"config.toml": string(out)})
	c2, err := Load(SourceFor(filepath.Join(dir, "config.toml")), Options{ValidateWindow: testOpts().ValidateWindow})
	if err != nil {
		t.Fatalf("printed config does not load: %v\n%s", err, out)
	}
	a, b := *c, *c2
	a.Files, b.Files = nil, nil
	if !reflect.DeepEqual(a, b) {
		t.Errorf("round trip differs:\n got %+v\nwant %+v\n%s", b, a, out)
	}
}

func TestMarshal(t *testing.T) {
	c := mustLoadString(t, "")
	out, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	for _, want := range []string{
		"# merged from: " + c.Files[0] + "\n",
		"node_name = \"node1\"\n",
		"alive_ttl = \"15m\"\n",
		"history_ttl = \"720h\"\n",
		"[[detector]]\ntype = \"auto\"\n",
		"timeout = \"1m\"\n",
		"[lock]\nttl = \"1m30s\"\n",
		"node_health_command = []\n",
		"[etcd.tls]\n",
		"[paths]\n",
		"boot_dir = \"/boot\"\n",
		"dbus_timeout = \"10s\"\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("Marshal output lacks %q:\n%s", want, s)
		}
	}
	for _, key := range schemaKeys(reflect.TypeOf(Config{}), "") {
		last := key[strings.LastIndexByte(key, '.')+1:]
		if !strings.Contains(s, "\n"+last+" = ") {
			t.Errorf("Marshal output lacks key %s", key)
		}
	}
	roundTrip(t, c)

	// A Config built in code (nil slices) prints every key as well.
	d := Default()
	d.NodeName = "n"
	d.Health.HealthyStates = nil
	d.Detectors = []Detector{{Type: "kernel", Timeout: Duration(time.Second)}}
	out, err = d.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "healthy_states = []\n") || !strings.Contains(string(out), "cmd = []\n") {
		t.Errorf("nil slices not printed as []:\n%s", out)
	}
	if d.Health.HealthyStates != nil || d.Detectors[0].Cmd != nil {
		t.Error("Marshal changed its receiver")
	}
}

func TestLoadErrorIsErrInvalid(t *testing.T) {
	_, err, _ := loadString(t, "[lock]\nttl = \"x\"\n")
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("errors.Is(%v, ErrInvalid) = false", err)
	}
	var e *Error
	if !errors.As(err, &e) || len(e.Problems) != 1 || e.Problems[0].Key != "lock.ttl" {
		t.Fatalf("problems = %+v", e)
	}
}

func TestBOMAndCRLF(t *testing.T) {
	_, err, path := loadString(t, "\ufeffcluster = \"a\"\r\n\r\n[lock]\r\nttl = \"x\"\r\n")
	expectProblems(t, filepath.Dir(path), err, []want{{"config.toml", 4, "lock.ttl", "not a duration"}})
	_, err, path = loadString(t, "\ufeffcluster = \"a\"\r\n[lock\r\n")
	expectProblems(t, filepath.Dir(path), err, []want{{"config.toml", 2, "", "syntax error"}})
}
