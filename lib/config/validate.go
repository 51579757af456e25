package config

import (
	"fmt"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Limits for values that are syntactically fine but not sensible.
const (
	maxDuration      = Duration(10 * 365 * 24 * time.Hour)
	minAliveTTL      = Duration(time.Minute)
	minLeaseTTL      = Duration(time.Second)
	maxMaxConcurrent = 10000
	maxNodes         = 1000000
	maxRebootsReason = 1000
	maxWallMessage   = 4096
)

// NamePattern is the syntax of node_name, cluster and fallback_nodes entries:
// they become etcd key segments.
var NamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// unitPattern is a service unit name; its length (at most 247 characters
// before ".service") is checked apart: a bounded repetition {1,247} would be
// compiled into 247 copies and cost every run half a millisecond of init.
var unitPattern = regexp.MustCompile(`^[A-Za-z0-9:_.\\@-]+\.service$`)

func validUnit(s string) bool {
	return len(s) <= 247+len(".service") && unitPattern.MatchString(s)
}

// systemStates are the values of systemd's SystemState property.
var systemStates = map[string]bool{
	"initializing": true, "starting": true, "running": true, "degraded": true,
	"maintenance": true, "stopping": true, "offline": true, "unknown": true,
}

// finish fills in the defaults that depend on the merged result.
func (l *loader) finish(c *Config) {
	if len(c.Detectors) == 0 {
		c.Detectors = []Detector{DefaultDetector()}
	}
	if c.NodeName == "" {
		short, _, _ := strings.Cut(l.opts.Hostname, ".")
		c.NodeName = short
		l.nodeFromHost = true
	}
}

// isBad reports whether key, or a key inside it, had a value rejected while
// a file was applied; its merged value is then not checked again.
func (l *loader) isBad(key string) bool {
	if l.bad[key] {
		return true
	}
	for k := range l.bad {
		if strings.HasPrefix(k, key+".") || strings.HasPrefix(k, key+"[") {
			return true
		}
	}
	return false
}

// report adds a problem of the merged result involving keys, placed at the
// file and line that last set one of them.
func (l *loader) report(keys []string, format string, args ...any) {
	for _, k := range keys {
		if l.isBad(k) {
			return
		}
	}
	file, line, key := l.place(keys...)
	l.add(Problem{File: file, Line: line, Key: key, Msg: fmt.Sprintf(format, args...)})
}

func (l *loader) check(ok bool, key string, format string, args ...any) {
	if !ok {
		l.report([]string{key}, format, args...)
	}
}

func (l *loader) validate(c *Config) {
	l.validateTop(c)
	l.validateDurations(reflect.ValueOf(c).Elem(), "")
	for i := range c.Detectors {
		l.validateDetector(c.Detectors[i], "detector["+strconv.Itoa(i)+"]")
	}
	l.validateHealth(c)
	l.validateEtcd(c)
	l.validateLock(c)
	l.validatePolicy(c)
	l.validateWindows(c)
	l.validateReboot(c)
	l.validateSystemd(c)
	l.check(c.Metrics.Textfile == "" || filepath.IsAbs(c.Metrics.Textfile), "metrics.textfile", "must be an absolute path or \"\"")
	l.path(c.Paths.KillSwitch, "paths.kill_switch")
	l.path(c.Paths.StateDir, "paths.state_dir")
	l.path(c.Paths.RunDir, "paths.run_dir")
	l.path(c.Paths.BootID, "paths.boot_id")
	l.path(c.Paths.OSRelease, "paths.os_release")
	l.path(c.Paths.BootDir, "paths.boot_dir")
}

func (l *loader) validateTop(c *Config) {
	switch {
	case c.NodeName == "":
		l.check(false, "node_name", "not set, and no host name is known to default to")
	case l.nodeFromHost:
		l.check(NamePattern.MatchString(c.NodeName), "node_name",
			"not set, and the short host name %q is not a valid node name (%s); set node_name", clip(c.NodeName), NamePattern)
	default:
		l.name(c.NodeName, "node_name")
	}
	l.name(c.Cluster, "cluster")
	l.check(c.AliveTTL >= minAliveTTL, "alive_ttl", "must be at least %s (it should cover about 3 timer intervals), not %s", minAliveTTL, c.AliveTTL)
	l.check(c.HistoryTTL >= minLeaseTTL, "history_ttl", "must be at least %s, not %s", minLeaseTTL, c.HistoryTTL)
}

// validateDurations bounds every Duration of the schema from above.
func (l *loader) validateDurations(rv reflect.Value, prefix string) {
	t := rv.Type()
	for i := 0; i < t.NumField(); i++ {
		tag := t.Field(i).Tag.Get("toml")
		if tag == "" || tag == "-" {
			continue
		}
		key := joinKey(prefix, tag)
		fv := rv.Field(i)
		switch {
		case fv.Type() == durationType:
			d := Duration(fv.Int())
			l.check(d <= maxDuration, key, "%s is too long (at most %s)", d, maxDuration)
		case fv.Type() == detectorsType:
			for j := 0; j < fv.Len(); j++ {
				l.validateDurations(fv.Index(j), key+"["+strconv.Itoa(j)+"]")
			}
		case fv.Kind() == reflect.Struct:
			l.validateDurations(fv, key)
		}
	}
}

func (l *loader) validateDetector(d Detector, key string) {
	k := func(s string) string { return key + "." + s }
	unused := func(set bool, field, usedBy string) {
		l.check(!set, k(field), "is only used by detectors of type %s, not %q", usedBy, d.Type)
	}
	l.check(d.Timeout > 0, k("timeout"), "must be greater than 0")
	switch d.Type {
	case DetectorFile, DetectorCommand, DetectorKernel, DetectorNeedrestart, DetectorAuto:
	default:
		if d.Type == "" {
			l.check(false, k("type"), "is required (file, command, kernel, needrestart or auto)")
		} else {
			l.check(false, k("type"), "must be one of file, command, kernel, needrestart, auto; not %q", clip(d.Type))
		}
		return
	}
	if d.Type != DetectorFile {
		unused(d.Path != "", "path", DetectorFile)
	}
	if d.Type != DetectorCommand {
		unused(len(d.Cmd) > 0, "cmd", DetectorCommand)
		unused(len(d.NeededExitCodes) > 0, "needed_exit_codes", DetectorCommand)
		unused(len(d.NotNeededExitCodes) > 0, "not_needed_exit_codes", DetectorCommand)
	}
	switch d.Type {
	case DetectorFile:
		if d.Path == "" {
			l.check(false, k("path"), "is required for a detector of type file")
		} else {
			l.path(d.Path, k("path"))
		}
	case DetectorCommand:
		l.argv(d.Cmd, k("cmd"), true)
		l.exitCodes(d.NeededExitCodes, k("needed_exit_codes"))
		l.exitCodes(d.NotNeededExitCodes, k("not_needed_exit_codes"))
		needed := map[int]bool{}
		for _, c := range d.NeededExitCodes {
			needed[c] = true
		}
		for _, c := range d.NotNeededExitCodes {
			if needed[c] {
				l.report([]string{k("not_needed_exit_codes"), k("needed_exit_codes")},
					"exit code %d is in both needed_exit_codes and not_needed_exit_codes", c)
				break
			}
		}
	}
}

func (l *loader) exitCodes(codes []int, key string) {
	if len(codes) == 0 {
		l.check(false, key, "must not be empty for a detector of type command: both the codes that mean needed and those that mean not needed are explicit")
		return
	}
	for i, c := range codes {
		l.check(c >= 0 && c <= 255, key+"["+strconv.Itoa(i)+"]", "exit code %d is outside 0..255", c)
	}
}

func (l *loader) validateHealth(c *Config) {
	h := c.Health
	l.check(h.Script == "" || filepath.IsAbs(h.Script), "health.script", "must be an absolute path or \"\", not %q", clip(h.Script))
	l.check(h.Timeout > 0, "health.timeout", "must be greater than 0")
	for i, s := range h.HealthyStates {
		l.check(systemStates[s], "health.healthy_states["+strconv.Itoa(i)+"]",
			"%q is not a systemd SystemState (initializing, starting, running, degraded, maintenance, stopping, offline, unknown)", clip(s))
	}
	if len(h.NodeHealthCommand) > 0 {
		l.argv(h.NodeHealthCommand, "health.node_health_command", false)
	}
}

func (l *loader) validateLock(c *Config) {
	k := c.Lock
	l.check(k.TTL >= minLeaseTTL, "lock.ttl", "must be at least %s, not %s", minLeaseTTL, k.TTL)
	if k.TTL <= c.Health.Timeout {
		l.report([]string{"lock.ttl", "health.timeout"},
			"lock.ttl (%s) must exceed health.timeout (%s): the holder's lease must outlive a health script run", k.TTL, c.Health.Timeout)
	}
	l.check(k.MaxConcurrent >= 1, "lock.max_concurrent", "must be at least 1, not %d", k.MaxConcurrent)
	l.check(k.MaxConcurrent <= maxMaxConcurrent, "lock.max_concurrent", "%d is too large (at most %d)", k.MaxConcurrent, maxMaxConcurrent)
	l.check(k.MaxHoldWait > 0, "lock.max_hold_wait", "must be greater than 0")
	l.check(k.BackoffMin > 0, "lock.backoff_min", "must be greater than 0")
	l.check(k.BackoffMax > 0, "lock.backoff_max", "must be greater than 0")
	if k.BackoffMin > k.BackoffMax {
		l.report([]string{"lock.backoff_min", "lock.backoff_max"},
			"lock.backoff_min (%s) must not exceed lock.backoff_max (%s)", k.BackoffMin, k.BackoffMax)
	}
	l.check(k.MaxRebootDuration > 0, "lock.max_reboot_duration", "must be greater than 0")
	l.check(k.SlotExpiry == SlotExpiryFreeze || k.SlotExpiry == SlotExpiryRelease, "lock.slot_expiry",
		"must be %q or %q, not %q", SlotExpiryFreeze, SlotExpiryRelease, clip(k.SlotExpiry))
}

func (l *loader) validatePolicy(c *Config) {
	p := c.Policy
	f := p.MinHealthyFraction
	l.check(!math.IsNaN(f) && f >= 0 && f <= 1, "policy.min_healthy_fraction", "must be between 0 and 1, not %v", f)
	l.check(p.MinHealthyAbsolute >= 0 && p.MinHealthyAbsolute <= maxNodes, "policy.min_healthy_absolute",
		"must be between 0 and %d, not %d", maxNodes, p.MinHealthyAbsolute)
	l.check(p.ExpectedNodes >= 0 && p.ExpectedNodes <= maxNodes, "policy.expected_nodes",
		"must be between 0 and %d (0: the number of registered members), not %d", maxNodes, p.ExpectedNodes)
	if p.ExpectedNodes > 0 && p.MinHealthyAbsolute >= p.ExpectedNodes {
		l.report([]string{"policy.min_healthy_absolute", "policy.expected_nodes"},
			"policy.min_healthy_absolute (%d) must be below policy.expected_nodes (%d), or no node could ever reboot",
			p.MinHealthyAbsolute, p.ExpectedNodes)
	}
	seen := map[string]bool{}
	for i, n := range p.FallbackNodes {
		key := "policy.fallback_nodes[" + strconv.Itoa(i) + "]"
		l.check(NamePattern.MatchString(n), key, "%q is not a valid node name (%s)", clip(n), NamePattern)
		l.check(!seen[n], key, "%q is listed twice", clip(n))
		seen[n] = true
	}
	l.check(p.MaxRebootsPerReason >= 1 && p.MaxRebootsPerReason <= maxRebootsReason, "policy.max_reboots_per_reason",
		"must be between 1 and %d, not %d", maxRebootsReason, p.MaxRebootsPerReason)
}

func (l *loader) validateWindows(c *Config) {
	w := c.Windows
	if w.Timezone == "" {
		l.check(false, "windows.timezone", "must not be empty (\"Local\" means the system's zone)")
	} else if _, err := time.LoadLocation(w.Timezone); err != nil {
		l.check(false, "windows.timezone", "unknown time zone %q", clip(w.Timezone))
	}
	for _, list := range []struct {
		key   string
		specs []string
	}{{"windows.allow", w.Allow}, {"windows.deny", w.Deny}} {
		for i, s := range list.specs {
			key := list.key + "[" + strconv.Itoa(i) + "]"
			if strings.TrimSpace(s) == "" {
				l.check(false, key, "must not be empty")
				continue
			}
			if l.opts.ValidateWindow != nil {
				if err := l.opts.ValidateWindow(s); err != nil {
					l.check(false, key, "%s", clip(err.Error()))
				}
			}
		}
	}
}

func (l *loader) validateReboot(c *Config) {
	r := c.Reboot
	switch r.Method {
	case RebootLogind:
	case RebootCommand:
		if len(r.Command) == 0 {
			l.report([]string{"reboot.command", "reboot.method"}, "reboot.method = \"command\" needs a non-empty reboot.command")
		} else {
			l.argv(r.Command, "reboot.command", false)
		}
	default:
		l.check(false, "reboot.method", "must be %q or %q, not %q", RebootLogind, RebootCommand, clip(r.Method))
	}
	l.check(len(r.WallMessage) <= maxWallMessage, "reboot.wall_message", "is too long (%d bytes; at most %d)", len(r.WallMessage), maxWallMessage)
	l.check(r.Timeout > 0, "reboot.timeout", "must be greater than 0")
}

func (l *loader) validateSystemd(c *Config) {
	s := c.Systemd
	l.check(s.Holder == HolderTransient || s.Holder == HolderForeground, "systemd.holder",
		"must be %q or %q, not %q", HolderTransient, HolderForeground, clip(s.Holder))
	l.check(validUnit(s.HolderUnit), "systemd.holder_unit", "%q is not a valid service unit name (NAME.service)", clip(s.HolderUnit))
	l.check(s.DBusTimeout > 0, "systemd.dbus_timeout", "must be greater than 0")
}

// name checks a value that becomes an etcd key segment.
func (l *loader) name(v, key string) {
	l.check(NamePattern.MatchString(v), key, "%q is not a valid name (%s): it becomes an etcd key segment", clip(v), NamePattern)
}

// path checks a required absolute path.
func (l *loader) path(v, key string) {
	l.check(filepath.IsAbs(v), key, "must be an absolute path, not %q", clip(v))
}

// argv checks a command line: a program that is an absolute path or a bare
// name (looked up in a safe PATH).
func (l *loader) argv(argv []string, key string, required bool) {
	if len(argv) == 0 {
		l.check(!required, key, "must not be empty")
		return
	}
	p := argv[0]
	l.check(p != "" && (filepath.IsAbs(p) || !strings.Contains(p, "/")), key+"[0]",
		"the program must be an absolute path or a bare name looked up in PATH, not %q", clip(p))
}

func (l *loader) validateEtcd(c *Config) {
	e := c.Etcd
	if len(e.Endpoints) == 0 {
		l.check(false, "etcd.endpoints", "must not be empty")
	}
	seen := map[string]bool{}
	for i, ep := range e.Endpoints {
		key := "etcd.endpoints[" + strconv.Itoa(i) + "]"
		if err := checkEndpoint(ep); err != nil {
			l.check(false, key, "%s", err)
		}
		l.check(!seen[ep], key, "%q is listed twice", clip(ep))
		seen[ep] = true
	}
	l.check(e.DialTimeout > 0, "etcd.dial_timeout", "must be greater than 0")
	l.check(e.RequestTimeout > 0, "etcd.request_timeout", "must be greater than 0")
	if (e.Username == "") != (e.PasswordFile == "") {
		l.report([]string{"etcd.username", "etcd.password_file"}, "etcd.username and etcd.password_file go together: set both or neither")
	}
	if e.PasswordFile != "" {
		l.secretFile(e.PasswordFile, "etcd.password_file")
	}
	t := e.TLS
	if (t.CertFile == "") != (t.KeyFile == "") {
		l.report([]string{"etcd.tls.cert_file", "etcd.tls.key_file"}, "etcd.tls.cert_file and etcd.tls.key_file go together: set both or neither")
	}
	if t.CAFile != "" {
		l.readable(t.CAFile, "etcd.tls.ca_file")
	}
	if t.CertFile != "" {
		l.readable(t.CertFile, "etcd.tls.cert_file")
	}
	if t.KeyFile != "" {
		l.secretFile(t.KeyFile, "etcd.tls.key_file")
	}
}

// checkEndpoint accepts http:// and https:// URLs with a host and a port and
// nothing else (no credentials, path, query or fragment).
func checkEndpoint(ep string) error {
	u, err := url.Parse(ep)
	if err != nil {
		return fmt.Errorf("%q is not a URL", clip(ep))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%q: scheme must be http or https", clip(ep))
	}
	if u.User != nil {
		return fmt.Errorf("credentials in endpoint URLs are not allowed; use etcd.username and etcd.password_file")
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return fmt.Errorf("%q: only scheme://host:port is allowed", clip(ep))
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil || host == "" {
		return fmt.Errorf("%q: must name a host and a port (scheme://host:port)", clip(ep))
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%q: port must be 1..65535", clip(ep))
	}
	return nil
}

// readable checks that path is an absolute path to a readable regular file.
func (l *loader) readable(path, key string) (os.FileInfo, bool) {
	if !filepath.IsAbs(path) {
		l.check(false, key, "must be an absolute path, not %q", clip(path))
		return nil, false
	}
	shown := showPath(clip(path))
	fi, err := os.Stat(path)
	if err != nil {
		l.check(false, key, "%s: %s", shown, errText(err))
		return nil, false
	}
	if !fi.Mode().IsRegular() {
		l.check(false, key, "%s: %s", shown, notRegular(fi.Mode()))
		return nil, false
	}
	fh, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		l.check(false, key, "%s: %s", shown, errText(err))
		return nil, false
	}
	_ = fh.Close()
	return fi, true
}

// secretFile is readable plus: no permission bits for group or others.
func (l *loader) secretFile(path, key string) {
	fi, ok := l.readable(path, key)
	if !ok {
		return
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		l.check(false, key, "%s: mode %04o is too open; it holds a secret and must be 0600 or stricter", showPath(clip(path)), perm)
	}
}
