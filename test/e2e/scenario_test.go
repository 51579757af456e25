//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/cluster"
	"github.com/clusterrebootd/clusterrebootd/test/histcheck"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// scenario is one test's cluster: N fresh nodes on their own etcd prefix,
// the supervisor timeline and a watch on the prefix's slot keys.
type scenario struct {
	t             *testing.T
	s             *suite
	name          string
	prefix        string // P = /clusterrebootd/<cluster>
	maxConcurrent int
	cfg           nodeConfig // the nodes' configuration (node name and IP aside)
	tl            *Timeline
	nodes         []*Node
	watch         *slotWatch
	start         time.Time
	dir           string // the nodes' overlays and console logs
	safetyChecked bool
	startRev      int64 // etcd revision before the scenario began
	violations    int   // found by checkSafety
	// The history up to compactRev, read before the test compacted etcd
	// (the history checker reads the rest from etcd).
	preCompaction []histcheck.Event
	compactRev    int64
}

// newScenario prepares n nodes (not yet booted). tweak adjusts the node
// configuration. Everything is torn down when the test ends.
func newScenario(t *testing.T, name string, n int, tweak func(*nodeConfig)) *scenario {
	return newScenarioOn(t, needSuite(t), name, n, tweak)
}

// newScenarioOn is newScenario on a given suite (a copy of the shared one
// with another etcd, for instance).
func newScenarioOn(t *testing.T, s *suite, name string, n int, tweak func(*nodeConfig)) *scenario {
	suffix, err := randomHex(3)
	if err != nil {
		t.Fatal(err)
	}
	cluster := "e2e-" + name + "-" + suffix
	sc := &scenario{t: t, s: s, name: name, prefix: "/clusterrebootd/" + cluster, maxConcurrent: 1,
		tl: newTimeline(), start: time.Now(), dir: filepath.Join(s.work, cluster)}
	t.Cleanup(sc.cleanup)
	rev, err := s.etcd.revision()
	if err != nil {
		t.Fatal(err)
	}
	sc.startRev = rev
	sc.watch = watchSlots(s.etcd.cli, sc.prefix+"/slots/", rev+1, sc.tl)
	cfg := defaultNodeConfig(cluster, s.etcd.endpoints())
	if tweak != nil {
		tweak(&cfg)
	}
	sc.cfg = cfg
	t.Logf("scenario %s: cluster %q, %d nodes, holder %s, reboot method %s, lock.ttl %s",
		name, cluster, n, cfg.Holder, cfg.RebootMethod, cfg.LockTTL)
	for i := 1; i <= n; i++ {
		node, err := newNode(s, sc.tl, filepath.Join(sc.dir, fmt.Sprintf("node-%d", i)), i, cfg)
		if err != nil {
			t.Fatal(err)
		}
		sc.nodes = append(sc.nodes, node)
	}
	return sc
}

// boot starts every node and waits until systemd in each is up.
func (sc *scenario) boot() {
	sc.t.Helper()
	t0 := time.Now()
	for _, n := range sc.nodes {
		if err := n.start(); err != nil {
			sc.t.Fatal(err)
		}
	}
	sc.waitFor(120*time.Second, "all nodes booted", func() (bool, error) {
		return sc.tl.count("", evBooted) >= len(sc.nodes), nil
	})
	sc.t.Logf("scenario %s: %d nodes booted in %v", sc.name, len(sc.nodes), time.Since(t0).Round(time.Millisecond))
	for _, e := range sc.tl.snapshot() {
		if e.Kind == evBooted && e.Detail != "state running" {
			sc.t.Errorf("%s booted %s, want running", e.Node, e.Detail)
		}
	}
}

func (sc *scenario) node(name string) *Node {
	for _, n := range sc.nodes {
		if n.Name == name {
			return n
		}
	}
	sc.t.Fatalf("no node %s", name)
	return nil
}

