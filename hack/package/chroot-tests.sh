# shellcheck shell=bash disable=SC2154 # tmp, rpm_force: set by test.sh
# chroot-tests.sh: the package life cycle in a Debian 12 chroot, sourced by
# hack/package/test.sh (uses its tmp, mounted, ok, fail, log).
#
# deb_chroot_test BASE V1.deb V2.deb: install, administrator edits, upgrade,
# rollback, upgrade, remove, purge, reinstall with dpkg inside a copy of the
# root file system BASE.
# rpm_chroot_test BASE V1.rpm V2.rpm: install, upgrade, rollback and erase
# with the host's rpm --root into another copy; the scriptlets run chrooted
# with the copy's /bin/sh, systemd-tmpfiles and mkdir.
#
# systemd is not running in a chroot (no /run/systemd/system), so the
# scripts skip daemon-reload and stopping units there: hack/package/node-test.sh
# covers those on a booted node.

# chroot_copy NAME BASE: a fresh copy of BASE with /proc mounted, in $CHROOT.
chroot_copy() {
	CHROOT=$tmp/$1
	rm -rf "$CHROOT"
	cp -a --reflink=auto "$2" "$CHROOT"
	mount -t proc proc "$CHROOT/proc"
	mounted+=("$CHROOT/proc")
}

# expect DESCRIPTION COMMAND...: ok when COMMAND succeeds, fail otherwise.
expect() {
	local what=$1
	shift
	if "$@"; then ok "$what"; else fail "$what"; fi
}

mode_of() { stat -c %a "$1" 2>/dev/null || echo missing; }

