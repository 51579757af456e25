package main

// The randomized safety test: many nodes, random reboot durations, random
// holder kills and etcd restarts, against a real etcd, with the real
// coordinator, lib/cluster, detectors and policies. Only the host (boot id,
// run-dir markers) and the reboot itself are simulated. A checker fails the
// run if more than max_concurrent slots ever existed at one etcd revision,
// if any node rebooted without holding its slot, or if a slot or lock key is
// left behind (the shared history checker, test/histcheck, with every rule
// it has).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/clusterrebootd/clusterrebootd/lib/cluster"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	co "github.com/clusterrebootd/clusterrebootd/lib/coordinator"
	"github.com/clusterrebootd/clusterrebootd/test/etcdtest"
	"github.com/clusterrebootd/clusterrebootd/test/histcheck"
)

func TestRandomizedSafety(t *testing.T) {
	runs := 200
	if testing.Short() {
		runs = 24
	}
	if v, err := strconv.Atoi(os.Getenv("CLUSTERREBOOTD_SAFETY_RUNS")); err == nil && v > 0 {
		runs = v
	}
	base := uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv("CLUSTERREBOOTD_SAFETY_SEED"), 10, 64); err == nil {
		base, runs = v, 1
	}
	shared := etcdtest.Start(t)
	var faultRuns, kills, restarts, reboots atomic.Int64
	// Runs mostly wait on etcd and timers: a pool of workers runs several
	// at once (t.Run from several goroutines is allowed). A run with an etcd
	// restart gets its own server.
	const workers = 6
	seeds := make(chan uint64)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seed := range seeds {
				t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
					r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
					restart := r.IntN(8) == 0
					srv := shared
					if restart {
						srv = etcdtest.Start(t)
					}
					st := runSim(t, srv, r, fmt.Sprintf("sim%d", seed), restart)
					kills.Add(int64(st.kills))
					reboots.Add(int64(st.reboots))
					if st.kills > 0 || restart {
						faultRuns.Add(1)
					}
					if restart {
						restarts.Add(1)
					}
					if t.Failed() {
						t.Logf("reproduce with CLUSTERREBOOTD_SAFETY_SEED=%d", seed)
					}
				})
			}
		}()
	}
	for i := range runs {
		seeds <- base + uint64(i)
	}
	close(seeds)
	wg.Wait()
	t.Logf("%d runs (%d with faults): %d reboots, %d holder kills, %d etcd restarts",
		runs, faultRuns.Load(), reboots.Load(), kills.Load(), restarts.Load())
}

type simStats struct{ kills, reboots int }

// sim is one randomized run.
type sim struct {
	t        *testing.T
	srv      *etcdtest.Server
	cluster  string
	prefix   string
	max      int
	checker  *clientv3.Client
	nodes    []*simNode
	tick     time.Duration
	bootMin  time.Duration
	bootMax  time.Duration
	rnd      *rand.Rand
	rndMu    sync.Mutex
	kills    atomic.Int64
	killProb float64
	release  bool // slot_expiry = release (runs with kills)

	evMu       sync.Mutex
	nodeEvents []histcheck.Event // reboot requests, downs and boots
}

type simNode struct {
	name, dir string
	mu        sync.Mutex
	bootID    string
	off       bool
	marker    string // run-dir reboot-requested marker (tmpfs: cleared by boot)
	rebooted  int
	proc      *simProc
	wake      chan struct{}
}

// simProc is one "process" (a check run, with the holder inside it).
type simProc struct {
	client  *cluster.Client
	cancel  context.CancelFunc
	dead    atomic.Bool
	holding atomic.Bool
}

func (s *sim) intn(n int) int {
	s.rndMu.Lock()
	defer s.rndMu.Unlock()
	return s.rnd.IntN(n)
}

func (s *sim) dur(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(s.intn(int(hi-lo)+1))
}