// needReboot makes a node need a reboot (/run/reboot-required; /run is a
// tmpfs, so the reboot itself clears it, as on a Debian server).
func (sc *scenario) needReboot(nodes ...*Node) {
	sc.t.Helper()
	for _, n := range nodes {
		if _, err := n.Exec(10*time.Second, "touch", rebootRequired); err != nil {
			sc.t.Fatal(err)
		}
		sc.tl.note(n.Name, "touch %s", rebootRequired)
	}
}

// partition cuts a node off the bridge (the host side of its veth).
func (sc *scenario) partition(n *Node, down bool) {
	sc.t.Helper()
	state, what := "up", "heal: link up"
	if down {
		state, what = "down", "partition: link down"
	}
	if err := ip("link", "set", n.vethName(), state); err != nil {
		sc.t.Fatal(err)
	}
	sc.tl.note(n.Name, "%s (%s)", what, n.vethName())
}

// fatal, returned by a waitFor condition, fails the test at once: what it
// waits for can no longer happen.
type fatal string

func (f fatal) Error() string { return string(f) }

// waitFor polls cond until it holds; the test fails after timeout. The
// timeouts are generous bounds, not assertions on speed.
func (sc *scenario) waitFor(timeout time.Duration, what string, cond func() (bool, error)) {
	sc.t.Helper()
	deadline := time.Now().Add(timeout)
	var last error
	for {
		ok, err := cond()
		if ok {
			return
		}
		var f fatal
		if errors.As(err, &f) {
			sc.t.Fatalf("waiting for %s: %v", what, f)
		}
		last = err
		if time.Now().After(deadline) {
			sc.t.Fatalf("timed out after %v waiting for %s (last error: %v)", timeout, what, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// hold keeps watching for d and fails at once if bad() reports a problem.
func (sc *scenario) hold(d time.Duration, what string, bad func() string) {
	sc.t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if msg := bad(); msg != "" {
			sc.t.Fatalf("%s: %s", what, msg)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// reboots counts a node's reboots (nspawn exit 133) so far.
func (sc *scenario) reboots(n *Node) int { return sc.tl.count(n.Name, evReboot) }

// rebootsAfter counts a node's reboots after t.
func (sc *scenario) rebootsAfter(n *Node, t time.Time) int {
	c := 0
	for _, e := range sc.tl.snapshot() {
		if e.Node == n.Name && e.Kind == evReboot && e.At.After(t) {
			c++
		}
	}
	return c
}

// slots lists the nodes holding a slot now.
func (sc *scenario) slots() ([]string, error) {
	resp, err := sc.s.etcd.get(sc.prefix + "/slots/")
	if err != nil {
		return nil, err
	}
	var ns []string
	for _, kv := range resp.Kvs {
		ns = append(ns, strings.TrimPrefix(string(kv.Key), sc.prefix+"/slots/"))
	}
	return ns, nil
}

// lockOwner is the node at the head of the mutex queue P/lock/ ("" none;
// "?" an entry without our annotation).
func (sc *scenario) lockOwner() (string, error) {
	_, node, err := sc.lockHead()
	return node, err
}

// lockQueue lists the nodes in the mutex queue P/lock/, head first ("?"
// for an entry without our annotation).
func (sc *scenario) lockQueue() ([]string, error) {
	resp, err := sc.s.etcd.get(sc.prefix + "/lock/")
	if err != nil {
		return nil, err
	}
	kvs := slices.Clone(resp.Kvs)
	slices.SortFunc(kvs, func(a, b *mvccpb.KeyValue) int { return int(a.CreateRevision - b.CreateRevision) })
	var q []string
	for _, kv := range kvs {
		var a struct {
			Node string `json:"node"`
		}
		if json.Unmarshal(kv.Value, &a) != nil || a.Node == "" {
			a.Node = "?"
		}
		q = append(q, a.Node)
	}
	return q, nil
}

// lockHead is the key-value and node of the head of the mutex queue.
func (sc *scenario) lockHead() (head *mvccpb.KeyValue, node string, err error) {
	resp, err := sc.s.etcd.get(sc.prefix + "/lock/")
	if err != nil {
		return nil, "", err
	}
	if len(resp.Kvs) == 0 {
		return nil, "", nil
	}
	head = resp.Kvs[0]
	for _, kv := range resp.Kvs {
		if kv.CreateRevision < head.CreateRevision {
			head = kv
		}
	}
	var a struct {
		Node string `json:"node"`
	}
	if json.Unmarshal(head.Value, &a) != nil || a.Node == "" {
		return head, "?", nil
	}
	return head, a.Node, nil
}

// deletedAt waits (bounded) for key to be deleted, watching from revision
// from on, and returns the revision of the deletion.
func (sc *scenario) deletedAt(key string, from int64, timeout time.Duration) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for resp := range sc.s.etcd.cli.Watch(ctx, key, clientv3.WithRev(from)) {
		if err := resp.Err(); err != nil {
			return 0, err
		}
		for _, ev := range resp.Events {
			if ev.Type == clientv3.EventTypeDelete {
				return ev.Kv.ModRevision, nil
			}
		}
	}
	return 0, fmt.Errorf("%s not deleted within %v: %w", key, timeout, ctx.Err())
}

// waitCompleted waits until every listed node's reboot request was followed
// by the end of its slot and no slot is left, then fails unless each of
// those ends is a post-boot release ("completed"): a "reboot-failed" or
// "aborted" ends the wait early instead of running into the timeout.
func (sc *scenario) waitCompleted(timeout time.Duration, nodes ...*Node) {
	sc.t.Helper()
	var hist []cluster.HistoryEvent
	sc.waitFor(timeout, fmt.Sprintf("the reboots of %d node(s) to end and their slots to be released", len(nodes)), func() (bool, error) {
		var err error
		if hist, err = sc.history(); err != nil {
			return false, err
		}
		for _, n := range nodes {
			if lastEnd(hist, n.Name) == "" {
				return false, fmt.Errorf("%s: no reboot request followed by a release yet", n.Name)
			}
		}
		slots, err := sc.slots()
		if err != nil || len(slots) > 0 {
			return false, fmt.Errorf("slots still held: %v %v", slots, err)
		}
		return true, nil
	})
	for _, n := range nodes {
		if end := lastEnd(hist, n.Name); end != cluster.EventCompleted {
			sc.t.Errorf("%s: its last reboot ended with %q, want %q (released after boot)", n.Name, end, cluster.EventCompleted)
		}
	}
}

// lastEnd is the event that ended a node's last requested reboot, "" when
// there is none yet.
func lastEnd(hist []cluster.HistoryEvent, node string) string {
	end, requested := "", false
	for _, h := range hist {
		if h.Node != node {
			continue
		}
		switch {
		case h.Event == cluster.EventRebootRequested:
			end, requested = "", true
		case requested && slotEnders[h.Event]:
			end = h.Event
		}
	}
	return end
}

// journal reads a node's journal as JSON entries (all boots).
func (n *Node) journal(args ...string) ([]map[string]any, error) {
	out, err := n.Exec(30*time.Second, append([]string{"journalctl", "--no-pager", "-o", "json"}, args...)...)
	if err != nil && !strings.Contains(err.Error(), "No entries") {
		return nil, err
	}
	var es []map[string]any
	for _, line := range strings.Split(out, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			return nil, fmt.Errorf("journal line %q: %w", tail(line, 200), err)
		}
		es = append(es, e)
	}
	return es, nil
}

// cleanup: on failure, show each node's clusterrebootd journal; then stop
// the nodes, end the watch and print the timeline.
func (sc *scenario) cleanup() {
	t := sc.t
	if t.Failed() {
		for _, n := range sc.nodes {
			if out, err := n.Exec(30*time.Second, "journalctl", "--no-pager", "-n", "60", "-o", "short-precise",
				"-u", "clusterrebootd-check.service", "-u", "clusterrebootd-hold.service"); err == nil {
				t.Logf("journal of %s (last 60 lines):\n%s", n.Name, out)
			}
		}
	}
	var wg sync.WaitGroup
	for _, n := range sc.nodes {
		wg.Add(1)
		go func() { defer wg.Done(); n.destroy() }()
	}
	wg.Wait()
	if sc.watch != nil {
		// Also when the scenario failed or stopped early: a safety
		// violation is reported whatever else went wrong.
		if !sc.safetyChecked {
			sc.checkSafety()
		}
		sc.watch.stop()
	}
	var extra []Event
	if hist, err := sc.history(); err == nil {
		for _, h := range hist {
			d := h.Event
			if h.Reason != "" {
				d += ": " + h.Reason
			}
			if h.DurationMS > 0 {
				d += fmt.Sprintf(" (%dms)", h.DurationMS)
			}
			extra = append(extra, Event{At: h.At, Node: h.Node, Kind: evHistory, Detail: d})
		}
	}
	t.Logf("scenario %s timeline (%v):\n%s", sc.name, time.Since(sc.start).Round(time.Millisecond), sc.tl.format(extra))
	if t.Failed() || os.Getenv(envKeep) == "1" {
		t.Logf("node overlays and console logs kept in %s (until the suite ends; %s=1 keeps them after)", sc.dir, envKeep)
	} else {
		os.RemoveAll(sc.dir)
	}
}

// slotWatch records every change of P/slots/ from a revision on, in etcd
// order, with the time the test saw it.
type slotWatch struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	events []slotEvent
	err    error
}

type slotEvent struct {
	Seen       time.Time // when the watch delivered it
	Rev        int64
	Node       string
	Put        bool
	AcquiredAt time.Time // from the slot value (Put)
	BootID     string
}

func watchSlots(cli *clientv3.Client, prefix string, rev int64, tl *Timeline) *slotWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &slotWatch{cancel: cancel, done: make(chan struct{})}
	ch := cli.Watch(clientv3.WithRequireLeader(ctx), prefix, clientv3.WithPrefix(), clientv3.WithRev(rev))
	go func() {
		defer close(w.done)
		for resp := range ch {
			if err := resp.Err(); err != nil {
				w.mu.Lock()
				w.err = err
				w.mu.Unlock()
				return
			}
			now := time.Now()
			for _, ev := range resp.Events {
				se := slotEvent{Seen: now, Rev: ev.Kv.ModRevision, Node: strings.TrimPrefix(string(ev.Kv.Key), prefix),
					Put: ev.Type == clientv3.EventTypePut}
				kind, detail := evSlotDel, ""
				if se.Put {
					var v struct {
						AcquiredAt   time.Time `json:"acquired_at"`
						BootID       string    `json:"boot_id"`
						HealthySince time.Time `json:"healthy_since"`
					}
					if err := json.Unmarshal(ev.Kv.Value, &v); err != nil {
						w.mu.Lock()
						w.err = fmt.Errorf("slot %s: %w", ev.Kv.Key, err)
						w.mu.Unlock()
					}
					se.AcquiredAt, se.BootID = v.AcquiredAt, v.BootID
					kind, detail = evSlotPut, fmt.Sprintf("rev %d boot_id %.8s", se.Rev, v.BootID)
					if !v.HealthySince.IsZero() {
						detail += " healthy_since set"
					}
				}
				w.mu.Lock()
				w.events = append(w.events, se)
				w.mu.Unlock()
				tl.add(Event{At: now, Node: se.Node, Kind: kind, Detail: detail})
			}
		}
	}()
	return w
}

func (w *slotWatch) stop() {
	w.cancel()
	<-w.done
}

func (w *slotWatch) snapshot() ([]slotEvent, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.events), w.err
}
