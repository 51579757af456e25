#!/usr/bin/env bash
# test.sh: quality gates of the deb and rpm packages (make package-test).
#
#   1. reproducibility: builds every package twice from the same tree, the
#      second time from a copy at another path, with an empty Go build cache
#      and another umask, and compares the sha256 of each package;
#   2. lintian on each .deb: no error and no warning (justified overrides in
#      packaging/lintian-overrides), no unused override;
#   3. rpmlint on each .rpm: no error (justified filters in
#      packaging/rpmlintrc); warnings are printed;
#   4. contents: dpkg-deb -c/-I and rpm -qp (file list with modes and owners,
#      mtimes, conffiles, dependencies, scripts, architecture of the binary);
#      the kill switch /etc/clusterrebootd/disable is never in a package;
#   5. rpm: installed into an empty rpm --root (--nodeps --noscripts) and
#      verified with rpm -V;
#   6. with root and a Debian 12 root file system (hack/e2e/rootfs.sh, cached):
#      the .deb installed, upgraded, removed and purged with dpkg in a chroot,
#      and the .rpm installed, upgraded and erased with its scriptlets in
#      another one (systemd is not running there: daemon-reload and stopping
#      units are the booted node's part);
#   7. with root: the .deb's life cycle on a booted Debian 12 node, systemd as
#      PID 1 in systemd-nspawn (hack/package/node-test.sh): list-timers,
#      enable --now, upgrade keeps the timer running, remove stops the timer
#      and a running clusterrebootd-hold.service, purge.
#
# Environment: as build.sh (VERSION, COMMIT, PKG_VERSION, SOURCE_DATE_EPOCH,
# LDFLAGS, GO), plus
#   PACKAGE_TEST_DIR   work directory            [dist/package-test]
#   REPRO_FRESH_CACHE  0: reuse the Go build cache for the second build [1]
#   CHROOT_TESTS       0: skip steps 6 and 7     [1 when root]
#   NODE_TEST          0: skip step 7            [CHROOT_TESTS]
# Missing tools (lintian, rpmlint, rpm) are installed with apt when root.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD

GO=${GO:-go}
export VERSION=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo 0.0.0-dev)}
export COMMIT=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
export PKG_VERSION=${PKG_VERSION:-$(hack/package/version.sh)}
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)}
export LDFLAGS=${LDFLAGS:--s -w -buildid= -X main.version=$VERSION -X main.commit=$COMMIT}
export GO LC_ALL=C TZ=UTC
work=${PACKAGE_TEST_DIR:-$root/dist/package-test}
case $work in /*) ;; *) work=$root/$work ;; esac
isroot=0
[ "$(id -u)" = 0 ] && isroot=1
CHROOT_TESTS=${CHROOT_TESTS:-$isroot}
NODE_TEST=${NODE_TEST:-$CHROOT_TESTS}

fails=0
passes=0
log() { echo "package-test: $*" >&2; }
fail() {
	echo "package-test: FAIL: $*" >&2
	fails=$((fails + 1))
}
ok() {
	echo "package-test: ok: $*" >&2
	passes=$((passes + 1))
}
t_start=$(date +%s)
step() {
	echo >&2
	echo "=== $* ($(($(date +%s) - t_start))s)" >&2
}

need=()
command -v lintian >/dev/null || need+=(lintian)
command -v rpmlint >/dev/null || need+=(rpmlint)
command -v rpm >/dev/null || need+=(rpm)
if [ ${#need[@]} -gt 0 ]; then
	[ $isroot = 1 ] || {
		log "missing ${need[*]}: apt-get install ${need[*]}"
		exit 1
	}
	log "installing ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -qq --no-install-recommends "${need[@]}" >&2 || {
		apt-get update -qq >&2
		apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
	}
fi

rm -rf "$work"
mkdir -p "$work"
tmp=$(mktemp -d)
mounted=()
cleanup() {
	for m in "${mounted[@]}"; do umount -l "$m" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'echo "package-test: FAIL: unexpected error at line $LINENO: $BASH_COMMAND" >&2' ERR

# nfpm writes absolute member names into the rpm payload (/usr/bin/...),
# so a plain `rpm2cpio | cpio -id` (as rpmlint runs it) writes into the
# real root. Every cpio run here strips them.
mkdir -p "$tmp/bin"
printf '#!/bin/sh\nexec /usr/bin/cpio --no-absolute-filenames "$@"\n' >"$tmp/bin/cpio"
chmod 0755 "$tmp/bin/cpio"
export PATH=$tmp/bin:$PATH

# ---------------------------------------------------------------------------
step "1. build twice, compare"
t0=$(date +%s)
OUT=$work/a hack/package/build.sh
t1=$(date +%s)
copy=$tmp/src/tree-copy
mkdir -p "$copy"
git ls-files -z -co --exclude-standard | grep -zv '^dist/' | tar -c --null -T - | tar -x -C "$copy"
(
	umask 077
	cd "$copy"
	if [ "${REPRO_FRESH_CACHE:-1}" = 1 ]; then
		export GOCACHE=$tmp/gocache
	fi
	OUT=$work/b hack/package/build.sh
)
t2=$(date +%s)
log "build A $((t1 - t0))s, build B (copy$([ "${REPRO_FRESH_CACHE:-1}" = 1 ] && echo ", empty Go cache"), umask 077) $((t2 - t1))s"
pkgs=()
for f in "$work"/a/*.deb "$work"/a/*.rpm; do
	n=${f##*/}
	pkgs+=("$n")
	a=$(sha256sum <"$f" | cut -d' ' -f1)
	b=$(sha256sum <"$work/b/$n" 2>/dev/null | cut -d' ' -f1 || true)
	if [ "$a" = "$b" ]; then
		ok "reproducible $n $a ($(stat -c %s "$f") bytes)"
	else
		fail "not reproducible: $n: $a vs ${b:-missing} (diffoscope $work/a/$n $work/b/$n)"
	fi
