package config

import (
	"fmt"
	"strings"
	"time"
)

// Config is the effective configuration: the defaults, overlaid by the main
// file and then by every drop-in (see Load). The toml tags are the key names
// of DESIGN §5, the configuration contract.
//
// Fields marked "fixed for a hold" are read once by a running holder and are
// not changed by a SIGHUP re-read: node_name, cluster, etcd.*, lock.ttl and
// systemd.holder_unit.
type Config struct {
	// NodeName identifies this node in etcd keys (P/slots/<node>, ...).
	// Default: the short host name (Options.Hostname up to the first '.').
	// Must match ^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$. Fixed for a hold.
	NodeName string `toml:"node_name"`
	// Cluster is the lock group: etcd prefix /clusterrebootd/<cluster>.
	// Same syntax as NodeName. Fixed for a hold.
	Cluster string `toml:"cluster"`
	// DryRun does everything but the reboot itself; the slot is released at once.
	DryRun bool `toml:"dry_run"`
	// AliveTTL is the lease of P/alive/<node>, about 3 timer intervals; >= 1m.
	AliveTTL Duration `toml:"alive_ttl"`
	// HistoryTTL is the lease of the P/history entries.
	HistoryTTL Duration `toml:"history_ttl"`

	// Detectors is the [[detector]] array of tables. When no file configures
	// one, the effective list is a single detector of type "auto". Like every
	// array, a later file that sets [[detector]] replaces the whole list of
	// earlier files; it does not append to it.
	Detectors []Detector `toml:"detector"`

	Health  Health  `toml:"health"`
	Etcd    Etcd    `toml:"etcd"`
	Lock    Lock    `toml:"lock"`
	Policy  Policy  `toml:"policy"`
	Windows Windows `toml:"windows"`
	Reboot  Reboot  `toml:"reboot"`
	Systemd Systemd `toml:"systemd"`
	Metrics Metrics `toml:"metrics"`
	Paths   Paths   `toml:"paths"`

	// Files lists the files actually read by Load, in the order they were
	// applied (main file first). Not part of the TOML.
	Files []string `toml:"-"`
}

// Detector types.
const (
	DetectorFile        = "file"
	DetectorCommand     = "command"
	DetectorKernel      = "kernel"
	DetectorNeedrestart = "needrestart"
	DetectorAuto        = "auto"
)

// Detector is one [[detector]] entry.
type Detector struct {
	// Type is one of file | command | kernel | needrestart | auto.
	Type string `toml:"type"`
	// Path is the file whose existence means "reboot needed" (type file only;
	// absolute).
	Path string `toml:"path"`
	// Cmd is the argv run for type command; Cmd[0] is absolute or a bare name
	// looked up in a safe PATH.
	Cmd []string `toml:"cmd"`
	// NeededExitCodes and NotNeededExitCodes (type command only) are both
	// required, disjoint and within 0..255; any other exit code is "unknown".
	NeededExitCodes    []int `toml:"needed_exit_codes"`
	NotNeededExitCodes []int `toml:"not_needed_exit_codes"`
	// Timeout bounds one run of the detector. Default 60s.
	Timeout Duration `toml:"timeout"`
}

// Health is the [health] table.
type Health struct {
	// Script is the absolute path of the cluster health gate; "" means none
	// (only the built-in policies).
	Script string `toml:"script"`
	// Timeout bounds one run of the script; must be below lock.ttl.
	Timeout Duration `toml:"timeout"`
	// HealthyStates are the systemd SystemState values that count as
	// healthy; an empty list skips the systemd test.
	HealthyStates []string `toml:"healthy_states"`
	// NodeHealthCommand is an optional extra local test (argv), exit 0 = healthy.
	NodeHealthCommand []string `toml:"node_health_command"`
}

// Etcd is the [etcd] table. Fixed for a hold.
type Etcd struct {
	// Endpoints are http:// or https:// URLs with host and port. Default
	// ["http://127.0.0.1:2379"] (etcd's own default client URL); an explicitly
	// empty list is an error.
	Endpoints      []string `toml:"endpoints"`
	DialTimeout    Duration `toml:"dial_timeout"`
	RequestTimeout Duration `toml:"request_timeout"`
	// Username and PasswordFile enable etcd authentication; both or neither.
	// The password file must be a regular file with mode 0600 or stricter.
	// Inline passwords are not accepted anywhere.
	Username     string `toml:"username"`
	PasswordFile string `toml:"password_file"`
	TLS          TLS    `toml:"tls"`
}