deb_chroot_test() {
	local base=$1 v1=$2 v2=$3 r out wants
	chroot_copy deb-root "$base"
	r=$CHROOT
	cp "$v1" "$r/tmp/v1.deb"
	cp "$v2" "$r/tmp/v2.deb"
	wants=$r/etc/systemd/system/timers.target.wants/clusterrebootd-check.timer
	dv() { chroot "$r" dpkg-query -W -f '${Version} ${db:Status-Abbrev}' clusterrebootd 2>/dev/null || true; }

	log "deb: install $(basename "$v1")"
	out=$(chroot "$r" dpkg -i /tmp/v1.deb 2>&1) || fail "dpkg -i v1: $out"
	printf '%s\n' "$out" | sed 's/^/  | /' >&2
	expect "deb install: installed" [ "$(dv)" = "$(dpkg-deb -f "$v1" Version) ii " ]
	expect "deb install: prints how to enable the timer" grep -q 'systemctl enable --now clusterrebootd-check.timer' <<<"$out"
	expect "deb install: binary runs" chroot "$r" /usr/bin/clusterrebootd --version >/dev/null
	expect "deb install: units in /lib/systemd/system" [ -f "$r/lib/systemd/system/clusterrebootd-check.timer" ]
	expect "deb install: /var/lib/clusterrebootd 0700" [ "$(mode_of "$r/var/lib/clusterrebootd")" = 700 ]
	expect "deb install: /run/clusterrebootd 0755" [ "$(mode_of "$r/run/clusterrebootd")" = 755 ]
	expect "deb install: timer not enabled" test ! -L "$wants" -a ! -e "$wants"
	expect "deb install: systemctl is-enabled says disabled" \
		[ "$(chroot "$r" systemctl is-enabled clusterrebootd-check.timer 2>/dev/null)" = disabled ]
	expect "deb install: no kill switch" [ ! -e "$r/etc/clusterrebootd/disable" ]

	# What an administrator does.
	echo '# edited by the administrator' >>"$r/etc/clusterrebootd/config.toml"
	echo 'cluster = "blue"' >"$r/etc/clusterrebootd/config.d/10-local.toml"
	touch "$r/etc/clusterrebootd/disable"
	echo '{}' >"$r/var/lib/clusterrebootd/state.json"
	chroot "$r" systemctl enable clusterrebootd-check.timer >/dev/null 2>&1
	expect "deb: administrator enabled the timer" [ -L "$wants" ]

	log "deb: upgrade to $(basename "$v2")"
	out=$(chroot "$r" dpkg -i /tmp/v2.deb 2>&1) || fail "dpkg -i v2: $out"
	expect "deb upgrade: new version" [ "$(dv)" = "$(dpkg-deb -f "$v2" Version) ii " ]
	expect "deb upgrade: no install message" bash -c '! grep -q "timer is NOT enabled" <<<"$1"' _ "$out"
	after_upgrade deb "$r" "$wants"
	expect "deb upgrade: no .dpkg-* config copies" bash -c '! ls "$1"/etc/clusterrebootd/*.dpkg-* 2>/dev/null' _ "$r"

	log "deb: rollback to $(basename "$v1")"
	out=$(chroot "$r" dpkg -i /tmp/v1.deb 2>&1) || fail "dpkg -i v1 (downgrade): $out"
	expect "deb rollback: old version" [ "$(dv)" = "$(dpkg-deb -f "$v1" Version) ii " ]
	after_upgrade "deb rollback" "$r" "$wants"
	chroot "$r" dpkg -i /tmp/v2.deb >/dev/null 2>&1 || fail "dpkg -i v2 after rollback"

	log "deb: remove"
	out=$(chroot "$r" dpkg -r clusterrebootd 2>&1) || fail "dpkg -r: $out"
	expect "deb remove: config-files state" [ "$(dv)" = "$(dpkg-deb -f "$v2" Version) rc " ]
	expect "deb remove: binary gone" [ ! -e "$r/usr/bin/clusterrebootd" ]
	expect "deb remove: units gone" [ ! -e "$r/lib/systemd/system/clusterrebootd-check.timer" ]
	expect "deb remove: configuration kept" grep -q 'edited by the administrator' "$r/etc/clusterrebootd/config.toml"
	expect "deb remove: state kept" [ -f "$r/var/lib/clusterrebootd/state.json" ]
	expect "deb remove: kill switch kept" [ -e "$r/etc/clusterrebootd/disable" ]
	expect "deb remove: timer's enablement link kept until purge" test -L "$wants"

	log "deb: purge"
	out=$(chroot "$r" dpkg -P clusterrebootd 2>&1) || fail "dpkg -P: $out"
	printf '%s\n' "$out" | sed 's/^/  | /' >&2
	expect "deb purge: gone from dpkg" [ -z "$(dv)" ]
	expect "deb purge: conffile removed" [ ! -e "$r/etc/clusterrebootd/config.toml" ]
	expect "deb purge: state removed" [ ! -e "$r/var/lib/clusterrebootd" ]
	expect "deb purge: runtime directory removed" [ ! -e "$r/run/clusterrebootd" ]
	expect "deb purge: dangling timer link removed" [ ! -L "$wants" ]
	expect "deb purge: kill switch kept" [ -e "$r/etc/clusterrebootd/disable" ]
	expect "deb purge: administrator's drop-in kept" [ -f "$r/etc/clusterrebootd/config.d/10-local.toml" ]

	log "deb: reinstall after purge"
	out=$(chroot "$r" dpkg -i /tmp/v1.deb 2>&1) || fail "dpkg -i after purge: $out"
	expect "deb reinstall: fresh conffile" bash -c '! grep -q "edited by the administrator" "$1"' _ "$r/etc/clusterrebootd/config.toml"
	expect "deb reinstall: timer not enabled" [ ! -e "$wants" ]
	chroot "$r" dpkg -P clusterrebootd >/dev/null 2>&1 || fail "dpkg -P after reinstall"
	umount "$r/proc"
}

# after_upgrade WHAT ROOT WANTS: the administrator's state survived.
after_upgrade() {
	local what=$1 r=$2 wants=$3
	expect "$what: configuration edit kept" grep -q 'edited by the administrator' "$r/etc/clusterrebootd/config.toml"
	expect "$what: drop-in kept" [ -f "$r/etc/clusterrebootd/config.d/10-local.toml" ]
	expect "$what: kill switch kept" [ -e "$r/etc/clusterrebootd/disable" ]
	expect "$what: state kept" [ -f "$r/var/lib/clusterrebootd/state.json" ]
	# The link is absolute (/lib/...): resolve it inside the chroot.
	expect "$what: timer still enabled" chroot "$r" test -L "${wants#"$r"}" -a -e "${wants#"$r"}"
}

