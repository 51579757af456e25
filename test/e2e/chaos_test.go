//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/cluster"
)

// The chaos matrix: randomized runs that combine one etcd fault with one
// node fault on a 3-node cluster in which every node needs a reboot. Every
// run is judged by the history checker (checkSafety); a run that does not
// finish (a node never rebooted and released) is a liveness failure,
// reported apart from safety violations.
//
//	E2E_CHAOS_RUNS=N   number of runs (unset or 0: TestChaos skips). The
//	                   matrix has len(etcdFaults)*len(nodeFaults)-1 = 39
//	                   combinations and the space quota scenario (40),
//	                   shuffled by the seed; N >= 40 covers each at least
//	                   once.
//	E2E_CHAOS_SEED=S   the seed (default: the time; printed).
//	E2E_CHAOS_ETCD=F   only combinations with these etcd faults (comma
//	                   separated names, e.g. etcd-latency-loss; default all).
const (
	envChaosRuns = "E2E_CHAOS_RUNS"
	envChaosSeed = "E2E_CHAOS_SEED"
	envChaosEtcd = "E2E_CHAOS_ETCD"
)

// Node faults.
const (
	nfNone           = "nodes-ok"
	nfKillQueued     = "holder-killed-queued"           // SIGKILL of a holder waiting in the mutex queue
	nfKillMutex      = "holder-killed-holding-mutex"    // SIGKILL while it owns the mutex (under-lock script)
	nfKillAfterSlot  = "holder-killed-after-slot-write" // SIGKILL of the holder unit while its reboot command sleeps
	nfKillRebootCall = "holder-killed-in-reboot-call"   // SIGKILL right after its slot appeared (marker, logind call)
	nfPowerOff       = "node-powered-off-rebooting"     // never comes back: overdue slot, cluster frozen, `release --node`
	nfPartitionMutex = "node-partitioned-holding-mutex" // cut off while it owns the mutex, longer than lock.ttl
	nfUnhealthy      = "node-unhealthy-after-boot"      // new boot_id, post-boot health fails: slot kept
)

var nodeFaults = []string{nfNone, nfKillQueued, nfKillMutex, nfKillAfterSlot, nfKillRebootCall, nfPowerOff, nfPartitionMutex, nfUnhealthy}

type chaosCombo struct{ etcd, node string }

type chaosTotals struct {
	mu                                 sync.Mutex
	runs, faultRuns, violations, stuck int
	failed                             []string
}

func TestChaos(t *testing.T) {
	runs, _ := strconv.Atoi(os.Getenv(envChaosRuns))
	if runs <= 0 {
		t.Skipf("chaos matrix: set %s=N to run it (make chaos)", envChaosRuns)
	}
	seed := uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv(envChaosSeed), 10, 64); err == nil {
		seed = v
	}
	var combos []chaosCombo
	for _, e := range etcdFaults {
		for _, n := range nodeFaults {
			if e != efNone || n != nfNone {
				combos = append(combos, chaosCombo{e, n})
			}
		}
	}
	// The space quota needs an etcd of its own: with healthy nodes only.
	combos = append(combos, chaosCombo{efQuota, nfNone})
	if only := os.Getenv(envChaosEtcd); only != "" {
		want := strings.Split(only, ",")
		combos = slices.DeleteFunc(combos, func(c chaosCombo) bool { return !slices.Contains(want, c.etcd) })
		if len(combos) == 0 {
			t.Fatalf("%s=%s: no such etcd fault (have %v and %s)", envChaosEtcd, only, etcdFaults, efQuota)
		}
	}
	r := rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d))
	r.Shuffle(len(combos), func(i, j int) { combos[i], combos[j] = combos[j], combos[i] })
	t.Logf("chaos: %d runs of %d combinations, %s=%d", runs, len(combos), envChaosSeed, seed)
	tot := &chaosTotals{}
	t0 := time.Now()
	for i := range runs {
		c := combos[i%len(combos)]
		runSeed := seed + uint64(i)
		name := fmt.Sprintf("%02d-%s+%s", i+1, c.etcd, c.node)
		t.Run(name, func(t *testing.T) {
			var v int
			var stuck bool
			if c.etcd == efQuota {
				v = chaosQuota(t)
			} else {
				v, stuck = chaosRun(t, c, runSeed)
			}
			tot.mu.Lock()
			defer tot.mu.Unlock()
			tot.runs++
			tot.faultRuns++ // every combination has at least one fault
			tot.violations += v
			if stuck {
				tot.stuck++
			}
			if t.Failed() {
				tot.failed = append(tot.failed, fmt.Sprintf("%s (seed %d)", name, runSeed))
			}
		})
	}
	t.Logf("chaos: %d fault runs in %v: %d safety violation(s), %d liveness failure(s); failed runs: %v",
		tot.faultRuns, time.Since(t0).Round(time.Second), tot.violations, tot.stuck, tot.failed)
}

