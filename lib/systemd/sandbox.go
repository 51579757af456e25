package systemd

import (
	"strings"

	sd "github.com/coreos/go-systemd/v22/dbus"
)

// DefaultReadWritePaths are the paths the holder may write when
// TransientHolder.ReadWritePaths is nil: the default state_dir and run_dir
// and node_exporter's textfile directory (DESIGN §5).
var DefaultReadWritePaths = []string{"/var/lib/clusterrebootd", "/run/clusterrebootd", "/var/lib/prometheus/node-exporter"}

// Linux capability numbers (linux/capability.h) of the capabilities the
// holder's bounding set drops.
const (
	capLinuxImmutable = 9
	capIPCLock        = 14
	capSysModule      = 16
	capSysChroot      = 18
	capSysPacct       = 20
	capSysBoot        = 22
	capSysTime        = 25
	capSysTTYConfig   = 26
	capMknod          = 27
	capLease          = 28
	capAuditControl   = 30
	capMacOverride    = 32
	capMacAdmin       = 33
	capSyslog         = 34
	capWakeAlarm      = 35
	capBlockSuspend   = 36
	capPerfmon        = 38
	capBPF            = 39
)

// droppedCaps is the same list as CapabilityBoundingSet=~ in
// units/clusterrebootd-check.service.
var droppedCaps = []uint{capMacAdmin, capMacOverride, capSysModule, capSysTime, capSysBoot, capWakeAlarm,
	capSyslog, capAuditControl, capBPF, capPerfmon, capSysPacct, capLinuxImmutable, capMknod, capLease,
	capBlockSuspend, capSysChroot, capSysTTYConfig, capIPCLock}

// boundingSet is every capability except droppedCaps (bits the kernel does
// not know are ignored by systemd).
func boundingSet() uint64 {
	m := ^uint64(0)
	for _, c := range droppedCaps {
		m &^= 1 << c
	}
	return m
}

// allowList is the D-Bus (bas) of RestrictAddressFamilies= and
// SystemCallFilter=: true makes the list an allow list.
type allowList struct {
	Allow bool
	Items []string
}

// sandbox are the hardening properties of the holder unit: the sandbox of
// units/clusterrebootd-check.service, so that the health script and the
// detectors run under the same rules under the lock as before it (a script
// that passes pre-lock is not refused under-lock by a different sandbox).
// Each line says why; docs/security.md has the reasoning and the
// systemd-analyze numbers. Every property exists in systemd >= 245.
func (h *TransientHolder) sandbox() []sd.Property {
	rw := h.ReadWritePaths
	if rw == nil {
		rw = DefaultReadWritePaths
	}
	writable := make([]string, 0, len(rw))
	for _, p := range rw {
		// "-": a missing path is ignored instead of failing the unit.
		writable = append(writable, "-"+strings.TrimPrefix(p, "-"))
	}
	return []sd.Property{
		// Everything read-only but the holder's state, run and metrics dirs.
		prop("ProtectSystem", "strict"),
		prop("ReadWritePaths", writable),
		// /proc/sys and /sys read-only without hiding the per-container
		// boot_id mount (what ProtectKernelTunables= would do).
		prop("ReadOnlyPaths", []string{"/proc/sys", "-/proc/sysrq-trigger", "-/proc/irq", "-/proc/bus", "-/proc/fs", "-/proc/acpi", "/sys"}),
		// A health script may read /root, never write it.
		prop("ProtectHome", "read-only"),
		// Private /tmp and /var/tmp, and mounts that never reach the host.
		prop("PrivateTmp", true),
		prop("PrivateMounts", true),
		// No setuid/setgid or file-capability gains for anything it runs.
		prop("NoNewPrivileges", true),
		prop("RestrictSUIDSGID", true),
		// No module loading, kernel log, clock or host name changes.
		prop("ProtectKernelModules", true),
		prop("ProtectKernelLogs", true),
		prop("ProtectClock", true),
		prop("ProtectHostname", true),
		// etcd over TCP, D-Bus and journald over AF_UNIX, netlink for `ip`.
		prop("RestrictAddressFamilies", allowList{true, []string{"AF_UNIX", "AF_INET", "AF_INET6", "AF_NETLINK"}}),
		// No namespaces (0: none allowed), realtime, personality changes.
		prop("RestrictNamespaces", uint64(0)),
		prop("RestrictRealtime", true),
		prop("LockPersonality", true),
		prop("SystemCallArchitectures", []string{"native"}),
		// Ordinary service syscalls; no @reboot: the reboot goes through
		// logind (or `systemctl reboot`) over D-Bus, never reboot(2).
		prop("SystemCallFilter", allowList{true, []string{"@system-service"}}),
		prop("SystemCallErrorNumber", int32(1)), // EPERM
		// Drops what no holder, detector or script needs (CAP_SYS_BOOT
		// included: logind checks the caller's uid, not the capability).
		prop("CapabilityBoundingSet", boundingSet()),
		// Files private by default; clusterrebootd sets its files' modes.
		prop("UMask", uint32(0o077)),
	}
}
