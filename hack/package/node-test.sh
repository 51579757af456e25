#!/usr/bin/env bash
# node-test.sh: the .deb on a booted Debian 12 node, systemd as PID 1 in
# systemd-nspawn (the e2e harness's root file system, hack/e2e/rootfs.sh).
# What a chroot cannot show: daemon-reload, `systemctl list-timers`, and
# that remove stops the timer and a running lock holder.
#
#   hack/package/node-test.sh V1_amd64.deb V2_amd64.deb    # V2 newer than V1
#
# install (timer neither enabled nor listed) -> enable --now (listed) ->
# upgrade (still enabled and active, no reload pending, config kept) ->
# remove with a running clusterrebootd-hold.service (both stopped) -> purge
# (no unit left) -> reinstall (not enabled again). Root only; the node has a
# private network (no traffic). Prints "N passed, M failed".
set -euo pipefail
[ "$(id -u)" = 0 ] || {
	echo "node-test: root only" >&2
	exit 1
}
v1=$(realpath "$1")
v2=$(realpath "$2")
cd "$(dirname "$0")/../.."
base=$(hack/e2e/rootfs.sh)

passed=0
failed=0
ok() {
	echo "node-test: ok: $*" >&2
	passed=$((passed + 1))
}
fail() {
	echo "node-test: FAIL: $*" >&2
	failed=$((failed + 1))
}
expect() {
	local what=$1
	shift
	if "$@"; then ok "$what"; else fail "$what"; fi
}

tmp=$(mktemp -d)
name=crpkg-$$
root=$tmp/root
nspawn=
cgdirs=()
cleanup() {
	if [ -n "$nspawn" ] && kill -0 "$nspawn" 2>/dev/null; then
		kill -TERM "$nspawn" 2>/dev/null || true
		for _ in $(seq 60); do kill -0 "$nspawn" 2>/dev/null || break; sleep 0.5; done
		kill -KILL "$nspawn" 2>/dev/null || true
		wait "$nspawn" 2>/dev/null || true
	fi
	for d in "${cgdirs[@]}"; do
		for _ in 1 2 3 4 5; do
			find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
			[ -d "$d" ] || break
			sleep 0.5
		done
	done
	rm -rf "$tmp"
}
trap cleanup EXIT

cp -a --reflink=auto "$base" "$root"
echo "$name" >"$root/etc/hostname"
cp "$v1" "$root/opt/v1.deb"
cp "$v2" "$root/opt/v2.deb"

# The node gets cgroups of its own (E2E-NOTES: nodes sharing one collide).
if [ -e /sys/fs/cgroup/cgroup.controllers ]; then
	cgroots=(/sys/fs/cgroup)
else
	cgroots=()
	for r in /sys/fs/cgroup/systemd /sys/fs/cgroup/unified; do
		[ -e "$r/cgroup.procs" ] && cgroots+=("$r")
	done
fi
procs=
for r in "${cgroots[@]}"; do
	mkdir "$r/$name"
	cgdirs+=("$r/$name")
	procs="$procs $r/$name/cgroup.procs"
done
PROCS=$procs setsid sh -c 'for f in $PROCS; do echo $$ >"$f" || exit 97; done; exec "$@"' sh \
	systemd-nspawn -q -D "$root" -M "$name" -b --register=no --keep-unit --private-network \
	--console=read-only >"$tmp/console.log" 2>&1 &
nspawn=$!
init=
for _ in $(seq 100); do
	init=$(pgrep -P "$nspawn" -x systemd || true)
	[ -n "$init" ] && break
	sleep 0.2
done
[ -n "$init" ] || {
	cat "$tmp/console.log" >&2
	echo "node-test: the node did not start" >&2
	exit 1
}
node() {
	timeout 120 nsenter -t "$init" -a -- env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
		TERM=dumb SYSTEMD_PAGER= SYSTEMD_COLORS=0 "$@"
}
state=$(node systemctl is-system-running --wait 2>&1 || true)
echo "node-test: node $name booted: $state" >&2

