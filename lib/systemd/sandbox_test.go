package systemd

import (
	"bufio"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// busSignatures are the D-Bus types systemd's transient unit API takes for
// each property (org.freedesktop.systemd1(5), dbus-execute.c). A wrong type
// makes StartTransientUnit fail, and with it every holder.
var busSignatures = map[string]string{
	"ProtectSystem": "s", "ProtectHome": "s", "ReadWritePaths": "as", "ReadOnlyPaths": "as",
	"PrivateTmp": "b", "PrivateMounts": "b", "NoNewPrivileges": "b", "RestrictSUIDSGID": "b",
	"ProtectKernelModules": "b", "ProtectKernelLogs": "b", "ProtectClock": "b", "ProtectHostname": "b",
	"RestrictAddressFamilies": "(bas)", "RestrictNamespaces": "t", "RestrictRealtime": "b",
	"LockPersonality": "b", "SystemCallArchitectures": "as", "SystemCallFilter": "(bas)",
	"SystemCallErrorNumber": "i", "CapabilityBoundingSet": "t", "UMask": "u",
}

func TestSandboxSignatures(t *testing.T) {
	h := newHolder("")
	props := h.sandbox()
	if len(props) != len(busSignatures) {
		t.Fatalf("%d sandbox properties, %d known signatures", len(props), len(busSignatures))
	}
	for _, p := range props {
		want, ok := busSignatures[p.Name]
		if !ok {
			t.Errorf("%s: no known D-Bus signature", p.Name)
			continue
		}
		if got := p.Value.Signature().String(); got != want {
			t.Errorf("%s has D-Bus type %s, systemd wants %s", p.Name, got, want)
		}
	}
}

func TestSandboxReadWritePaths(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want []string
	}{
		{nil, []string{"-/var/lib/clusterrebootd", "-/run/clusterrebootd", "-/var/lib/prometheus/node-exporter"}},
		{[]string{"/srv/state", "-/run/x"}, []string{"-/srv/state", "-/run/x"}},
		{[]string{}, []string{}},
	} {
		h := newHolder("")
		h.ReadWritePaths = tc.in
		var got any
		for _, p := range h.sandbox() {
			if p.Name == "ReadWritePaths" {
				got = p.Value.Value()
			}
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ReadWritePaths %v → %v, want %v", tc.in, got, tc.want)
		}
	}
}

// TestSandboxMatchesCheckUnit keeps the holder's sandbox and the hardening
// of units/clusterrebootd-check.service the same: every directive of the
// unit's [Service] section (except the ones about what the unit runs and
// where it writes) must be a holder property with the same value.
func TestSandboxMatchesCheckUnit(t *testing.T) {
	f, err := os.Open("../../units/clusterrebootd-check.service")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	notSandbox := map[string]bool{"Type": true, "ExecStart": true, "SuccessExitStatus": true, "TimeoutStartSec": true,
		"SyslogIdentifier": true, "StateDirectory": true, "StateDirectoryMode": true, "RuntimeDirectory": true,
		"RuntimeDirectoryMode": true, "RuntimeDirectoryPreserve": true, "ReadWritePaths": true}
	props := map[string]any{}
	for _, p := range newHolder("").sandbox() {
		props[p.Name] = p.Value.Value()
	}
	seen := map[string]bool{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "[") {
			section = line
			continue
		}
		k, v, _ := strings.Cut(line, "=")
		if section != "[Service]" {
			continue
		}
		if k == "ReadWritePaths" {
			for _, p := range strings.Fields(v) {
				if !contains(DefaultReadWritePaths, strings.TrimPrefix(p, "-")) {
					t.Errorf("the check unit writes %s, the holder may not", p)
				}
			}
		}
		if notSandbox[k] {
			continue
		}
		seen[k] = true
		got, ok := props[k]
		if !ok {
			t.Errorf("the check unit sets %s=%s; the holder's sandbox lacks it", k, v)
			continue
		}
		if want := unitValue(t, k, v); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: holder %#v, check unit %s (%#v)", k, got, v, want)
		}
	}
	for k := range props {
		if !seen[k] && k != "ReadWritePaths" {
			t.Errorf("the holder sets %s; the check unit does not", k)
		}
	}
}