// TLS is the [etcd.tls] table. Files must be readable regular files; the key
// file must have mode 0600 or stricter; cert_file and key_file go together.
type TLS struct {
	CAFile     string `toml:"ca_file"`
	CertFile   string `toml:"cert_file"`
	KeyFile    string `toml:"key_file"`
	ServerName string `toml:"server_name"`
}

// Slot expiry modes.
const (
	SlotExpiryFreeze  = "freeze"
	SlotExpiryRelease = "release"
)

// Lock is the [lock] table.
type Lock struct {
	// TTL is the holder's session lease; must exceed health.timeout. Fixed
	// for a hold.
	TTL           Duration `toml:"ttl"`
	MaxConcurrent int      `toml:"max_concurrent"`
	// MaxHoldWait bounds a holder's life; the next tick starts another.
	MaxHoldWait Duration `toml:"max_hold_wait"`
	// BackoffMin <= BackoffMax bound the full-jitter retry backoff.
	BackoffMin Duration `toml:"backoff_min"`
	BackoffMax Duration `toml:"backoff_max"`
	// MaxRebootDuration sets the slot deadline.
	MaxRebootDuration Duration `toml:"max_reboot_duration"`
	// SlotExpiry is freeze | release.
	SlotExpiry string `toml:"slot_expiry"`
}

// Policy is the [policy] table: the built-in cluster policies.
type Policy struct {
	// MinHealthyFraction is in [0,1].
	MinHealthyFraction float64 `toml:"min_healthy_fraction"`
	MinHealthyAbsolute int     `toml:"min_healthy_absolute"`
	// ExpectedNodes is the cluster size; 0 means the number of registered members.
	ExpectedNodes int      `toml:"expected_nodes"`
	FallbackNodes []string `toml:"fallback_nodes"`
	// ForbidIfOnlyFallbackLeft refuses a reboot that would leave only fallback nodes healthy.
	ForbidIfOnlyFallbackLeft bool `toml:"forbid_if_only_fallback_left"`
	// PostBootSoak is how long health must hold after boot before the slot
	// is released; 0 is allowed.
	PostBootSoak        Duration `toml:"post_boot_soak"`
	MaxRebootsPerReason int      `toml:"max_reboots_per_reason"`
}

// Windows is the [windows] table. Entry syntax is checked by
// Options.ValidateWindow.
type Windows struct {
	// Timezone is "Local" or an IANA name.
	Timezone string   `toml:"timezone"`
	Allow    []string `toml:"allow"`
	Deny     []string `toml:"deny"`
	// ExpectedRebootDuration: a reboot is not started when it would run past
	// the end of the open allow window. 0 disables that test.
	ExpectedRebootDuration Duration `toml:"expected_reboot_duration"`
}

// Reboot methods.
const (
	RebootLogind  = "logind"
	RebootCommand = "command"
)

// Reboot is the [reboot] table.
type Reboot struct {
	// Method is logind | command.
	Method string `toml:"method"`
	// Command is the argv for method "command" (required there).
	Command     []string `toml:"command"`
	WallMessage string   `toml:"wall_message"`
	// RespectInhibitors: logind "block" shutdown inhibitors postpone the reboot.
	RespectInhibitors bool `toml:"respect_inhibitors"`
	// Timeout bounds the reboot command or the logind D-Bus call. Addition
	// to DESIGN §5; default 60s.
	Timeout Duration `toml:"timeout"`
}

// Holder modes.
const (
	HolderTransient  = "transient"
	HolderForeground = "foreground"
)

// Systemd is the [systemd] table.
type Systemd struct {
	// Holder is transient (StartTransientUnit) | foreground (check runs the
	// holder in-process).
	Holder string `toml:"holder"`
	// HolderUnit is the transient unit's name; must end in ".service".
	// Fixed for a hold.
	HolderUnit string `toml:"holder_unit"`
	// Watchdog is the holder unit's WatchdogSec; 0 disables it.
	Watchdog Duration `toml:"watchdog"`
	// DBusTimeout bounds every systemd D-Bus call. Addition to DESIGN §5;
	// default 10s.
	DBusTimeout Duration `toml:"dbus_timeout"`
}

// Metrics is the [metrics] table.
type Metrics struct {
	// Textfile is the Prometheus text file (absolute); "" disables it.
	Textfile string `toml:"textfile"`
}