// chaosRun is one run: it returns the safety violations the history checker
// found and whether the run got stuck (liveness).
func chaosRun(t *testing.T, c chaosCombo, seed uint64) (violations int, stuck bool) {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	const ttl = 10 * time.Second
	sc := newScenario(t, "chaos", 3, func(cfg *nodeConfig) {
		cfg.LockTTL, cfg.HealthTimeout = ttl.String(), "8s"
		switch c.node {
		case nfKillAfterSlot:
			cfg.RebootMethod, cfg.RebootCommand = "command", []string{slowRebootPath}
		case nfPowerOff:
			cfg.MaxRebootDuration = "30s"
		}
	})
	defer func() { violations = sc.violations }()
	victim := sc.nodes[r.IntN(len(sc.nodes))]
	var other *Node // a node that is not the victim
	for _, n := range sc.nodes {
		if n != victim {
			other = n
			break
		}
	}
	powerCut := r.IntN(2) == 0 // nfPowerOff: SIGTERM to nspawn once the slot exists, else no restart after the reboot
	t.Logf("chaos run: seed %d, victim %s", seed, victim.Name)
	flag := func(n *Node, name, v string) {
		if err := n.setFlag(name, v); err != nil {
			t.Fatal(err)
		}
	}
	switch c.node {
	case nfKillQueued:
		flag(other, "sleep-under-lock", "6")
	case nfKillMutex, nfPartitionMutex:
		flag(victim, "sleep-under-lock", "6")
	case nfKillAfterSlot:
		flag(victim, "slow-reboot", "1")
	case nfUnhealthy:
		flag(victim, "deny-post-boot", "chaos: unhealthy after boot")
	}
	sc.boot()
	sc.waitRegistered()
	if c.node == nfPowerOff && !powerCut {
		victim.noRestart() // after its first boot: the supervisor checks the flag before every start
		sc.tl.note(victim.Name, "will not come back after its next reboot")
	}
	// Each node is told once that it needs a reboot (/run/reboot-required;
	// a second touch after its reboot would make it reboot again).
	told := map[*Node]bool{}
	need := func(ns ...*Node) {
		for _, n := range ns {
			if !told[n] {
				told[n] = true
				sc.needReboot(n)
			}
		}
	}
	etcdDone := sc.etcdFault(c.etcd, r, time.Duration(r.IntN(8000))*time.Millisecond, ttl)

	// The node fault, while the etcd fault runs its course.
	switch c.node {
	case nfNone, nfUnhealthy:
		need(sc.nodes...)
	case nfKillQueued:
		need(other)
		if sc.poll(60*time.Second, func() bool { o, _ := sc.lockOwner(); return o == other.Name }) {
			need(victim)
			if sc.poll(30*time.Second, func() bool {
				q, _ := sc.lockQueue()
				return len(q) >= 2 && q[0] != victim.Name && slices.Contains(q, victim.Name)
			}) {
				sc.killAll(victim, "queued behind "+other.Name)
			} else {
				t.Logf("chaos: %s never queued behind %s (etcd fault); no kill", victim.Name, other.Name)
			}
		}
		need(sc.nodes...)
		flag(other, "sleep-under-lock", "")
	case nfKillMutex, nfPartitionMutex:
		need(victim)
		if sc.poll(60*time.Second, func() bool { o, _ := sc.lockOwner(); return o == victim.Name }) {
			if c.node == nfKillMutex {
				sc.killAll(victim, "holding the mutex")
			} else {
				d := ttl + time.Duration(2000+r.IntN(8000))*time.Millisecond
				sc.partition(victim, true)
				need(sc.nodes...)
				time.Sleep(d)
				sc.partition(victim, false)
			}
		} else {
			t.Logf("chaos: %s never owned the mutex (etcd fault); no node fault", victim.Name)
		}
		flag(victim, "sleep-under-lock", "")
		need(sc.nodes...)
	case nfKillAfterSlot, nfKillRebootCall:
		need(sc.nodes...)
		every := 200 * time.Millisecond
		if c.node == nfKillRebootCall {
			every = 10 * time.Millisecond // the window between the slot write and the reboot call is short
		}
		got := sc.pollEvery(3*time.Minute, every, func() bool {
			if c.node == nfKillAfterSlot {
				_, err := victim.Exec(5*time.Second, "pgrep", "-f", slowRebootPath)
				return err == nil
			}
			s, _ := sc.slots()
			return slices.Contains(s, victim.Name)
		})
		if got {
			if c.node == nfKillAfterSlot {
				if _, err := victim.Exec(10*time.Second, "systemctl", "kill", "--signal=KILL", sc.cfg.holderUnit()); err != nil {
					t.Logf("chaos: kill the holder unit: %v", err)
				}
				sc.tl.note(victim.Name, "systemctl kill --signal=KILL %s (holder and its sleeping reboot command)", sc.cfg.holderUnit())
			} else {
				time.Sleep(time.Duration(r.IntN(40)) * time.Millisecond)
				sc.killAll(victim, "its slot appeared (marker, reboot call)")
			}
			flag(victim, "slow-reboot", "")
			if !sc.poll(15*time.Second, func() bool { return sc.reboots(victim) > 0 }) {
				sc.operatorReboot(victim)
			}
		}
	case nfPowerOff:
		need(sc.nodes...)
		if powerCut && sc.pollEvery(3*time.Minute, 10*time.Millisecond, func() bool { s, _ := sc.slots(); return slices.Contains(s, victim.Name) }) {
			victim.powerOff()
			sc.tl.note(victim.Name, "powered off (SIGTERM to nspawn) while holding its slot; never comes back")
		}
		sc.recoverPoweredOff(victim, other)
	}

	select {
	case err := <-etcdDone:
		if err != nil {
			t.Errorf("etcd fault %s: %v", c.etcd, err)
		}
	case <-time.After(3 * time.Minute):
		t.Errorf("etcd fault %s did not end", c.etcd)
	}
	if c.node == nfUnhealthy {
		sc.poll(3*time.Minute, func() bool { return sc.reboots(victim) > 0 && len(sc.bootIDs(victim)) >= 2 })
		sc.hold(time.Duration(6000+r.IntN(9000))*time.Millisecond, "victim back but unhealthy: its slot protects the cluster", func() string {
			if s, err := sc.slots(); err == nil && sc.reboots(victim) > 0 && !slices.Equal(s, []string{victim.Name}) {
				return fmt.Sprintf("slots %v while %s is back but unhealthy", s, victim.Name)
			}
			return ""
		})
		flag(victim, "deny-post-boot", "")
	}

	// Liveness: every node that is still there reboots once and releases.
	want := sc.nodes
	if c.node == nfPowerOff {
		want = slices.DeleteFunc(slices.Clone(sc.nodes), func(n *Node) bool { return n == victim })
	}
	if !sc.poll(5*time.Minute, func() bool { return sc.completed(want...) }) {
		stuck = true
		hist, _ := sc.history()
		var ends []string
		for _, n := range sc.nodes {
			end := ""
			for _, h := range hist {
				if h.Node == n.Name && slotEnders[h.Event] {
					end = h.Event
				}
			}
			ends = append(ends, fmt.Sprintf("%s: %d reboot(s), last slot end %q", n.Name, sc.reboots(n), end))
		}
		slots, _ := sc.slots()
		t.Errorf("LIVENESS: not every node rebooted and released within 5 minutes after the faults: %s; slots %v", strings.Join(ends, "; "), slots)
	}
	for _, n := range sc.nodes {
		if r := sc.reboots(n); r > 1 {
			t.Errorf("%s rebooted %d times, want at most once", n.Name, r)
		}
	}
	sc.checkSafety()
	return sc.violations, stuck
}