func runSim(t *testing.T, srv *etcdtest.Server, r *rand.Rand, name string, restart bool) simStats {
	n := 3 + r.IntN(4)
	s := &sim{t: t, srv: srv, cluster: name, prefix: "/clusterrebootd/" + name, max: 1 + r.IntN(2),
		tick: time.Duration(20+r.IntN(40)) * time.Millisecond, bootMin: 5 * time.Millisecond,
		bootMax: time.Duration(20+r.IntN(200)) * time.Millisecond, rnd: r}
	if r.IntN(2) == 0 {
		s.killProb = 0.15
		s.release = true
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: srv.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	s.checker = cli
	start, err := cli.Get(context.Background(), "/")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for i := range n {
		nd := &simNode{name: fmt.Sprintf("n%d", i+1), dir: filepath.Join(dir, fmt.Sprint(i)), bootID: randomID(r), wake: make(chan struct{}, 1)}
		if err := os.MkdirAll(nd.dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(nd.dir, "reboot-required"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		s.nodes = append(s.nodes, nd)
		s.note(histcheck.Up, nd.name, nd.bootID)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, nd := range s.nodes {
		wg.Add(1)
		go func() { defer wg.Done(); s.timer(ctx, nd) }()
	}
	if s.killProb > 0 {
		wg.Add(1)
		go func() { defer wg.Done(); s.killer(ctx) }()
	}
	if restart {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-time.After(s.dur(50*time.Millisecond, 800*time.Millisecond)):
			case <-ctx.Done():
				return
			}
			srv.Stop()
			time.Sleep(s.dur(100*time.Millisecond, 1500*time.Millisecond))
			srv.Restart(t)
		}()
	}
	// Done when every node rebooted once and holds no slot.
	for ctx.Err() == nil && !s.allDone(ctx) {
		time.Sleep(20 * time.Millisecond)
	}
	liveness := ctx.Err()
	cancel()
	wg.Wait()
	if liveness != nil {
		for _, nd := range s.nodes {
			t.Logf("%s: rebooted %d times, off=%v", nd.name, nd.rebooted, nd.off)
		}
		t.Errorf("liveness: not every node rebooted and released its slot within 60s (kills %d)", s.kills.Load())
	}
	s.checkHistory(start.Header.Revision)
	st := simStats{kills: int(s.kills.Load())}
	for _, nd := range s.nodes {
		st.reboots += nd.rebooted
	}
	return st
}

func randomID(r interface{ Uint64() uint64 }) string {
	return fmt.Sprintf("%016x%016x", r.Uint64(), r.Uint64())
}

func (s *sim) allDone(ctx context.Context) bool {
	for _, nd := range s.nodes {
		nd.mu.Lock()
		done := nd.rebooted > 0 && !nd.off
		nd.mu.Unlock()
		if !done {
			return false
		}
	}
	resp, err := s.checker.Get(ctx, s.prefix+"/slots/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	return err == nil && resp.Count == 0
}

// timer is the node's check timer: one check run ("process") per tick
// while the node is up, one at once after boot.
func (s *sim) timer(ctx context.Context, nd *simNode) {
	for ctx.Err() == nil {
		nd.mu.Lock()
		off := nd.off
		nd.mu.Unlock()
		if !off {
			s.runCheck(ctx, nd)
		}
		select {
		case <-ctx.Done():
		case <-nd.wake:
		case <-time.After(s.tick):
		}
	}
}

// runCheck is one `check --once` process with a foreground holder.
func (s *sim) runCheck(ctx context.Context, nd *simNode) {
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	client, err := cluster.Dial(pctx, cluster.Options{Endpoints: s.srv.Endpoints(), DialTimeout: time.Second,
		RequestTimeout: time.Second, Cluster: s.cluster})
	if err != nil {
		return // etcd down: the run fails closed
	}
	defer client.Close()
	p := &simProc{client: client, cancel: cancel}
	nd.mu.Lock()
	nd.proc = p
	nd.mu.Unlock()
	defer func() {
		nd.mu.Lock()
		if nd.proc == p {
			nd.proc = nil
		}
		nd.mu.Unlock()
	}()

	cfg := testConfig(nd.name, s.cluster, nd.dir, s.max)
	if s.release {
		cfg.Lock.SlotExpiry, cfg.Lock.MaxRebootDuration = config.SlotExpiryRelease, config.Duration(3*time.Second)
	}
	w, err := assemble(&cfg, nil, nil, nil)
	if err != nil {
		s.t.Errorf("assemble: %v", err)
		return
	}
	w.lazy.once.Do(func() { w.lazy.c = client })
	w.deps.Host = simHost{nd: nd, p: p}
	w.deps.Rebooter = simRebooter{s: s, nd: nd, p: p}
	w.deps.Holder = simHolder{nd: nd, p: p, hold: &w.fg.hold}
	coord, err := co.New(w.opts, w.deps)
	if err != nil {
		s.t.Errorf("coordinator: %v", err)
		return
	}
	w.fg.hold = coord.Hold
	err = coord.Check(pctx)
	if code := co.CodeOf(err); code == co.CodeInternal || code == co.CodeConfig || code == co.CodeDetector {
		if !p.dead.Load() && ctx.Err() == nil && !errors.Is(err, co.ErrConflict) {
			s.t.Errorf("%s: check: exit %d: %v", nd.name, code, err)
		}
	}
}

// killer SIGKILLs random running processes: their etcd connection is cut at
// once (no unlock, no lease revoke: the lease must expire) and they never
// reboot after that.
func (s *sim) killer(ctx context.Context) {
	for ctx.Err() == nil {
		time.Sleep(s.dur(5*time.Millisecond, 200*time.Millisecond))
		if float64(s.intn(1000))/1000 >= s.killProb {
			continue
		}
		nd := s.nodes[s.intn(len(s.nodes))]
		nd.mu.Lock()
		p := nd.proc
		nd.mu.Unlock()
		if p == nil || !p.holding.Load() {
			continue
		}
		p.dead.Store(true)
		p.client.Close()
		p.cancel()
		s.kills.Add(1)
	}
}

type simHost struct {
	nd *simNode
	p  *simProc
}

func (h simHost) BootID() (string, error) {
	h.nd.mu.Lock()
	defer h.nd.mu.Unlock()
	return h.nd.bootID, nil
}
func (h simHost) KillSwitch() (bool, error) { return false, nil }
func (h simHost) MarkRebootRequested(bootID string) error {
	if h.p.dead.Load() {
		return errors.New("process killed")
	}
	h.nd.mu.Lock()
	defer h.nd.mu.Unlock()
	h.nd.marker = bootID
	return nil
}
func (h simHost) RebootRequested(bootID string) (bool, error) {
	h.nd.mu.Lock()
	defer h.nd.mu.Unlock()
	return h.nd.marker == bootID, nil
}
func (h simHost) ClearRebootRequested() error {
	h.nd.mu.Lock()
	defer h.nd.mu.Unlock()
	h.nd.marker = ""
	return nil
}
func (h simHost) MarkRebooted(time.Time) error { return nil }

type simHolder struct {
	nd   *simNode
	p    *simProc
	hold *func(context.Context) error
}

func (h simHolder) Active(context.Context) (bool, error) {
	h.nd.mu.Lock()
	defer h.nd.mu.Unlock()
	return h.nd.proc != nil && h.nd.proc != h.p && h.nd.proc.holding.Load(), nil
}

func (h simHolder) Start(ctx context.Context) error {
	h.p.holding.Store(true)
	defer h.p.holding.Store(false)
	return (*h.hold)(ctx)
}

type simRebooter struct {
	s  *sim
	nd *simNode
	p  *simProc
}

// Reboot checks the invariant at the moment of the reboot: this node holds a
// slot written in this boot, and no more than max slots exist. Then the node
// goes off and boots after a random delay.
func (r simRebooter) Reboot(ctx context.Context, reason string) error {
	s, nd := r.s, r.nd
	if r.p.dead.Load() {
		return errors.New("process killed")
	}
	nd.mu.Lock()
	bootID := nd.bootID
	nd.off = true
	nd.mu.Unlock()
	s.note(histcheck.RebootAsked, nd.name, bootID)
	s.note(histcheck.Down, nd.name, bootID)
	s.verifySlot(nd.name, bootID)
	go func() {
		time.Sleep(s.dur(s.bootMin, s.bootMax))
		nd.mu.Lock()
		nd.bootID, nd.off, nd.marker = randomID(rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))), false, ""
		nd.rebooted++
		boot := nd.bootID
		nd.mu.Unlock()
		s.note(histcheck.Up, nd.name, boot)
		if err := os.Remove(filepath.Join(nd.dir, "reboot-required")); err != nil && !os.IsNotExist(err) {
			s.t.Error(err)
		}
		select {
		case nd.wake <- struct{}{}:
		default:
		}
	}()
	return nil
}

// verifySlot reads etcd (linearizable; retried while etcd restarts: the slot
// cannot go away before this node boots, which has not happened yet).
func (s *sim) verifySlot(node, bootID string) {
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		own, err1 := s.checker.Get(ctx, s.prefix+"/slots/"+node)
		all, err2 := s.checker.Get(ctx, s.prefix+"/slots/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		cancel()
		if err1 == nil && err2 == nil {
			if own.Count != 1 {
				// Verified late (etcd was down): with slot_expiry = release
				// another holder may have freed the slot after its deadline;
				// the holder never reboots past the deadline, so the slot
				// existed at the reboot if the history says it expired.
				if s.release && s.expired(node, bootID) {
					return
				}
				s.t.Errorf("SAFETY: %s rebooted without holding a slot", node)
				return
			}
			var slot struct {
				BootID string `json:"boot_id"`
			}
			if err := json.Unmarshal(own.Kvs[0].Value, &slot); err != nil || slot.BootID != bootID {
				s.t.Errorf("SAFETY: %s rebooted with a slot of another boot (%q, now %q): %v", node, slot.BootID, bootID, err)
			}
			if all.Count > int64(s.max) {
				s.t.Errorf("SAFETY: %d slots while %s rebooted (max_concurrent %d)", all.Count, node, s.max)
			}
			return
		}
		if time.Now().After(deadline) {
			s.t.Errorf("could not verify %s's slot: %v %v", node, err1, err2)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkHistory runs the shared history checker (test/histcheck) on the
// run: every change of the slot and mutex keys and every history record
// since the run started, replayed in etcd's revision order, with the nodes'
// reboot requests, downs and boots; the slot and mutex keys must be gone
// once killed holders' leases expired (lock.ttl).
func (s *sim) checkHistory(fromRev int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fin, err := histcheck.Settle(ctx, s.checker, s.prefix, 10*time.Second)
	if err != nil {
		s.t.Errorf("history: %v", err)
		return
	}
	evs, _, err := histcheck.Collect(ctx, s.checker, s.prefix, fromRev+1)
	if err != nil {
		s.t.Errorf("history: %v", err)
		return
	}
	s.evMu.Lock()
	evs = append(evs, s.nodeEvents...)
	s.evMu.Unlock()
	r := histcheck.Check(histcheck.Log{MaxConcurrent: s.max, Events: evs, Locks: true, Final: fin})
	for _, v := range r.Violations {
		s.t.Error(v)
	}
	if r.SlotsTaken == 0 {
		s.t.Errorf("history: no slot was ever taken")
	}
	s.t.Log(r.Summary())
}

// note records a node-side event for the history checker.
func (s *sim) note(kind histcheck.Kind, node, bootID string) {
	s.evMu.Lock()
	defer s.evMu.Unlock()
	s.nodeEvents = append(s.nodeEvents, histcheck.Event{Kind: kind, Node: node, BootID: bootID, At: time.Now(), Source: "sim"})
}

// testConfig is a node's configuration for in-process runs: file detector
// in dir, no systemd, short lock timings, command reboot (replaced by the
// test's Rebooter).
func testConfig(node, cluster, dir string, maxConcurrent int) config.Config {
	cfg := config.Default()
	cfg.NodeName, cfg.Cluster = node, cluster
	cfg.Detectors = []config.Detector{{Type: "file", Path: filepath.Join(dir, "reboot-required"), Timeout: config.Duration(time.Second)}}
	cfg.Health.HealthyStates = nil
	cfg.Lock.TTL = config.Duration(2 * time.Second)
	cfg.Lock.MaxConcurrent = maxConcurrent
	cfg.Lock.MaxHoldWait = config.Duration(20 * time.Second)
	cfg.Lock.BackoffMin, cfg.Lock.BackoffMax = config.Duration(10*time.Millisecond), config.Duration(100*time.Millisecond)
	cfg.Lock.MaxRebootDuration = config.Duration(30 * time.Second)
	cfg.Windows.Timezone, cfg.Windows.ExpectedRebootDuration = "UTC", 0
	cfg.Reboot.Method, cfg.Reboot.Command = config.RebootCommand, []string{"/bin/true"}
	cfg.Systemd.Holder = config.HolderForeground
	cfg.Etcd.RequestTimeout = config.Duration(time.Second)
	cfg.Paths.StateDir = dir
	return cfg
}

// expired reports whether the history records node's slot of bootID as
// expired (freed after its deadline by another holder).
func (s *sim) expired(node, bootID string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := s.checker.Get(ctx, s.prefix+"/history/", clientv3.WithPrefix())
	if err != nil {
		return false
	}
	for _, kv := range resp.Kvs {
		var ev struct {
			Event  string `json:"event"`
			Node   string `json:"node"`
			BootID string `json:"boot_id"`
		}
		if json.Unmarshal(kv.Value, &ev) == nil && ev.Event == co.EventExpired && ev.Node == node && ev.BootID == bootID {
			return true
		}
	}
	return false
}
