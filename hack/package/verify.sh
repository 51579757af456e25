#!/usr/bin/env bash
# verify.sh: check a release directory the way docs/install.md tells users to.
#
#   hack/package/verify.sh DIR [KEY.asc]     # KEY default: DIR/clusterrebootd-release-key.asc
#
# 1. sha256sum -c SHA256SUMS;
# 2. gpg --verify SHA256SUMS.asc against KEY only (a temporary key ring);
# 3. every .rpm: `rpmkeys -K` with KEY imported into a temporary rpm
#    database: "digests signatures OK";
# 4. every .deb: debsig-verify with a temporary policy and key ring for KEY
#    (--policies-dir/--keyrings-dir; /etc/debsig is not touched);
# 5. every *.intoto.json (the SLSA provenance): it must be listed in
#    SHA256SUMS (so step 2 authenticated it), and `provenance verify`
#    (hack/provenance) must accept it: every package and SBOM in DIR is a
#    subject with the sha256 the statement names. A release without a
#    statement (made before there was one) is reported, not failed.
# Exits non-zero on the first file that does not verify. Trust in KEY comes
# from elsewhere (its fingerprint published out of band): a key shipped
# beside the files proves nothing by itself.
#
# Environment (optional): PROVENANCE, a built hack/provenance (else it is
# built with $GO [go] from this checkout); PROVENANCE_COMMIT and
# PROVENANCE_SOURCE_URI, the full commit and repository the provenance must
# name.
set -euo pipefail
hack=$(cd "$(dirname "$0")/.." && pwd)
dir=$(cd "${1:?usage: verify.sh DIR [KEY.asc]}" && pwd)
key=$(realpath "${2:-$dir/clusterrebootd-release-key.asc}")
tmp=$(mktemp -d)
export GNUPGHOME=$tmp/gnupg
mkdir -m 0700 "$GNUPGHOME"
trap 'gpgconf --kill all >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
say() { echo "verify: $*" >&2; }

cd "$dir"
sha256sum --quiet -c SHA256SUMS
say "SHA256SUMS: $(wc -l <SHA256SUMS) files match"

gpg --batch --quiet --import "$key" 2>/dev/null
fpr=$(gpg --batch --with-colons --fingerprint | awk -F: '$1 == "fpr" { print $10; exit }')
status=$(gpg --batch --quiet --status-fd 1 --verify SHA256SUMS.asc SHA256SUMS 2>/dev/null || true)
grep -q "^\[GNUPG:\] VALIDSIG $fpr " <<<"$status" || {
	say "SHA256SUMS.asc: no valid signature by $fpr"
	exit 1
}
say "SHA256SUMS.asc: good signature by $fpr"

rpmdb=$tmp/rpmdb
mkdir -p "$rpmdb"
rpm --dbpath "$rpmdb" --initdb
rpmkeys --dbpath "$rpmdb" --import "$key"
for r in *.rpm; do
	[ -e "$r" ] || continue
	out=$(rpmkeys --dbpath "$rpmdb" -K "$r" 2>&1) || {
		say "$out"
		exit 1
	}
	case $out in
	*": digests signatures OK") say "$out" ;;
	*)
		say "$r: not signed: $out"
		exit 1
		;;
	esac
done

# debsig-verify picks the policy directory by the signature's key id.
for d in *.deb; do
	[ -e "$d" ] || continue
	id=$({ ar p "$d" _gpgorigin 2>/dev/null || true; } | { gpg --batch --list-packets 2>/dev/null || true; } |
		sed -n 's/.*keyid \([0-9A-Fa-f]\{16\}\).*/\1/p' | sed -n 1p | tr a-f A-F)
	[ -n "$id" ] || {
		say "$d: no origin signature"
		exit 1
	}
	pol=$tmp/debsig/policies/$id
	ring=$tmp/debsig/keyrings/$id
	if [ ! -d "$pol" ]; then
		mkdir -p "$pol" "$ring"
		gpg --batch --dearmor <"$key" >"$ring/clusterrebootd.gpg"
		cat >"$pol/clusterrebootd.pol" <<EOF
<?xml version="1.0"?>
<!DOCTYPE Policy SYSTEM "https://www.debian.org/debsig/1.0/policy.dtd">
<Policy xmlns="https://www.debian.org/debsig/1.0/">
  <Origin Name="clusterrebootd" id="$id" Description="clusterrebootd release key"/>
  <Selection>
    <Required Type="origin" File="clusterrebootd.gpg" id="$id"/>
  </Selection>
  <Verification MinOptional="0">
    <Required Type="origin" File="clusterrebootd.gpg" id="$id"/>
  </Verification>
</Policy>
EOF
	fi
	debsig-verify --policies-dir "$tmp/debsig/policies" --keyrings-dir "$tmp/debsig/keyrings" "$d" >&2 || {
		say "$d: origin signature does not verify"
		exit 1
	}
done

stmts=0
for s in *.intoto.json; do
	[ -e "$s" ] || continue
	awk -v n="$s" '$2 == n { found = 1 } END { exit !found }' SHA256SUMS || {
		say "$s: not in SHA256SUMS, so not signed: refusing it"
		exit 1
	}
	prov=${PROVENANCE:-}
	if [ -z "$prov" ]; then
		prov=$tmp/provenance
		(cd "$hack" && GOOS='' GOARCH='' CGO_ENABLED=0 "${GO:-go}" build -o "$prov" ./provenance) || {
			say "$s: cannot build hack/provenance (set PROVENANCE to a built one)"
			exit 1
		}
	fi
	"$prov" verify --dir "$dir" ${PROVENANCE_COMMIT:+--commit "$PROVENANCE_COMMIT"} \
		${PROVENANCE_SOURCE_URI:+--source-uri "$PROVENANCE_SOURCE_URI"} "$s" >&2
	stmts=$((stmts + 1))
done
[ "$stmts" -gt 0 ] || say "no provenance statement (*.intoto.json) in $dir: nothing to check"
say "all signatures, checksums and provenance verified"