// poll waits (bounded) until cond holds; false when it did not.
func (sc *scenario) poll(timeout time.Duration, cond func() bool) bool {
	return sc.pollEvery(timeout, 100*time.Millisecond, cond)
}

func (sc *scenario) pollEvery(timeout, every time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(every)
	}
}

// completed: each node's last slot ended with its post-boot release, and
// no slot is left. (Not lastEnd: a holder killed between its slot write and
// its reboot-requested record may still reboot, the slot is then released
// after the boot without a request on record.)
func (sc *scenario) completed(nodes ...*Node) bool {
	hist, err := sc.history()
	if err != nil {
		return false
	}
	for _, n := range nodes {
		end := ""
		for _, h := range hist {
			if h.Node == n.Name && slotEnders[h.Event] {
				end = h.Event
			}
		}
		if end != cluster.EventCompleted {
			return false
		}
	}
	slots, err := sc.slots()
	return err == nil && len(slots) == 0
}

// killAll SIGKILLs every clusterrebootd process on the node.
func (sc *scenario) killAll(n *Node, when string) {
	_, err := n.Exec(10*time.Second, "pkill", "-KILL", "-x", "clusterrebootd")
	sc.tl.note(n.Name, "SIGKILL every clusterrebootd process (%s) (%v)", when, err)
}

