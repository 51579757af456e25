#!/usr/bin/env bash
# release.sh: the release artefacts (make release) in $RELEASE_DIR [dist/release]:
#
#   clusterrebootd_<v>_amd64.deb, clusterrebootd_<v>_arm64.deb     signed with debsigs (origin)
#   clusterrebootd-<v>-1.x86_64.rpm, clusterrebootd-<v>-1.aarch64.rpm   signed with rpmsign
#   clusterrebootd_<v>_linux_{amd64,arm64}.cdx.json   CycloneDX SBOM (cyclonedx-gomod, pinned in hack/go.mod)
#   clusterrebootd_<v>.intoto.json                    SLSA v1 provenance (in-toto Statement v1, hack/provenance)
#                                                     of the signed packages and the SBOMs
#   SHA256SUMS, SHA256SUMS.asc                        checksums of all the above, detached signature
#   SHA256SUMS.unsigned                               the packages before signing (what `make package` rebuilds)
#   clusterrebootd-release-key.asc                    the public key (verify its fingerprint out of band)
#
# Needs SIGNING_KEY (fingerprint or key id of a secret key in gpg's key ring,
# GNUPGHOME if not ~/.gnupg; a passphrase comes from gpg-agent). For a try
# with a throw-away key: eval "$(hack/package/ci-key.sh)"; make release.
# Refuses a tree with uncommitted changes (ALLOW_DIRTY=1 overrides, for
# tests). Checks that signing changed nothing but the signature (the
# linters of make package-test ran on the unsigned bytes; lintian would call
# debsigs' _gpgorigin member misplaced, rpmlint wants the key in the rpm
# database), ends with hack/package/verify.sh on the result, and checks that
# a tampered copy of each package fails that verification (the package
# signature and the provenance each catch it on their own).
#
# The provenance names the full commit (git rev-parse HEAD) and the source
# repository: SOURCE_URI if set, else `git remote get-url origin` (credentials
# dropped, made git+https:// or git+ssh://), else the project's canonical
# git+https://github.com/clusterrebootd/clusterrebootd: set SOURCE_URI when
# the commit is published elsewhere. BUILDER_ID overrides the builder.id
# (default: docs/security.md#supply-chain-provenance, which says what it
# claims). The statement is signed only through SHA256SUMS.asc.
# Environment: as build.sh, plus SIGNING_KEY, GNUPGHOME, RELEASE_DIR, ALLOW_DIRTY,
# SOURCE_URI, BUILDER_ID.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
say() { echo "release: $*" >&2; }