// Paths is the [paths] table: every host path, all absolute.
type Paths struct {
	KillSwitch string `toml:"kill_switch"`
	StateDir   string `toml:"state_dir"`
	RunDir     string `toml:"run_dir"`
	BootID     string `toml:"boot_id"`
	OSRelease  string `toml:"os_release"`
	// BootDir is where the kernel detector looks for installed kernels.
	// Addition to DESIGN §5; default "/boot".
	BootDir string `toml:"boot_dir"`
}

// DefaultDetectorTimeout is the timeout of a detector that sets none.
const DefaultDetectorTimeout = Duration(60 * time.Second)

// DefaultDetector returns the detector used when none is configured.
func DefaultDetector() Detector {
	return Detector{
		Type:               DetectorAuto,
		Cmd:                []string{},
		NeededExitCodes:    []int{},
		NotNeededExitCodes: []int{},
		Timeout:            DefaultDetectorTimeout,
	}
}

// newDetector is the starting point of a configured [[detector]] entry:
// everything empty except the default timeout.
func newDetector() Detector {
	return Detector{
		Cmd:                []string{},
		NeededExitCodes:    []int{},
		NotNeededExitCodes: []int{},
		Timeout:            DefaultDetectorTimeout,
	}
}

// Default returns the configuration with every default of DESIGN §5 (plus
// the documented additions). NodeName is empty: Load fills it in from
// Options.Hostname. Detectors is empty: Load puts in one "auto" detector
// when no file configures any.
func Default() Config {
	return Config{
		NodeName:   "",
		Cluster:    "default",
		DryRun:     false,
		AliveTTL:   Duration(15 * time.Minute),
		HistoryTTL: Duration(720 * time.Hour),
		Detectors:  []Detector{},
		Health: Health{
			Script:            "",
			Timeout:           Duration(30 * time.Second),
			HealthyStates:     []string{"running"},
			NodeHealthCommand: []string{},
		},
		Etcd: Etcd{
			Endpoints:      []string{"http://127.0.0.1:2379"},
			DialTimeout:    Duration(5 * time.Second),
			RequestTimeout: Duration(5 * time.Second),
		},
		Lock: Lock{
			TTL:               Duration(90 * time.Second),
			MaxConcurrent:     1,
			MaxHoldWait:       Duration(6 * time.Hour),
			BackoffMin:        Duration(5 * time.Second),
			BackoffMax:        Duration(60 * time.Second),
			MaxRebootDuration: Duration(30 * time.Minute),
			SlotExpiry:        SlotExpiryFreeze,
		},
		Policy: Policy{
			MinHealthyFraction:       0,
			MinHealthyAbsolute:       0,
			ExpectedNodes:            0,
			FallbackNodes:            []string{},
			ForbidIfOnlyFallbackLeft: true,
			PostBootSoak:             0,
			MaxRebootsPerReason:      1,
		},
		Windows: Windows{
			Timezone:               "Local",
			Allow:                  []string{},
			Deny:                   []string{},
			ExpectedRebootDuration: Duration(10 * time.Minute),
		},
		Reboot: Reboot{
			Method:            RebootLogind,
			Command:           []string{},
			WallMessage:       "clusterrebootd: coordinated reboot ({reason})",
			RespectInhibitors: true,
			Timeout:           Duration(60 * time.Second),
		},
		Systemd: Systemd{
			Holder:      HolderTransient,
			HolderUnit:  "clusterrebootd-hold.service",
			Watchdog:    Duration(30 * time.Second),
			DBusTimeout: Duration(10 * time.Second),
		},
		Metrics: Metrics{
			Textfile: "/var/lib/prometheus/node-exporter/clusterrebootd.prom",
		},
		Paths: Paths{
			KillSwitch: "/etc/clusterrebootd/disable",
			StateDir:   "/var/lib/clusterrebootd",
			RunDir:     "/run/clusterrebootd",
			BootID:     "/proc/sys/kernel/random/boot_id",
			OSRelease:  "/etc/os-release",
			BootDir:    "/boot",
		},
	}
}

// Duration is a time.Duration written in TOML as a string such as "90s" or
// "1h30m" (time.ParseDuration syntax). Negative durations are rejected.
type Duration time.Duration

// Std returns d as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// String formats d like time.Duration but without zero trailing units:
// "1m30s", "15m", "720h", "0s".
func (d Duration) String() string {
	s := time.Duration(d).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("not a duration (examples: \"90s\", \"15m\", \"1h30m\"): %q", b)
	}
	if v < 0 {
		return fmt.Errorf("must not be negative: %q", b)
	}
	*d = Duration(v)
	return nil
}
