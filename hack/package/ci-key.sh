#!/usr/bin/env bash
# ci-key.sh: a throw-away GPG signing key, for CI and for trying
# `make release` locally. Never use it for packages anyone installs.
#
#   eval "$(hack/package/ci-key.sh)"      # exports GNUPGHOME and SIGNING_KEY
#   eval "$(hack/package/ci-key.sh DIR)"  # the key ring in DIR (created)
#
# RSA 3072, no passphrase, expires after one day. Prints the two export
# lines on stdout, everything else on stderr. Stop its gpg-agent afterwards
# with `gpgconf --kill all` (GNUPGHOME still exported).
set -euo pipefail
home=${1:-$(mktemp -d -t clusterrebootd-ci-gnupg.XXXXXX)}
mkdir -p "$home"
chmod 0700 "$home"
export GNUPGHOME=$home
gpg --batch --quiet --pinentry-mode loopback --passphrase '' \
	--quick-gen-key "clusterrebootd CI throw-away key <ci@clusterrebootd.invalid>" rsa3072 sign 1d >&2
fpr=$(gpg --batch --with-colons --list-secret-keys | awk -F: '$1 == "fpr" { print $10; exit }')
[ -n "$fpr" ] || {
	echo "ci-key: no key generated" >&2
	exit 1
}
echo "ci-key: throw-away key $fpr in $home" >&2
printf 'export GNUPGHOME=%q\nexport SIGNING_KEY=%q\n' "$home" "$fpr"
