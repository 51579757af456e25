#!/bin/bash
# rootfs.sh: build (once) the Debian 12 root file system the e2e nodes boot
# with systemd-nspawn, and print its path on stdout. Everything else goes to
# stderr.
#
#   hack/e2e/rootfs.sh            # prints /var/cache/clusterrebootd-e2e/rootfs-<hash>
#   E2E_CACHE=/some/dir hack/e2e/rootfs.sh
#
# - Installs the host tools it and the e2e suite need (systemd-container,
#   mmdebstrap, iproute2) with apt when one is missing.
# - The tree is cached under $E2E_CACHE/rootfs-<hash>, the hash covering the
#   suite, variant, package list and the customize step below: a second run on
#   the same machine returns at once; changing the recipe builds a new tree
#   (older trees stay until removed by hand: rm -rf $E2E_CACHE/rootfs-*).
# - Built into a temporary directory and renamed into place, under a lock, so
#   an interrupted or concurrent run never leaves a half-built cache entry.
#
# Root only. Debian's apt is the only network it uses.
set -euo pipefail

CACHE=${E2E_CACHE:-/var/cache/clusterrebootd-e2e}
SUITE=bookworm
VARIANT=minbase
# systemd as PID 1 with logind and the system bus (the units under test),
# networkd for the static address on host0, iproute2 and procps for humans
# debugging a node (nsenter -t PID -a ip addr / ps).
PACKAGES=systemd,systemd-sysv,dbus,libpam-systemd,iproute2,procps

log() { echo "rootfs: $*" >&2; }

if [ "$(id -u)" != 0 ]; then
	log "must run as root"
	exit 1
fi

# customize runs inside mmdebstrap's customize hook with $1 = the new root.
# Its text (declare -f) is part of the cache key, so edit freely. It runs
# under sh: keep it POSIX.
customize() {
	root=$1
	# networkd gives host0 its static address; wait-online makes
	# network-online.target mean "host0 is configured" as on a real server.
	chroot "$root" systemctl enable systemd-networkd.service systemd-networkd-wait-online.service >&2
	# Persistent journal: the e2e reads entries written before a reboot.
	mkdir -p "$root/var/log/journal"
	# Each node gets its own hostname and machine-id when it is copied.
	: >"$root/etc/machine-id"
	rm -f "$root/etc/hostname"
	# Nothing in the node should wait for a console login.
	chroot "$root" systemctl mask console-getty.service getty@tty1.service >&2
	# Nor run maintenance jobs (or reach for a mirror) in the middle of a test.
	chroot "$root" systemctl mask apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer \
		e2scrub_all.timer fstrim.timer e2scrub_reap.service >&2
	# apt caches are dead weight in every node copy.
	rm -rf "$root/var/cache/apt/"*.bin "$root/var/lib/apt/lists/"*
}

need=()
command -v systemd-nspawn >/dev/null 2>&1 || need+=(systemd-container)
command -v mmdebstrap >/dev/null 2>&1 || need+=(mmdebstrap)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
if [ ${#need[@]} -gt 0 ]; then
	log "installing ${need[*]}"
	t0=$(date +%s)
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}" >&2 || {
		apt-get update >&2
		DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}" >&2
	}
	log "installed in $(($(date +%s) - t0))s"
fi

recipe=$(printf '%s\n%s\n%s\n' "$SUITE" "$VARIANT" "$PACKAGES"; declare -f customize)
hash=$(printf '%s' "$recipe" | sha256sum | cut -c1-16)
dest=$CACHE/rootfs-$hash

mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock 9

if [ -e "$dest/usr/lib/systemd/systemd" ]; then
	log "cached $dest"
	echo "$dest"
	exit 0
fi

tmp=$(mktemp -d "$CACHE/.build-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
log "building $dest (mmdebstrap $VARIANT $SUITE: $PACKAGES)"
t0=$(date +%s)
# mmdebstrap runs the hook as `sh -c HOOK exec ROOT`: pass the function's
# text, then call it with that shell's $1 (hence the single quotes).
hook=$(declare -f customize)
# shellcheck disable=SC2016
mmdebstrap --quiet --variant="$VARIANT" --include="$PACKAGES" \
	--customize-hook="$hook"$'\n''customize "$1"' \
	"$SUITE" "$tmp/root" >&2
mv "$tmp/root" "$dest"
log "built in $(($(date +%s) - t0))s: $(du -sh "$dest" | cut -f1)"
echo "$dest"