: "${SIGNING_KEY:?SIGNING_KEY (gpg key fingerprint) is required; for a throw-away key: eval \"\$(hack/package/ci-key.sh)\"}"
GO=${GO:-go}
export VERSION=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo 0.0.0-dev)}
export COMMIT=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
export PKG_VERSION=${PKG_VERSION:-$(hack/package/version.sh)}
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)}
export GO LC_ALL=C TZ=UTC
rel=${RELEASE_DIR:-$root/dist/release}
case $rel in /*) ;; *) rel=$root/$rel ;; esac

dirty=
if ! git diff --quiet HEAD --; then
	[ "${ALLOW_DIRTY:-0}" = 1 ] || {
		say "uncommitted changes: commit them (or ALLOW_DIRTY=1 for a test release)"
		exit 1
	}
	dirty=--dirty
fi
full_commit=$(git rev-parse HEAD)
if [ -z "${SOURCE_URI:-}" ]; then
	SOURCE_URI=$(git remote get-url origin 2>/dev/null) || {
		SOURCE_URI=git+https://github.com/clusterrebootd/clusterrebootd
		say "no git remote origin: the provenance names $SOURCE_URI (set SOURCE_URI to override)"
	}
fi
stmt=clusterrebootd_${PKG_VERSION}.intoto.json

need=()
command -v rpmsign >/dev/null || need+=(rpm)
command -v debsigs >/dev/null || need+=(debsigs)
command -v debsig-verify >/dev/null || need+=(debsig-verify)
command -v gpg >/dev/null || need+=(gnupg)
if [ ${#need[@]} -gt 0 ]; then
	[ "$(id -u)" = 0 ] || {
		say "missing ${need[*]}: apt-get install ${need[*]}"
		exit 1
	}
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -qq --no-install-recommends "${need[@]}" >&2 || {
		apt-get update -qq >&2
		apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
	}
fi
gpg --batch --list-secret-keys "$SIGNING_KEY" >/dev/null 2>&1 || {
	say "no secret key $SIGNING_KEY in ${GNUPGHOME:-~/.gnupg}"
	exit 1
}

t0=$(date +%s)
started=$(date -u -d "@$t0" +%Y-%m-%dT%H:%M:%SZ)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rm -rf "$rel"
mkdir -p "$rel"

# 1. packages (unsigned, reproducible)
OUT=$tmp/build ARCHES="amd64 arm64" FORMATS=deb,rpm hack/package/build.sh
cp "$tmp"/build/*.deb "$tmp"/build/*.rpm "$rel/"
(cd "$rel" && sha256sum -- *.deb *.rpm >SHA256SUMS.unsigned)
t1=$(date +%s)

# 2. SBOMs, one per architecture (module selection depends on GOOS/GOARCH;
# the tools, cyclonedx-gomod and hack/provenance for step 4, are built for
# this machine first).
(cd hack && GOOS='' GOARCH='' "$GO" build -o "$tmp/cyclonedx-gomod" github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod)
(cd hack && GOOS='' GOARCH='' CGO_ENABLED=0 "$GO" build -o "$tmp/provenance" ./provenance)
for arch in amd64 arm64; do
	CGO_ENABLED=0 GOOS=linux GOARCH=$arch "$tmp/cyclonedx-gomod" app \
		-json -licenses -noserial -notimestamp -main cmd/clusterrebootd \
		-output "$rel/clusterrebootd_${PKG_VERSION}_linux_$arch.cdx.json" "$root" 2>&1 |
		sed 's/\x1b\[[0-9;]*m//g' >&2
	[ -s "$rel/clusterrebootd_${PKG_VERSION}_linux_$arch.cdx.json" ] || {
		say "no SBOM for $arch"
		exit 1
	}
done
t2=$(date +%s)

# 3. signatures. debsigs runs `gpg --openpgp`, which signs with SHA-1, and
# debsig-verify rejects SHA-1: a gpg wrapper first in PATH asks for SHA-512.
mkdir -p "$tmp/gpgwrap"
printf '#!/bin/sh\nexec %s --digest-algo SHA512 "$@"\n' "$(command -v gpg)" >"$tmp/gpgwrap/gpg"
chmod 0755 "$tmp/gpgwrap/gpg"
rpmsign --addsign --define "_gpg_name $SIGNING_KEY" --define "__gpg $(command -v gpg)" \
	--define "_gpg_digest_algo sha512" "$rel"/*.rpm </dev/null
# (debsigs signs only the first file it is given: one call per package.)
for d in "$rel"/*.deb; do
	PATH=$tmp/gpgwrap:$PATH debsigs --sign=origin --default-key="$SIGNING_KEY" "$d"
done
# Signing added a signature and changed nothing else: without it each
# package is the reproducible, linted build (SHA256SUMS.unsigned). rpmsign
# --delsign restores the very bytes; for a deb, debsig's ar members are
# compared (debsigs --delete rewrites the ar headers).
mkdir -p "$tmp/strip"
for r in "$rel"/*.rpm; do
	cp "$r" "$tmp/strip/"
	rpmsign --delsign "$tmp/strip/${r##*/}" >/dev/null
	cmp -s "$tmp/strip/${r##*/}" "$tmp/build/${r##*/}" || {
		say "FAIL: ${r##*/} without its signature differs from the unsigned build"
		exit 1
	}
