#!/bin/sh
# Latency and loss on one link of the e2e suite's own network namespaces.
#
#   netem.sh apply NETNS DEV DELAY_MS JITTER_MS LOSS_PERCENT
#   netem.sh clear NETNS DEV
#
# apply prints what it could install:
#   netem                        tc netem: delay, jitter and loss
#   nfqueue-delay+iptables-loss  on kernels without sch_netem: delay and
#                                jitter by hack/nfdelay on NFQUEUE queue 0 of
#                                the namespace (packets coming in on DEV), loss
#                                by random drop in both directions with the
#                                iptables statistic match
#   nfqueue-delay                the same, LOSS_PERCENT 0
#   iptables-loss                loss only: DELAY_MS 0, or no nfdelay binary
#                                (and no go to build one)
# Exit 3: none of them is possible.
#
# nfdelay: $NFDELAY_BIN, else built from hack/nfdelay into the state
# directory. Its pid file and log, and the loss rule's probability, live in
# /run/clusterrebootd-e2e (the e2e suite's state directory, cleaned up by
# its next run; $NETEM_STATE_DIR moves it, for trying the script by hand).
# clear deletes the NFQUEUE rule first (no new packet is queued), then stops nfdelay with SIGTERM (it accepts what it holds,
# unbinds and exits) and waits for it, then deletes the loss rules; it
# prints nfdelay's summary line and is idempotent. apply clears first.
# Only namespaces of the e2e suite (cre2e-*) are touched.
#
# netem delays what leaves DEV; nfdelay delays what comes in on DEV. Both add
# the delay once per packet crossing the link in one direction and the same
# to every round trip. Not on the way out: a locally sent packet held in the
# queue still counts against its TCP socket, and TCP small queues then let a
# flow have about two packets in the queue per delay (a 32 MB transfer over
# 50 ms: >10 minutes on the way out, 1.2 s on the way in, where the receive
# path has already let go of the sending socket).
set -eu

usage() { echo "usage: $0 apply NETNS DEV DELAY_MS JITTER_MS LOSS_PERCENT | clear NETNS DEV" >&2; exit 2; }
[ $# -ge 3 ] || usage
cmd=$1 ns=$2 dev=$3
case $ns in cre2e-*) ;; *) echo "netem.sh: refusing namespace $ns (not cre2e-*)" >&2; exit 2 ;; esac
in_ns() { ip netns exec "$ns" "$@"; }
state=${NETEM_STATE_DIR:-/run/clusterrebootd-e2e}
tag=cre2e-loss
dtag=cre2e-delay
queue=0
pidf=$state/nfdelay-$ns.pid
logf=$state/nfdelay-$ns.log

clear_loss() {
	command -v iptables >/dev/null 2>&1 || return 0
	for chain in INPUT OUTPUT; do
		while in_ns iptables -w -D "$chain" -m comment --comment "$tag" -m statistic --mode random \
			--probability "$1" -j DROP 2>/dev/null; do :; done
	done
}

nfqueue_rule() { # -A or -D
	in_ns iptables -w "$1" INPUT -i "$dev" -m comment --comment "$dtag" -j NFQUEUE --queue-num "$queue" --queue-bypass
}

# is_nfdelay PID: the pid is (still) an nfdelay of this namespace.
is_nfdelay() {
	tr '\0' ' ' 2>/dev/null <"/proc/$1/cmdline" | grep -qF -- "--pidfile $pidf"
}

stop_nfdelay() {
	[ -f "$pidf" ] || return 0
	pid=$(cat "$pidf" 2>/dev/null || true)
	case $pid in '' | *[!0-9]*) rm -f "$pidf"; return 0 ;; esac
	if is_nfdelay "$pid"; then
		kill -TERM "$pid" 2>/dev/null || true
		i=0
		while is_nfdelay "$pid" && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
		if is_nfdelay "$pid"; then
			echo "netem.sh: nfdelay $pid did not exit within 10s of SIGTERM: SIGKILL" >&2
			kill -KILL "$pid" 2>/dev/null || true
		fi
	fi
	rm -f "$pidf"
}

