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
	gateScriptPath  = "/etc/clusterrebootd/health.d/cluster-gate"
	gateFlagDir     = "/etc/clusterrebootd/e2e"
	rebootRequired  = "/run/reboot-required"
	nodeHealthPath  = "/etc/clusterrebootd/health.d/e2e-node-health"
	slowRebootPath  = "/usr/local/sbin/e2e-slow-reboot"
	slowRebootSleep = 20 // seconds slowRebootPath waits before `systemctl reboot`
	holdUnit        = "clusterrebootd-hold.service"
	checkUnit       = "clusterrebootd-check.service"
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

// nodeHealthScript is the node_health_command of scenarios that steer a
// node's own health: the flag file "unhealthy" in /etc/clusterrebootd/e2e/
// makes the node report itself unhealthy in its alive record.
const nodeHealthScript = `#!/bin/sh
if [ -e /etc/clusterrebootd/e2e/unhealthy ]; then
	echo "e2e node health: unhealthy by flag file"
	exit 1
fi
exit 0
`

// slowRebootScript is a reboot command that can take its time: with the
// flag file "slow-reboot" in /etc/clusterrebootd/e2e/ it sleeps first, the
// window between the fenced slot write and the reboot in which a holder
// can die; without it, it reboots at once.
var slowRebootScript = fmt.Sprintf(`#!/bin/sh
if [ -e /etc/clusterrebootd/e2e/slow-reboot ]; then
	echo "e2e slow reboot: systemctl reboot in %[1]d s"
	sleep %[1]d
fi
exec /usr/bin/systemctl reboot
`, slowRebootSleep)

// nodeConfig is what differs between nodes and scenarios in
// /etc/clusterrebootd/config.toml.
type nodeConfig struct {
	Node, IP      string
	Cluster       string
	Endpoints     []string
	LockTTL       string // lock.ttl
	HealthTimeout string // health.timeout, below LockTTL
	MaxHoldWait   string
	Holder        string   // [systemd] holder
	RebootMethod  string   // [reboot] method
	RebootCommand []string // [reboot] command for method "command" (default systemctl reboot)
	// RespectInhibitors is [reboot] respect_inhibitors (the product's
	// default, true, unless a scenario says otherwise).
	RespectInhibitors bool
	FallbackNodes     []string // [policy] fallback_nodes
	NodeHealthCommand []string // [health] node_health_command
	MaxRebootDuration string   // [lock] max_reboot_duration
}

func defaultNodeConfig(cluster string, endpoints []string) nodeConfig {
	c := nodeConfig{Cluster: cluster, Endpoints: endpoints, LockTTL: "10s", HealthTimeout: "5s",
		MaxHoldWait: "3m", Holder: defaultHolder, RebootMethod: defaultRebootMethod, RespectInhibitors: true,
		MaxRebootDuration: "5m"}
	if v := os.Getenv(envHolder); v != "" {
		c.Holder = v
	}
	if v := os.Getenv(envReboot); v != "" {
		c.RebootMethod = v
	}
	return c
}

// tomlList renders a TOML array of strings.
func tomlList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// holderUnit is the unit a node's holder runs in: the transient holder
// unit, or the check unit itself with holder = "foreground".
func (c nodeConfig) holderUnit() string {
	if c.Holder == "foreground" {
		return checkUnit
	}
	return holdUnit
}

func (c nodeConfig) render() string {
	reboot := fmt.Sprintf("method = %q\nrespect_inhibitors = %t\n", c.RebootMethod, c.RespectInhibitors)
	if c.RebootMethod == "command" {
		cmd := c.RebootCommand
		if len(cmd) == 0 {
			cmd = []string{"/usr/bin/systemctl", "reboot"}
		}
		reboot += "command = " + tomlList(cmd) + "\n"
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
node_health_command = %s

[etcd]
endpoints = %s
dial_timeout = "2s"
request_timeout = "3s"

[lock]
ttl = %q
max_concurrent = 1
max_hold_wait = %q
backoff_min = "1s"
backoff_max = "2s"
max_reboot_duration = %q

[policy]
fallback_nodes = %s

[reboot]
%s
[systemd]
holder = %q

[metrics]
textfile = ""
`, c.Node, c.Cluster, rebootRequired, gateScriptPath, c.HealthTimeout, tomlList(c.NodeHealthCommand),
		tomlList(c.Endpoints), c.LockTTL, c.MaxHoldWait, c.MaxRebootDuration, tomlList(c.FallbackNodes), reboot, c.Holder)
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}