// unitValue converts a unit file value to what the holder sends over D-Bus.
func unitValue(t *testing.T, key, v string) any {
	switch key {
	case "ProtectSystem", "ProtectHome":
		return v
	case "ReadOnlyPaths", "SystemCallArchitectures":
		return strings.Fields(v)
	case "RestrictAddressFamilies", "SystemCallFilter":
		return allowList{true, strings.Fields(v)}
	case "RestrictNamespaces":
		if v != "yes" {
			t.Fatalf("RestrictNamespaces=%s: only yes is mapped", v)
		}
		return uint64(0)
	case "SystemCallErrorNumber":
		if v != "EPERM" {
			t.Fatalf("SystemCallErrorNumber=%s: only EPERM is mapped", v)
		}
		return int32(unix.EPERM)
	case "UMask":
		n, err := strconv.ParseUint(v, 8, 32)
		if err != nil {
			t.Fatal(err)
		}
		return uint32(n)
	case "CapabilityBoundingSet":
		if !strings.HasPrefix(v, "~") {
			t.Fatalf("CapabilityBoundingSet=%s: only ~ lists are mapped", v)
		}
		m := ^uint64(0)
		for _, name := range strings.Fields(strings.TrimPrefix(v, "~")) {
			n, ok := capNumbers[name]
			if !ok {
				t.Fatalf("capability %s: add it to capNumbers", name)
			}
			m &^= 1 << n
		}
		return m
	}
	b, err := strconv.ParseBool(strings.Replace(strings.Replace(v, "yes", "true", 1), "no", "false", 1))
	if err != nil {
		t.Fatalf("%s=%s: not a boolean; map it in unitValue", key, v)
	}
	return b
}

// capNumbers are the kernel's numbers (from x/sys/unix, not from sandbox.go).
var capNumbers = map[string]int{
	"CAP_MAC_ADMIN": unix.CAP_MAC_ADMIN, "CAP_MAC_OVERRIDE": unix.CAP_MAC_OVERRIDE, "CAP_SYS_MODULE": unix.CAP_SYS_MODULE,
	"CAP_SYS_TIME": unix.CAP_SYS_TIME, "CAP_SYS_BOOT": unix.CAP_SYS_BOOT, "CAP_WAKE_ALARM": unix.CAP_WAKE_ALARM,
	"CAP_SYSLOG": unix.CAP_SYSLOG, "CAP_AUDIT_CONTROL": unix.CAP_AUDIT_CONTROL, "CAP_BPF": unix.CAP_BPF,
	"CAP_PERFMON": unix.CAP_PERFMON, "CAP_SYS_PACCT": unix.CAP_SYS_PACCT, "CAP_LINUX_IMMUTABLE": unix.CAP_LINUX_IMMUTABLE,
	"CAP_MKNOD": unix.CAP_MKNOD, "CAP_LEASE": unix.CAP_LEASE, "CAP_BLOCK_SUSPEND": unix.CAP_BLOCK_SUSPEND,
	"CAP_SYS_CHROOT": unix.CAP_SYS_CHROOT, "CAP_SYS_TTY_CONFIG": unix.CAP_SYS_TTY_CONFIG, "CAP_IPC_LOCK": unix.CAP_IPC_LOCK,
	"CAP_KILL": unix.CAP_KILL, "CAP_SYS_ADMIN": unix.CAP_SYS_ADMIN,
}

func TestBoundingSetKeepsWhatTheHolderNeeds(t *testing.T) {
	m := boundingSet()
	for _, c := range []int{unix.CAP_KILL, unix.CAP_SYS_ADMIN, unix.CAP_DAC_OVERRIDE, unix.CAP_NET_ADMIN, unix.CAP_SYS_RESOURCE, unix.CAP_SETUID} {
		if m&(1<<c) == 0 {
			t.Errorf("capability %d dropped", c)
		}
	}
	if m&(1<<unix.CAP_SYS_BOOT) != 0 {
		t.Error("CAP_SYS_BOOT kept")
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
