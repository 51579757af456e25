#!/bin/sh
# version.sh: print the package version of the checked-out tree.
#
#   tag v1.2.3 at HEAD           1.2.3
#   3 commits after v1.2.3       1.2.3+3.gabc1234
#   no v* tag yet                0.0.0+<commits>.gabc1234
#   uncommitted changes          ... plus ".dirty" (or "+dirty" on a tag)
#   tag v1.3.0-rc.1              1.3.0~rc.1 (sorts before 1.3.0 in dpkg and rpm)
#
# Every later commit gives a higher version in dpkg and rpm ordering, so
# packages built from main upgrade each other. No Debian revision: the .deb
# is a native package (clusterrebootd_1.2.3_amd64.deb); rpm adds Release 1.
set -eu
cd "$(dirname "$0")/../.."

hash=g$(git rev-parse --short=7 HEAD)
if desc=$(git describe --tags --match 'v[0-9]*.[0-9]*.[0-9]*' --long --abbrev=7 2>/dev/null); then
	tag=${desc%-*-g*}
	rest=${desc#"$tag"-}
	n=${rest%%-*}
	base=$(printf '%s' "${tag#v}" | tr '-' '~')
else
	base=0.0.0
	n=$(git rev-list --count HEAD)
fi
v=$base
sep=+
if [ "$n" != 0 ]; then
	v=$base+$n.$hash
	sep=.
fi
# Tracked files changed (untracked ones do not count, as in git describe --dirty).
if ! git diff --quiet HEAD -- 2>/dev/null; then
	v=$v${sep}dirty
fi
printf '%s\n' "$v"