# list-timers --all: every loaded timer; without: the waiting ones.
timers() { node systemctl list-timers --all --no-legend 2>/dev/null | grep -c clusterrebootd-check.timer || true; }
waiting() { node systemctl list-timers --no-legend 2>/dev/null | grep -c clusterrebootd-check.timer || true; }
prop() { node systemctl show -P "$2" "$1" 2>/dev/null || true; }

out=$(node dpkg -i /opt/v1.deb 2>&1) || fail "dpkg -i v1: $out"
expect "install: prints how to enable the timer" grep -q 'systemctl enable --now clusterrebootd-check.timer' <<<"$out"
expect "install: timer not in list-timers" [ "$(timers)" = 0 ]
expect "install: timer disabled" [ "$(node systemctl is-enabled clusterrebootd-check.timer 2>&1)" = disabled ]
expect "install: timer inactive" [ "$(prop clusterrebootd-check.timer ActiveState)" = inactive ]
expect "install: units loaded, no reload pending" [ "$(prop clusterrebootd-check.timer LoadState) $(prop clusterrebootd-check.timer NeedDaemonReload)" = "loaded no" ]
expect "install: runtime and state directories" node test -d /run/clusterrebootd -a -d /var/lib/clusterrebootd

node systemctl enable --now clusterrebootd-check.timer >/dev/null 2>&1 || fail "systemctl enable --now"
expect "enable --now: timer in list-timers" [ "$(waiting)" = 1 ]
expect "enable --now: timer active" [ "$(prop clusterrebootd-check.timer ActiveState)" = active ]
node sh -c 'echo "# edited by the administrator" >>/etc/clusterrebootd/config.toml' || fail "edit config"

out=$(node dpkg -i /opt/v2.deb 2>&1) || fail "dpkg -i v2: $out"
expect "upgrade: new version" [ "$(node dpkg-query -W -f '${Version}' clusterrebootd)" = "$(dpkg-deb -f "$v2" Version)" ]
expect "upgrade: timer still enabled" [ "$(node systemctl is-enabled clusterrebootd-check.timer 2>&1)" = enabled ]
expect "upgrade: timer still active" [ "$(prop clusterrebootd-check.timer ActiveState)" = active ]
expect "upgrade: no reload pending" [ "$(prop clusterrebootd-check.timer NeedDaemonReload)" = no ]
expect "upgrade: configuration edit kept" node grep -q 'edited by the administrator' /etc/clusterrebootd/config.toml

# A lock holder in the middle of its wait (a stand-in process under the
# real unit name).
node systemd-run --quiet --unit=clusterrebootd-hold.service --service-type=exec /bin/sleep 600 ||
	fail "systemd-run clusterrebootd-hold.service"
expect "holder running before remove" [ "$(prop clusterrebootd-hold.service ActiveState)" = active ]
out=$(node dpkg -r clusterrebootd 2>&1) || fail "dpkg -r: $out"
expect "remove: timer stopped" [ "$(prop clusterrebootd-check.timer ActiveState)" = inactive ]
expect "remove: holder stopped" [ "$(prop clusterrebootd-hold.service ActiveState)" = inactive ]
# (list-timers --all still shows it as not-found while the administrator's
# enablement link points at it; purge removes the link.)
expect "remove: timer gone from list-timers" [ "$(waiting)" = 0 ]
expect "remove: configuration kept" node test -f /etc/clusterrebootd/config.toml

out=$(node dpkg -P clusterrebootd 2>&1) || fail "dpkg -P: $out"
expect "purge: no unit file left" [ -z "$(node systemctl list-unit-files --no-legend 'clusterrebootd*' 2>/dev/null)" ]
expect "purge: enablement link removed" node test ! -L /etc/systemd/system/timers.target.wants/clusterrebootd-check.timer
expect "purge: not even in list-timers --all" [ "$(timers)" = 0 ]
expect "purge: state removed" node test ! -e /var/lib/clusterrebootd

out=$(node dpkg -i /opt/v1.deb 2>&1) || fail "dpkg -i after purge: $out"
expect "reinstall: timer disabled" [ "$(node systemctl is-enabled clusterrebootd-check.timer 2>&1)" = disabled ]
expect "reinstall: timer inactive" [ "$(prop clusterrebootd-check.timer ActiveState)" = inactive ]

echo "node-test: $passed passed, $failed failed"
[ "$failed" = 0 ]
