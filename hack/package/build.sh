#!/usr/bin/env bash
# build.sh: the clusterrebootd deb and rpm packages (make package).
#
#   hack/package/build.sh                 # dist/clusterrebootd_<v>_{amd64,arm64}.deb, -<v>-1.{x86_64,aarch64}.rpm
#   ARCHES=amd64 FORMATS=deb hack/package/build.sh
#
# 1. cross-builds the static binary per architecture (CGO_ENABLED=0,
#    -trimpath, -buildid=, version and commit stamped with -X; -buildvcs=false
#    so a tree without .git, e.g. a source tarball, builds the same bytes)
#    into $OUT/build/linux_<arch>/;
# 2. generates into $OUT/stage/ what the packages ship besides the tree: the
#    manual page clusterrebootd.8.gz and the bash, zsh and fish completions
#    (`clusterrebootd gen-docs`, from the command-line model, with a binary
#    for the build host), the Debian changelog (native package), the
#    upstream CHANGELOG.md compressed, and go-modules.txt.gz (every Go module
#    compiled into the binary with its licence texts, from the module cache);
# 3. runs hack/nfpm (the nfpm library pinned in hack/go.mod) on
#    packaging/nfpm.yaml.
#
# Reproducible: the same tree and SOURCE_DATE_EPOCH give byte-identical
# packages, whatever the checkout path, umask, Go build cache or clock
# (hack/package/test.sh checks it).
#
# Environment (all optional):
#   GO                 go command                       [go]
#   VERSION            version stamped into the binary  [git describe --tags --always --dirty]
#   COMMIT             commit stamped into the binary   [git rev-parse --short HEAD]
#   PKG_VERSION        package version                  [hack/package/version.sh]
#   SOURCE_DATE_EPOCH  every mtime in the packages      [time of the last commit]
#   ARCHES             Go architectures                 [amd64 arm64]
#   FORMATS            packagers, comma-separated       [deb,rpm]
#   OUT                output directory                 [dist]
#   LDFLAGS            linker flags (the Makefile passes its own)
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD

GO=${GO:-go}
VERSION=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo 0.0.0-dev)}
COMMIT=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
PKG_VERSION=${PKG_VERSION:-$(hack/package/version.sh)}
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)}
ARCHES=${ARCHES:-amd64 arm64}
FORMATS=${FORMATS:-deb,rpm}
OUT=${OUT:-dist}
LDFLAGS=${LDFLAGS:--s -w -buildid= -X main.version=$VERSION -X main.commit=$COMMIT}
export SOURCE_DATE_EPOCH TZ=UTC LC_ALL=C
case $OUT in /*) ;; *) OUT=$root/$OUT ;; esac

log() { echo "package: $*" >&2; }
t0=$(date +%s)

# 1. binaries
for arch in $ARCHES; do
	dir=$OUT/build/linux_$arch
	mkdir -p "$dir"
	CGO_ENABLED=0 GOOS=linux GOARCH=$arch "$GO" build -trimpath -buildvcs=false -ldflags "$LDFLAGS" \
		-o "$dir/clusterrebootd" ./cmd/clusterrebootd
	log "built $dir/clusterrebootd ($(stat -c %s "$dir/clusterrebootd") bytes)"
done
t1=$(date +%s)

# 2. generated documentation
stage=$OUT/stage
rm -rf "$stage"
mkdir -p "$stage"

# Manual page and shell completions, from the command-line model. The
# output is the same for every architecture; a binary for the build host
# writes it (the one just built when the host is among ARCHES). Dated by
# SOURCE_DATE_EPOCH only.
hostarch=$("$GO" env GOHOSTARCH)
gen=$OUT/build/linux_$hostarch/clusterrebootd
if [ "$("$GO" env GOHOSTOS)" != linux ] || [ ! -x "$gen" ] || ! grep -qw "$hostarch" <<<"$ARCHES"; then
	gen=$OUT/build/host/clusterrebootd
	mkdir -p "${gen%/*}"
	CGO_ENABLED=0 GOOS= GOARCH= "$GO" build -trimpath -buildvcs=false -ldflags "$LDFLAGS" -o "$gen" ./cmd/clusterrebootd
fi
"$gen" gen-docs man | gzip -9n >"$stage/clusterrebootd.8.gz"
"$gen" gen-docs bash >"$stage/clusterrebootd.bash"
"$gen" gen-docs zsh >"$stage/_clusterrebootd"
"$gen" gen-docs fish >"$stage/clusterrebootd.fish"
log "generated the manual page and the bash, zsh and fish completions"

maintainer=$(sed -n 's/^maintainer: "\(.*\)"$/\1/p' packaging/nfpm.yaml)
[ -n "$maintainer" ] || {
	log "no maintainer in packaging/nfpm.yaml"
	exit 1
}
{
	echo "clusterrebootd ($PKG_VERSION) stable; urgency=medium"
	echo
	echo "  * Built from upstream commit $COMMIT."
	echo "    Upstream changes: /usr/share/doc/clusterrebootd/CHANGELOG.md.gz"
	echo
	echo " -- $maintainer  $(date -u -R -d "@$SOURCE_DATE_EPOCH")"
} | gzip -9n >"$stage/changelog.gz"
gzip -9n <CHANGELOG.md >"$stage/CHANGELOG.md.gz"
# The rpm %changelog (chglog format, read by nfpm).
cat >"$stage/rpm-changelog.yml" <<EOF
- semver: $PKG_VERSION-1
  date: $(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
  packager: $maintainer
  changes:
    - note: "Built from upstream commit $COMMIT; upstream changes: /usr/share/doc/clusterrebootd/CHANGELOG.md.gz"
EOF

# Every module compiled into any of the binaries, with its licence files.
modules=$(for arch in $ARCHES; do
	CGO_ENABLED=0 GOOS=linux GOARCH=$arch "$GO" list -deps \
		-f '{{with .Module}}{{if not .Main}}{{.Path}} {{.Version}} {{.Dir}}{{end}}{{end}}' ./cmd/clusterrebootd
done | sort -u)
{
	echo "Go modules compiled into /usr/bin/clusterrebootd $PKG_VERSION"
	echo "(linux: $ARCHES), with the licence files each module ships."
	echo
	echo "std (the Go standard library and runtime) $("$GO" env GOVERSION)"
	while read -r path version dir; do
		[ -n "$path" ] || continue
		echo "$path $version"
	done <<<"$modules"
	goroot=$("$GO" env GOROOT)
	gover=$("$GO" env GOVERSION)
	for f in "$goroot/LICENSE" "$goroot/PATENTS"; do
		[ -f "$f" ] || continue
		echo
		echo "=============================================================================="
		echo "Go standard library and runtime ($gover): ${f##*/}"
		echo "=============================================================================="
		cat "$f"
	done
	while read -r path version dir; do
		[ -n "$path" ] || continue
		lic=$(find "$dir" -maxdepth 1 -type f \( -iname 'licen[cs]e*' -o -iname 'copying*' \
			-o -iname 'notice*' -o -iname 'patents*' \) | sort)
		if [ -z "$lic" ]; then
			log "no licence file in $dir ($path $version)"
			exit 1
		fi
		for f in $lic; do
			echo
			echo "=============================================================================="
			echo "$path $version: ${f##*/}"
			echo "=============================================================================="
			cat "$f"
		done
	done <<<"$modules"
} | gzip -9n >"$stage/go-modules.txt.gz"
log "staged $(wc -l <<<"$modules") Go modules' licences"

# 3. packages
(cd hack && "$GO" build -trimpath -o "$OUT/build/nfpm" ./nfpm)
"$OUT/build/nfpm" -config packaging/nfpm.yaml -version "$PKG_VERSION" \
	-arch "$(echo "$ARCHES" | tr ' ' ',')" -format "$FORMATS" \
	-var "BUILD=$OUT/build" -var "STAGE=$stage" -out "$OUT" -mtime "$SOURCE_DATE_EPOCH" \
	-rpm-changelog "$stage/rpm-changelog.yml"
t2=$(date +%s)
log "version $PKG_VERSION: binaries $((t1 - t0))s, packages $((t2 - t1))s"