done
for d in "$rel"/*.deb; do
	[ "$(ar t "$d" | tr '\n' ' ')" = "debian-binary control.tar.gz data.tar.xz _gpgorigin " ] || {
		say "FAIL: ${d##*/}: unexpected members $(ar t "$d" | tr '\n' ' ')"
		exit 1
	}
	for m in debian-binary control.tar.gz data.tar.xz; do
		cmp -s <(ar p "$d" "$m") <(ar p "$tmp/build/${d##*/}" "$m") || {
			say "FAIL: ${d##*/}: $m differs from the unsigned build"
			exit 1
		}
	done
done
say "signed packages equal the unsigned build plus a signature"
gpg --batch --yes --armor --export "$SIGNING_KEY" >"$rel/clusterrebootd-release-key.asc"
t3=$(date +%s)

# 4. provenance of what users download (the signed packages, the SBOMs),
# then the checksums of everything and their signature, which is what
# authenticates the provenance.
# shellcheck disable=SC2086 # $dirty is empty or one flag
"$tmp/provenance" generate --out "$rel/$stmt" --source-uri "$SOURCE_URI" --commit "$full_commit" \
	--version "$PKG_VERSION" --arches amd64,arm64 --formats deb,rpm $dirty \
	${BUILDER_ID:+--builder-id "$BUILDER_ID"} --go-version "$("$GO" env GOVERSION)" \
	--source-date-epoch "$SOURCE_DATE_EPOCH" --started "$started" --finished "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
	"$rel"/*.deb "$rel"/*.rpm "$rel"/*.cdx.json >&2
(cd "$rel" && sha256sum -- *.deb *.rpm *.cdx.json "$stmt" >SHA256SUMS)
gpg --batch --yes --local-user "$SIGNING_KEY" --digest-algo SHA512 --armor --detach-sign \
	--output "$rel/SHA256SUMS.asc" "$rel/SHA256SUMS"
t4=$(date +%s)

# 5. verify as a user would, and make sure the verification can fail.
PROVENANCE=$tmp/provenance PROVENANCE_COMMIT=$full_commit PROVENANCE_SOURCE_URI=$SOURCE_URI \
	hack/package/verify.sh "$rel"
for f in "$rel"/*_amd64.deb "$rel"/*.x86_64.rpm; do
	t=$tmp/tamper
	p=${f##*/}
	rm -rf "$t"
	mkdir -p "$t"
	cp -p "$rel"/* "$t/"
	# One byte in the middle of the payload; keep SHA256SUMS consistent
	# (as if the attacker held the key that signs it) so only the package
	# signature, or the provenance, can catch it.
	size=$(stat -c %s "$t/$p")
	printf '\xff' | dd of="$t/$p" bs=1 seek=$((size / 2)) conv=notrunc status=none
	(cd "$t" && grep -v " $p\$" SHA256SUMS >S && sha256sum -- "$p" >>S && mv S SHA256SUMS &&
		gpg --batch --yes --local-user "$SIGNING_KEY" --armor --detach-sign --output SHA256SUMS.asc SHA256SUMS)
	if out=$(PROVENANCE=$tmp/provenance hack/package/verify.sh "$t" "$rel/clusterrebootd-release-key.asc" 2>&1); then
		say "FAIL: a tampered $p passed verification"
		exit 1
	fi
	# It must fail on that package, not on something else in the copy.
	grep -qF "$p" <<<"$out" || {
		say "FAIL: verification of a tampered $p failed without naming it:"
		echo "$out" >&2
		exit 1
	}
	say "a tampered $p fails verification, as it must: $(grep -F "$p" <<<"$out" | tail -1)"
	if out=$("$tmp/provenance" verify --dir "$t" "$t/$stmt" 2>&1); then
		say "FAIL: the provenance accepts a tampered $p"
		exit 1
	fi
	grep -qF "FAIL: $p: sha256 " <<<"$out" || {
		say "FAIL: the provenance check of a tampered $p failed for another reason:"
		echo "$out" >&2
		exit 1
	}
	say "the provenance rejects a tampered $p too"
done
t5=$(date +%s)
ls -l "$rel" >&2
say "version $PKG_VERSION in $rel: packages $((t1 - t0))s, SBOMs $((t2 - t1))s, signing $((t3 - t2))s, provenance $((t4 - t3))s, verification $((t5 - t4))s"