rpm_chroot_test() {
	local base=$1 v1=$2 v2=$3 r out wants
	chroot_copy rpm-root "$base"
	r=$CHROOT
	wants=$r/etc/systemd/system/timers.target.wants/clusterrebootd-check.timer
	rv() { # installed version-release, empty when not installed
		local v
		v=$(rpm --root "$r" -q --qf '%{VERSION}-%{RELEASE}' clusterrebootd 2>/dev/null) && printf '%s' "$v"
		return 0
	}
	pv() { rpm -qp --nosignature --qf '%{VERSION}-%{RELEASE}' "$1" 2>/dev/null; }
	rpm --root "$r" --initdb

	log "rpm: install $(basename "$v1")"
	out=$(rpm --root "$r" "${rpm_force[@]}" -i --nodeps --nosignature "$v1" 2>&1) || fail "rpm -i v1: $out"
	printf '%s\n' "$out" | sed 's/^/  | /' >&2
	expect "rpm install: installed" [ "$(rv)" = "$(pv "$v1")" ]
	expect "rpm install: prints how to enable the timer" grep -q 'systemctl enable --now clusterrebootd-check.timer' <<<"$out"
	expect "rpm install: units in /usr/lib/systemd/system" [ -f "$r/usr/lib/systemd/system/clusterrebootd-check.timer" ]
	expect "rpm install: /var/lib/clusterrebootd 0700" [ "$(mode_of "$r/var/lib/clusterrebootd")" = 700 ]
	expect "rpm install: /run/clusterrebootd 0755" [ "$(mode_of "$r/run/clusterrebootd")" = 755 ]
	expect "rpm install: timer not enabled" test ! -L "$wants" -a ! -e "$wants"

	echo '# edited by the administrator' >>"$r/etc/clusterrebootd/config.toml"
	echo 'cluster = "blue"' >"$r/etc/clusterrebootd/config.d/10-local.toml"
	touch "$r/etc/clusterrebootd/disable"
	echo '{}' >"$r/var/lib/clusterrebootd/state.json"
	chroot "$r" systemctl enable clusterrebootd-check.timer >/dev/null 2>&1
	expect "rpm: administrator enabled the timer" [ -L "$wants" ]

	log "rpm: upgrade to $(basename "$v2")"
	out=$(rpm --root "$r" "${rpm_force[@]}" -U --nodeps --nosignature "$v2" 2>&1) || fail "rpm -U v2: $out"
	expect "rpm upgrade: new version" [ "$(rv)" = "$(pv "$v2")" ]
	expect "rpm upgrade: no install message" bash -c '! grep -q "timer is NOT enabled" <<<"$1"' _ "$out"
	after_upgrade "rpm upgrade" "$r" "$wants"
	expect "rpm upgrade: no .rpmnew (the packaged file did not change)" [ ! -e "$r/etc/clusterrebootd/config.toml.rpmnew" ]

	log "rpm: rollback to $(basename "$v1")"
	out=$(rpm --root "$r" "${rpm_force[@]}" -U --oldpackage --nodeps --nosignature "$v1" 2>&1) || fail "rpm -U --oldpackage v1: $out"
	expect "rpm rollback: old version" [ "$(rv)" = "$(pv "$v1")" ]
	after_upgrade "rpm rollback" "$r" "$wants"

	log "rpm: erase"
	out=$(rpm --root "$r" "${rpm_force[@]}" -e --nodeps clusterrebootd 2>&1) || fail "rpm -e: $out"
	printf '%s\n' "$out" | sed 's/^/  | /' >&2
	expect "rpm erase: gone from rpm" [ -z "$(rv)" ]
	expect "rpm erase: binary gone" [ ! -e "$r/usr/bin/clusterrebootd" ]
	expect "rpm erase: edited configuration saved as .rpmsave" grep -q 'edited by the administrator' "$r/etc/clusterrebootd/config.toml.rpmsave"
	expect "rpm erase: kill switch kept" [ -e "$r/etc/clusterrebootd/disable" ]
	expect "rpm erase: administrator's drop-in kept" [ -f "$r/etc/clusterrebootd/config.d/10-local.toml" ]
	expect "rpm erase: state kept (rpm has no purge)" [ -f "$r/var/lib/clusterrebootd/state.json" ]
	umount "$r/proc"
}
