#!/bin/bash
# verify-units.sh: `systemd-analyze verify` for units/clusterrebootd-check.{service,timer},
# a syntax check of units/clusterrebootd.tmpfiles, and the service's
# `systemd-analyze security` exposure (fails above $MAX_EXPOSURE).
#
#   hack/e2e/verify-units.sh                 # builds the binary into a temp root
#   CLUSTERREBOOTD_BIN=bin/clusterrebootd hack/e2e/verify-units.sh
#
# The host need not run systemd as PID 1 (CI containers and these machines do
# not): everything runs offline against a throw-away root directory holding
# the binary at /usr/bin/clusterrebootd (verify checks ExecStart= is
# executable), the units, and the system's own unit files (sysinit.target,
# network-online.target, ...) copied from the host or, when the host has none,
# from the e2e node root file system (hack/e2e/rootfs.sh).
# Needs systemd-analyze and systemd-tmpfiles (package systemd) on the host.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
MAX_EXPOSURE=${MAX_EXPOSURE:-50} # systemd-analyze security --threshold: 0..100, 50 = "5.0"

for tool in systemd-analyze systemd-tmpfiles; do
	command -v "$tool" >/dev/null || { echo "verify-units: $tool missing (apt-get install systemd)" >&2; exit 1; }
done

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/usr/bin" "$root/usr/lib/systemd/system" "$root/usr/lib/tmpfiles.d" "$root/etc"

# The system's units, for the dependencies our units name.
sysunits=
for d in /usr/lib/systemd/system /lib/systemd/system; do
	if [ -e "$d/sysinit.target" ]; then sysunits=$d; break; fi
done
if [ -z "$sysunits" ]; then
	rootfs=$("$here/rootfs.sh")
	sysunits=$rootfs/usr/lib/systemd/system
fi
cp -a "$sysunits/." "$root/usr/lib/systemd/system/"

if [ -n "${CLUSTERREBOOTD_BIN:-}" ]; then
	install -m 0755 "$CLUSTERREBOOTD_BIN" "$root/usr/bin/clusterrebootd"
else
	(cd "$repo" && CGO_ENABLED=0 go build -trimpath -o "$root/usr/bin/clusterrebootd" ./cmd/clusterrebootd)
fi
install -m 0644 "$repo/units/clusterrebootd-check.service" "$repo/units/clusterrebootd-check.timer" "$root/usr/lib/systemd/system/"
install -m 0644 "$repo/units/clusterrebootd.tmpfiles" "$root/usr/lib/tmpfiles.d/clusterrebootd.conf"

echo "verify-units: systemd-analyze verify ($(systemd-analyze --version | head -1))"
# Any warning about our units fails: verify prints nothing when all is well.
out=$(systemd-analyze verify --root="$root" --man=no clusterrebootd-check.service clusterrebootd-check.timer 2>&1) || {
	echo "$out" >&2
	exit 1
}
if [ -n "$out" ]; then
	echo "$out" >&2
	echo "verify-units: systemd-analyze verify printed warnings" >&2
	exit 1
fi

echo "verify-units: systemd-tmpfiles --create (offline, in the temp root)"
systemd-tmpfiles --root="$root" --create clusterrebootd.conf
for d in run/clusterrebootd:755 var/lib/clusterrebootd:700; do
	mode=$(stat -c %a "$root/${d%%:*}")
	[ "$mode" = "${d#*:}" ] || { echo "verify-units: /${d%%:*} has mode $mode, want ${d#*:}" >&2; exit 1; }
done

echo "verify-units: systemd-analyze security (threshold $MAX_EXPOSURE)"
systemd-analyze security --offline=yes --root="$root" --threshold="$MAX_EXPOSURE" \
	clusterrebootd-check.service | tail -1
echo "verify-units: ok"