// operatorReboot reboots a node by hand, as an operator would, but only when
// it holds a slot for its current boot (a reboot in progress that never
// came): a reboot outside a slot would be the test's own violation.
func (sc *scenario) operatorReboot(n *Node) {
	boot, err := n.bootID()
	if err != nil {
		return
	}
	resp, err := sc.s.etcd.get(sc.prefix + "/slots/" + n.Name)
	if err != nil || len(resp.Kvs) != 1 || !strings.Contains(string(resp.Kvs[0].Value), boot) {
		sc.tl.note(n.Name, "no operator reboot: no slot for the current boot (%v)", err)
		return
	}
	_, err = n.Exec(20*time.Second, "systemctl", "reboot")
	sc.tl.note(n.Name, "systemctl reboot by the operator: slot held, reboot never came (%v)", err)
}

// recoverPoweredOff: the victim went down with its slot and never comes
// back. The cluster stays frozen (nobody else reboots) past the slot's
// deadline; then an operator frees the slot with `release --node` on
// another node and the others go on.
func (sc *scenario) recoverPoweredOff(victim, other *Node) {
	t := sc.t
	var slot cluster.Slot
	var downNoSlot time.Time // since when the victim is down without a slot
	held := false
	sc.poll(4*time.Minute, func() bool {
		if victim.up() {
			return false
		}
		resp, err := sc.s.etcd.get(sc.prefix + "/slots/" + victim.Name)
		if err == nil && len(resp.Kvs) == 1 && json.Unmarshal(resp.Kvs[0].Value, &slot) == nil {
			held = true
			return true
		}
		if err == nil && downNoSlot.IsZero() {
			downNoSlot = time.Now()
		}
		// Gone without a slot (its holder gave the slot back before the
		// power went): nothing to recover.
		return !downNoSlot.IsZero() && time.Since(downNoSlot) > 10*time.Second
	})
	if !held {
		t.Logf("chaos: %s did not go down holding its slot", victim.Name)
		return
	}
	sc.tl.note(victim.Name, "down for good, holding its slot (deadline %s)", slot.Deadline.Format("15:04:05"))
	// Frozen until the deadline and a few ticks after.
	before := map[*Node]int{}
	for _, n := range sc.nodes {
		before[n] = sc.reboots(n)
	}
	sc.hold(time.Until(slot.Deadline)+6*time.Second, "cluster frozen by the slot of a node that is gone", func() string {
		for _, n := range sc.nodes {
			if n != victim && sc.reboots(n) > before[n] {
				return n.Name + " rebooted while the slot of the powered-off node is held"
			}
		}
		return ""
	})
	if out, err := other.Exec(20*time.Second, "clusterrebootd", "status"); err == nil || out != "" {
		t.Logf("status on %s while frozen (%v):\n%s", other.Name, err, out)
	}
	ok := sc.poll(90*time.Second, func() bool {
		for _, n := range sc.nodes {
			if n == victim || !n.up() {
				continue
			}
			if _, err := n.Exec(30*time.Second, "clusterrebootd", "release", "--node", victim.Name); err == nil {
				sc.tl.note(n.Name, "operator: clusterrebootd release --node %s", victim.Name)
				return true
			}
		}
		return false
	})
	if !ok {
		t.Errorf("clusterrebootd release --node %s never succeeded", victim.Name)
	}
}

// noRestart: the supervisor does not start the node again after its next
// exit (a reboot included): the node is gone for good.
func (n *Node) noRestart() {
	n.mu.Lock()
	n.stopping = true
	n.mu.Unlock()
}

// powerOff: a clean poweroff (SIGTERM to nspawn), never restarted.
func (n *Node) powerOff() {
	n.mu.Lock()
	n.stopping = true
	pid := n.nspawnPID
	n.mu.Unlock()
	if pid != 0 {
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
}
