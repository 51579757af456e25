#!/bin/sh
# Latency and loss on one link of the e2e suite's own network namespaces.
#
#   netem.sh apply NETNS DEV DELAY_MS JITTER_MS LOSS_PERCENT
#   netem.sh clear NETNS DEV
#
# apply prints what it could install: "netem" (tc netem: delay, jitter and
# loss), or, on kernels without sch_netem, "iptables-loss" (random drop of
# that share of packets in both directions with the iptables statistic match
# inside the namespace: loss only, no delay). Exit 3: neither is possible.
# Only namespaces of the e2e suite (cre2e-*) are touched; clear removes both
# and is idempotent.
set -eu

usage() { echo "usage: $0 apply NETNS DEV DELAY_MS JITTER_MS LOSS_PERCENT | clear NETNS DEV" >&2; exit 2; }
[ $# -ge 3 ] || usage
cmd=$1 ns=$2 dev=$3
case $ns in cre2e-*) ;; *) echo "netem.sh: refusing namespace $ns (not cre2e-*)" >&2; exit 2 ;; esac
in_ns() { ip netns exec "$ns" "$@"; }
tag=cre2e-loss

clear_loss() {
	command -v iptables >/dev/null 2>&1 || return 0
	for chain in INPUT OUTPUT; do
		while in_ns iptables -w -D "$chain" -m comment --comment "$tag" -m statistic --mode random \
			--probability "$1" -j DROP 2>/dev/null; do :; done
	done
}

case $cmd in
apply)
	[ $# -eq 6 ] || usage
	delay=$4 jitter=$5 loss=$6
	if in_ns tc qdisc replace dev "$dev" root netem delay "${delay}ms" "${jitter}ms" loss "${loss}%" 2>/dev/null; then
		echo netem
		exit 0
	fi
	if command -v iptables >/dev/null 2>&1; then
		p=$(awk "BEGIN { printf \"%.4f\", $loss / 100 }")
		for chain in INPUT OUTPUT; do
			in_ns iptables -w -A "$chain" -m comment --comment "$tag" -m statistic --mode random --probability "$p" -j DROP
		done
		echo "$p" >"/run/clusterrebootd-e2e/loss-$ns" 2>/dev/null || true
		echo iptables-loss
		exit 0
	fi
	echo "netem.sh: no sch_netem in this kernel and no iptables: cannot add latency or loss" >&2
	exit 3
	;;
clear)
	in_ns tc qdisc del dev "$dev" root 2>/dev/null || true
	f=/run/clusterrebootd-e2e/loss-$ns
	if [ -f "$f" ]; then
		clear_loss "$(cat "$f")"
		rm -f "$f"
	fi
	;;
*) usage ;;
esac