done
[ ${#pkgs[@]} = 4 ] || fail "expected 4 packages, got ${#pkgs[@]}: ${pkgs[*]}"
cd "$work/a"

# ---------------------------------------------------------------------------
step "2. lintian"
for deb in *.deb; do
	out=$(lintian --pedantic --display-info --display-experimental --show-overrides \
		"$deb" 2>&1 | grep -v '^running with root privileges\|^N:' || true)
	rc=0
	lintian --fail-on error,warning "$deb" >/dev/null 2>&1 || rc=$?
	printf '%s\n' "$out" | sed 's/^/  /' >&2
	if [ $rc != 0 ]; then
		fail "lintian $deb: exit $rc"
	elif grep -q 'unused-override\|mismatched-override' <<<"$out"; then
		fail "lintian $deb: an override no longer matches anything; remove it"
	else
		ok "lintian $deb"
	fi
done

# ---------------------------------------------------------------------------
step "3. rpmlint"
for r in *.rpm; do
	rc=0
	out=$(rpmlint -r "$root/packaging/rpmlintrc" "$r" 2>&1) || rc=$?
	printf '%s\n' "$out" | grep -E ': [EW]: |packages and' | sed 's/^/  /' >&2
	if [ $rc != 0 ]; then
		fail "rpmlint $r: exit $rc"
	else
		ok "rpmlint $r"
	fi
done

# ---------------------------------------------------------------------------
step "4. contents"
sde_date=$(date -u -d "@$SOURCE_DATE_EPOCH" '+%Y-%m-%d %H:%M:%S')
docs=$(cd "$root" && ls docs/*.md)
common="-rwxr-xr-x /usr/bin/clusterrebootd
-rw-r--r-- /usr/lib/tmpfiles.d/clusterrebootd.conf
drwxr-xr-x /etc/clusterrebootd
drwxr-xr-x /etc/clusterrebootd/config.d
-rw-r--r-- /etc/clusterrebootd/config.toml
drwxr-xr-x /usr/share/doc/clusterrebootd
-rw-r--r-- /usr/share/doc/clusterrebootd/README.md
-rw-r--r-- /usr/share/doc/clusterrebootd/CHANGELOG.md.gz
-rw-r--r-- /usr/share/doc/clusterrebootd/go-modules.txt.gz
drwxr-xr-x /usr/share/doc/clusterrebootd/docs
$(for d in $docs; do echo "-rw-r--r-- /usr/share/doc/clusterrebootd/$d"; done)
drwxr-xr-x /usr/share/doc/clusterrebootd/examples
-rw-r--r-- /usr/share/doc/clusterrebootd/examples/cluster-gate
-rw-r--r-- /usr/share/doc/clusterrebootd/examples/cluster-gate.env
-rw-r--r-- /usr/share/man/man8/clusterrebootd.8.gz
-rw-r--r-- /usr/share/bash-completion/completions/clusterrebootd
-rw-r--r-- /usr/share/fish/vendor_completions.d/clusterrebootd.fish"
expect_deb=$(sort <<EOF
$common
-rw-r--r-- /lib/systemd/system/clusterrebootd-check.service
-rw-r--r-- /lib/systemd/system/clusterrebootd-check.timer
-rw-r--r-- /usr/share/doc/clusterrebootd/copyright
-rw-r--r-- /usr/share/doc/clusterrebootd/changelog.gz
-rw-r--r-- /usr/share/lintian/overrides/clusterrebootd
-rw-r--r-- /usr/share/zsh/vendor-completions/_clusterrebootd
EOF
)
expect_rpm=$(sort <<EOF
$common
-rw-r--r-- /usr/lib/systemd/system/clusterrebootd-check.service
-rw-r--r-- /usr/lib/systemd/system/clusterrebootd-check.timer
drwxr-xr-x /usr/share/licenses/clusterrebootd
-rw-r--r-- /usr/share/licenses/clusterrebootd/copyright
-rw-r--r-- /usr/share/zsh/site-functions/_clusterrebootd
EOF
)
# The parent directories (/usr, /lib/systemd, ...) are in the deb's data
# tar as in every Debian package; only the package's own ones are compared.
deb_parents='^d[^ ]* (/etc|/lib|/lib/systemd|/lib/systemd/system|/usr|/usr/bin|/usr/lib|/usr/lib/tmpfiles.d|/usr/share|/usr/share/doc|/usr/share/lintian|/usr/share/lintian/overrides|/usr/share/man|/usr/share/man/man8|/usr/share/bash-completion|/usr/share/bash-completion/completions|/usr/share/zsh|/usr/share/zsh/vendor-completions|/usr/share/fish|/usr/share/fish/vendor_completions.d)$'

# A command line (not the printed hint) that enables or starts a unit.
enabling='^[[:space:]]*(if[[:space:]]+!?[[:space:]]*)?(systemctl|deb-systemd-helper|deb-systemd-invoke)[^#]*[[:space:]](enable|start|restart|reenable|preset|unmask)([[:space:]]|$)'

check_binary() { # file goarch
	local info
	info=$(file -b "$1")
	case "$2:$info" in
	amd64:*x86-64*statically\ linked* | arm64:*aarch64*statically\ linked*) ok "binary $2: $info" ;;
	*) fail "binary $2 is not a static $2 executable: $info" ;;
	esac
}

for deb in *.deb; do
	arch=${deb%.deb}
	arch=${arch##*_}
	listing=$(dpkg-deb --fsys-tarfile "$deb" | tar -tv --full-time)
	got=$(printf '%s\n' "$listing" | awk '{p=$6; sub(/^\.\//,"/",p); sub(/\/$/,"",p); print $1, p}' |
		grep -Ev "$deb_parents" | sort)
	if [ "$got" = "$expect_deb" ]; then ok "$deb: file list and modes"; else
		fail "$deb: file list differs (< expected, > package):"
		diff <(echo "$expect_deb") <(echo "$got") | sed 's/^/  /' >&2 || true
	fi
	bad=$(printf '%s\n' "$listing" | awk -v d="$sde_date" '$2 != "root/root" || $4" "$5 != d' || true)
	[ -z "$bad" ] && ok "$deb: every entry root/root at SOURCE_DATE_EPOCH" || fail "$deb: owner or mtime: $bad"
	grep -q 'etc/clusterrebootd/disable' <<<"$listing" && fail "$deb ships the kill switch"
	field() { dpkg-deb -f "$deb" "$1"; }
	[ "$(field Package)" = clusterrebootd ] || fail "$deb: Package"
	[ "$(field Version)" = "$PKG_VERSION" ] || fail "$deb: Version $(field Version) != $PKG_VERSION"
	[ "$(field Architecture)" = "$arch" ] || fail "$deb: Architecture"
	[ "$(field Depends)" = systemd ] || fail "$deb: Depends: $(field Depends)"
	[ "$(field Recommends)" = ca-certificates ] || fail "$deb: Recommends: $(field Recommends)"
	ctl=$tmp/ctl-$arch
	mkdir -p "$ctl"
	dpkg-deb -e "$deb" "$ctl"
	[ "$(cat "$ctl/conffiles")" = /etc/clusterrebootd/config.toml ] || fail "$deb: conffiles: $(cat "$ctl/conffiles")"
	for s in postinst prerm postrm; do
		[ -x "$ctl/$s" ] || fail "$deb: no executable $s"
		sh -n "$ctl/$s" || fail "$deb: $s: syntax"
	done
	[ ! -e "$ctl/preinst" ] || fail "$deb: unexpected preinst"
	# Never enable or start anything on install.
	grep -En "$enabling" "$ctl/postinst" && fail "$deb: postinst enables or starts a unit"
	x=$tmp/x-$arch
	mkdir -p "$x"
	dpkg-deb -x "$deb" "$x"
	check_binary "$x/usr/bin/clusterrebootd" "$arch"
	cmp -s "$x/etc/clusterrebootd/config.toml" "$root/packaging/config.toml" || fail "$deb: config.toml differs from packaging/config.toml"
	cmp -s "$x/lib/systemd/system/clusterrebootd-check.service" "$root/units/clusterrebootd-check.service" || fail "$deb: service unit differs"
	# Generated from the command-line model (gen-docs); lintian checks the
	# man page with man --warnings.
	man8=$(zcat "$x/usr/share/man/man8/clusterrebootd.8.gz")
	grep -q '^\.TH CLUSTERREBOOTD 8 ' <<<"$man8" || fail "$deb: no clusterrebootd(8)"
	grep -q 'validate\\-config' <<<"$man8" || fail "$deb: clusterrebootd(8) lacks the commands"
	bash -n "$x/usr/share/bash-completion/completions/clusterrebootd" || fail "$deb: bash completion: syntax"
	grep -q '^complete -F _clusterrebootd clusterrebootd$' "$x/usr/share/bash-completion/completions/clusterrebootd" || fail "$deb: bash completion not registered"
	[ "$(head -1 "$x/usr/share/zsh/vendor-completions/_clusterrebootd")" = '#compdef clusterrebootd' ] || fail "$deb: zsh completion: no #compdef"
	grep -q '^complete -c clusterrebootd ' "$x/usr/share/fish/vendor_completions.d/clusterrebootd.fish" || fail "$deb: fish completion"
	ok "$deb: control fields, conffiles, scripts, contents"
done

for r in *.rpm; do
	case $r in *.x86_64.rpm) arch=amd64 rarch=x86_64 ;; *.aarch64.rpm) arch=arm64 rarch=aarch64 ;; esac
	q() { rpm -qp --nosignature "$@" "$r" 2>/dev/null; }
	got=$(q --qf '[%{FILEMODES:perms} %{FILENAMES}\n]' | sort)
	if [ "$got" = "$expect_rpm" ]; then ok "$r: file list and modes"; else
		fail "$r: file list differs (< expected, > package):"
		diff <(echo "$expect_rpm") <(echo "$got") | sed 's/^/  /' >&2 || true
	fi
	bad=$(q --qf '[%{FILEUSERNAME}:%{FILEGROUPNAME}:%{FILEMTIMES} %{FILENAMES}\n]' | grep -v "^root:root:$SOURCE_DATE_EPOCH " || true)
	[ -z "$bad" ] && ok "$r: every file root:root at SOURCE_DATE_EPOCH" || fail "$r: owner or mtime: $bad"
	[ "$(q --qf '%{VERSION}-%{RELEASE} %{ARCH} %{BUILDTIME} %{BUILDHOST}')" = "$PKG_VERSION-1 $rarch $SOURCE_DATE_EPOCH reproducible" ] ||
		fail "$r: header $(q --qf '%{VERSION}-%{RELEASE} %{ARCH} %{BUILDTIME} %{BUILDHOST}')"
	[ "$(q --qf '[%{FILEFLAGS:fflags} %{FILENAMES}\n]' | grep '^c' || true)" = "cn /etc/clusterrebootd/config.toml" ] ||
		fail "$r: config files: $(q --qf '[%{FILEFLAGS:fflags} %{FILENAMES}\n]' | grep '^c')"
	[ "$(q --licensefiles)" = /usr/share/licenses/clusterrebootd/copyright ] || fail "$r: %license"
	[ "$(q --docfiles | grep -c /usr/share/doc/)" = "$(printf '%s\n' "$expect_rpm" | grep -c '^-.* /usr/share/doc/')" ] ||
		fail "$r: not every file under /usr/share/doc is %doc"
	req=$(q --requires | grep -v '^rpmlib(' | sort | tr '\n' ' ')
	[ "$req" = "systemd " ] || fail "$r: requires: $req"
	rec=$(q --recommends | sort | tr '\n' ';')
	[ "$rec" = "(dnf-utils or yum-utils);ca-certificates;" ] || fail "$r: recommends: $rec"
	scripts=$(q --scripts)
	for s in 'postinstall scriptlet' 'preuninstall scriptlet' 'postuninstall scriptlet'; do
		grep -q "^$s" <<<"$scripts" || fail "$r: no $s"
	done
	grep -q '^preinstall scriptlet' <<<"$scripts" && fail "$r: unexpected %pre"
	post=$(printf '%s\n' "$scripts" | sed -n '/^postinstall scriptlet/,/^preuninstall scriptlet/p')
	printf '%s\n' "$post" | grep -En "$enabling" && fail "$r: %post enables or starts a unit"
	grep -q 'systemd-tmpfiles --create clusterrebootd.conf' <<<"$post" || fail "$r: %post does not run systemd-tmpfiles"
	x=$tmp/rx-$arch
	mkdir -p "$x"
	# rpm2cpio exits 1 on nfpm's rpms (it disagrees with rpmpack about the
	# payload size, nfpm issue 341) after writing the whole archive; cpio
	# and the checks below decide.
	{ rpm2cpio "$work/a/$r" || true; } | (cd "$x" && cpio -idm --quiet 2>/dev/null)
	check_binary "$x/usr/bin/clusterrebootd" "$arch"
	ok "$r: header, config, docs, dependencies, scriptlets"
done

# Debian's rpm warns on every install unless told it is deliberate.
rpm_force=()
grep -q -- --force-debian <<<"$(rpm --help 2>&1)" && rpm_force=(--force-debian)

# ---------------------------------------------------------------------------
step "5. rpm --root install (no scriptlets)"
for r in *.rpm; do
	case $r in *.x86_64.rpm) ;; *) continue ;; esac
	rr=$tmp/rpmroot
	mkdir -p "$rr"
	rpm --root "$rr" --initdb
	if rpm --root "$rr" "${rpm_force[@]}" -i --nodeps --noscripts --nosignature --ignorearch "$work/a/$r"; then
		ok "$r installed into rpm --root"
		v=$(rpm --root "$rr" -V --nodeps clusterrebootd 2>&1 || true)
		[ -z "$v" ] && ok "rpm -V clean" || fail "rpm -V: $v"
		[ -x "$rr/usr/bin/clusterrebootd" ] && [ -f "$rr/etc/clusterrebootd/config.toml" ] &&
			[ -d "$rr/etc/clusterrebootd/config.d" ] && [ ! -e "$rr/etc/clusterrebootd/disable" ] ||
			fail "rpm --root: files missing or kill switch present"
		"$rr/usr/bin/clusterrebootd" --version >/dev/null || fail "installed binary does not run"
		rpm --root "$rr" -e --nodeps --noscripts clusterrebootd || fail "rpm -e"
		[ ! -e "$rr/usr/bin/clusterrebootd" ] || fail "rpm -e left the binary"
	else
		fail "rpm --root -i $r"
	fi
done

# ---------------------------------------------------------------------------
step "6. maintainer scripts in a Debian 12 chroot"
if [ "$CHROOT_TESTS" != 1 ]; then
	log "skipped (CHROOT_TESTS=$CHROOT_TESTS; needs root)"
	NODE_TEST=0
else
	# A second, higher version of the same tree for the upgrade.
	PKG_VERSION2=$PKG_VERSION.1
	(cd "$root" && OUT=$work/v2 PKG_VERSION=$PKG_VERSION2 ARCHES=amd64 hack/package/build.sh) 2>&1 | tail -1 >&2
	base=$("$root/hack/e2e/rootfs.sh")
	# shellcheck source=hack/package/chroot-tests.sh
	. "$root/hack/package/chroot-tests.sh"
	deb_chroot_test "$base" "$work"/a/*_amd64.deb "$work"/v2/*_amd64.deb
	rpm_chroot_test "$base" "$work"/a/*.x86_64.rpm "$work"/v2/*.x86_64.rpm
fi

# ---------------------------------------------------------------------------
step "7. the .deb on a booted node (systemd-nspawn)"
if [ "$NODE_TEST" != 1 ]; then
	log "skipped (NODE_TEST=$NODE_TEST; needs root and step 6)"
elif out=$("$root/hack/package/node-test.sh" "$work"/a/*_amd64.deb "$work"/v2/*_amd64.deb 2>&1); then
	printf '%s\n' "$out" | grep -v ': ok: ' | sed 's/^/  /' >&2
	ok "booted node: $(printf '%s\n' "$out" | tail -1)"
else
	printf '%s\n' "$out" | sed 's/^/  /' >&2
	fail "booted node"
fi

# ---------------------------------------------------------------------------
echo >&2
for f in "$work"/a/*.deb "$work"/a/*.rpm; do
	log "$(stat -c '%s' "$f") bytes  ${f##*/}"
done
log "took $(($(date +%s) - t_start))s"
echo "package-test: $passes passed, $fails failed"
if [ $fails != 0 ]; then
	log "$fails check(s) FAILED"
	exit 1
fi
log "all checks passed"