# nfdelay_bin prints the nfdelay binary to use, building it when needed;
# nothing when there is none.
nfdelay_bin() {
	if [ -n "${NFDELAY_BIN:-}" ]; then
		[ -x "$NFDELAY_BIN" ] && echo "$NFDELAY_BIN"
		return 0
	fi
	[ -x "$state/nfdelay" ] && { echo "$state/nfdelay"; return 0; }
	command -v go >/dev/null 2>&1 || return 0
	repo=$(cd "$(dirname "$0")/../.." && pwd)
	(cd "$repo/hack" && go build -o "$state/nfdelay" ./nfdelay) >&2 && echo "$state/nfdelay"
	return 0
}

# start_nfdelay DELAY_MS JITTER_MS: nfdelay bound to the queue, then the
# rule that queues the link's incoming packets.
start_nfdelay() {
	bin=$(nfdelay_bin)
	if [ -z "$bin" ]; then
		echo "netem.sh: no nfdelay (NFDELAY_BIN unset or not executable, no go to build it): no delay" >&2
		return 1
	fi
	rm -f "$pidf"
	# Not through the in_ns function: dash would leak its saved copy of
	# stdout into the background process, and whoever reads this script's
	# output would wait for nfdelay to exit.
	ip netns exec "$ns" "$bin" --queue "$queue" --delay "${1}ms" --jitter "${2}ms" --pidfile "$pidf" </dev/null >>"$logf" 2>&1 &
	child=$!
	i=0
	while [ ! -s "$pidf" ]; do
		if ! kill -0 "$child" 2>/dev/null || [ $i -ge 100 ]; then
			echo "netem.sh: nfdelay did not bind queue $queue in $ns:" >&2
			tail -n 5 "$logf" >&2 || true
			kill -TERM "$child" 2>/dev/null || true
			return 3
		fi
		sleep 0.1
		i=$((i + 1))
	done
	if ! nfqueue_rule -A; then
		echo "netem.sh: cannot add the NFQUEUE rule in $ns" >&2
		stop_nfdelay
		return 3
	fi
}

# clear_all removes whatever apply installed; idempotent.
clear_all() {
	in_ns tc qdisc del dev "$dev" root 2>/dev/null || true
	if command -v iptables >/dev/null 2>&1; then
		while nfqueue_rule -D 2>/dev/null; do :; done
	fi
	stop_nfdelay
	if [ -f "$logf" ]; then
		grep 'unbound:' "$logf" | tail -n 1 || true
		rm -f "$logf"
	fi
	f=$state/loss-$ns
	if [ -f "$f" ]; then
		clear_loss "$(cat "$f")"
		rm -f "$f"
	fi
}

case $cmd in
apply)
	[ $# -eq 6 ] || usage
	delay=$4 jitter=$5 loss=$6
	if in_ns tc qdisc replace dev "$dev" root netem delay "${delay}ms" "${jitter}ms" loss "${loss}%" 2>/dev/null; then
		echo netem
		exit 0
	fi
	if ! command -v iptables >/dev/null 2>&1; then
		echo "netem.sh: no sch_netem in this kernel and no iptables: cannot add latency or loss" >&2
		exit 3
	fi
	mkdir -p "$state"
	clear_all >/dev/null
	how=
	# Loss first: a packet the NFQUEUE verdict accepts skips the rest of
	# the chain, so the drop rule must come before the queue rule.
	if [ "$loss" != 0 ]; then
		p=$(awk "BEGIN { printf \"%.4f\", $loss / 100 }")
		for chain in INPUT OUTPUT; do
			in_ns iptables -w -A "$chain" -m comment --comment "$tag" -m statistic --mode random --probability "$p" -j DROP
		done
		echo "$p" >"$state/loss-$ns"
		how=iptables-loss
	fi
	if [ "$delay" != 0 ]; then
		rc=0
		start_nfdelay "$delay" "$jitter" || rc=$?
		case $rc in
		0) how=nfqueue-delay${how:++$how} ;;
		1) ;; # no binary: loss only
		*) clear_all >/dev/null; exit 3 ;;
		esac
	fi
	echo "${how:-iptables-loss}"
	;;
clear)
	[ $# -eq 3 ] || usage
	clear_all
	;;
*) usage ;;
esac
