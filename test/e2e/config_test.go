//go:build e2e

package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// The holder and reboot method the nodes use: the production path, the
// holder as the transient unit clusterrebootd-hold.service and the reboot
// through logind over D-Bus. E2E_HOLDER=foreground E2E_REBOOT_METHOD=command
// runs the fallback path (the check runs the holder in-process and reboots
// with `systemctl reboot`).
const (
	defaultHolder       = "transient"
	defaultRebootMethod = "logind"
)

// Paths inside a node.
const (
	gateScriptPath = "/etc/clusterrebootd/health.d/cluster-gate"
	gateFlagDir    = "/etc/clusterrebootd/e2e"
	rebootRequired = "/run/reboot-required"
)

// timerDropIn makes the shipped timer tick every few seconds.
const timerDropIn = `# e2e: tick every 3 seconds instead of every 5 minutes.
[Timer]
OnBootSec=1s
OnCalendar=
OnCalendar=*:*:0/3
RandomizedDelaySec=1s
AccuracySec=1s
`

// networkFile gives the node's host0 its static address on the bridge.
const networkFile = `[Match]
Name=host0

[Network]
Address=%s/24
LinkLocalAddressing=no
IPv6AcceptRA=no
`

// gateScript is the operator's health script on every node, steered by flag
// files the test writes into /etc/clusterrebootd/e2e/ (they survive reboots).
const gateScript = `#!/bin/sh
# e2e cluster gate. Flag files in /etc/clusterrebootd/e2e/:
#   deny            refuse in every phase
#   deny-PHASE      refuse in one phase (pre-lock, under-lock, post-boot)
#   sleep-PHASE     sleep that many seconds first (under-lock: holds the mutex)
d=/etc/clusterrebootd/e2e
echo "e2e gate: phase=$CLUSTERREBOOTD_PHASE node=$NODE_NAME size=$CLUSTER_SIZE healthy=$HEALTHY_NODES rebooting=$REBOOTING_NODES"
if [ -f "$d/sleep-$CLUSTERREBOOTD_PHASE" ]; then
	sleep "$(cat "$d/sleep-$CLUSTERREBOOTD_PHASE")"
fi
if [ -e "$d/deny" ] || [ -e "$d/deny-$CLUSTERREBOOTD_PHASE" ]; then
	echo "e2e gate: denied by flag file"
	exit 1
fi
exit 0
`

// nodeConfig is what differs between nodes and scenarios in
// /etc/clusterrebootd/config.toml.
type nodeConfig struct {
	Node, IP      string
	Cluster       string
	Endpoints     []string
	LockTTL       string // lock.ttl
	HealthTimeout string // health.timeout, below LockTTL
	MaxHoldWait   string
	Holder        string // [systemd] holder
	RebootMethod  string // [reboot] method
}

func defaultNodeConfig(cluster string, endpoints []string) nodeConfig {
	c := nodeConfig{Cluster: cluster, Endpoints: endpoints, LockTTL: "10s", HealthTimeout: "5s",
		MaxHoldWait: "3m", Holder: defaultHolder, RebootMethod: defaultRebootMethod}
	if v := os.Getenv(envHolder); v != "" {
		c.Holder = v
	}
	if v := os.Getenv(envReboot); v != "" {
		c.RebootMethod = v
	}
	return c
}

func (c nodeConfig) render() string {
	eps := make([]string, len(c.Endpoints))
	for i, e := range c.Endpoints {
		eps[i] = strconv.Quote(e)
	}
	reboot := fmt.Sprintf("method = %q\n", c.RebootMethod)
	if c.RebootMethod == "command" {
		reboot += `command = ["/usr/bin/systemctl", "reboot"]` + "\n"
	}
	return fmt.Sprintf(`# e2e node configuration, written by test/e2e.
node_name = %q
cluster = %q
alive_ttl = "1m"

[[detector]]
type = "file"
path = %q
timeout = "10s"

[health]
script = %q
timeout = %q
healthy_states = ["running"]

[etcd]
endpoints = [%s]
dial_timeout = "2s"
request_timeout = "3s"

[lock]
ttl = %q
max_concurrent = 1
max_hold_wait = %q
backoff_min = "1s"
backoff_max = "2s"
max_reboot_duration = "5m"

[reboot]
%s
[systemd]
holder = %q

[metrics]
textfile = ""
`, c.Node, c.Cluster, rebootRequired, gateScriptPath, c.HealthTimeout, strings.Join(eps, ", "),
		c.LockTTL, c.MaxHoldWait, reboot, c.Holder)
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}
