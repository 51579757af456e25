package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// The JSON records of DESIGN §3, as the test reads them from etcd.

type slotRec struct {
	Node          string    `json:"node"`
	BootID        string    `json:"boot_id"`
	Reason        string    `json:"reason"`
	FenceRevision int64     `json:"fence_revision"`
	AcquiredAt    time.Time `json:"acquired_at"`
	Deadline      time.Time `json:"deadline"`
	HealthySince  time.Time `json:"healthy_since,omitzero"`
}

type aliveRec struct {
	Node           string `json:"node"`
	BootID         string `json:"boot_id"`
	State          string `json:"state"`
	Reason         string `json:"reason"`
	Blocked        string `json:"blocked"`
	Healthy        bool   `json:"healthy"`
	RebootRequired bool   `json:"reboot_required"`
}

type historyRec struct {
	Event  string    `json:"event"`
	Node   string    `json:"node"`
	Reason string    `json:"reason"`
	By     string    `json:"by"`
	BootID string    `json:"boot_id"`
	At     time.Time `json:"at"`
}

type lockAnnotation struct {
	Node string `json:"node"`
	PID  int    `json:"pid"`
}

// lockEntry is one key of the mutex queue under P/lock/.
type lockEntry struct {
	key       string
	node      string // "" for an anonymous waiter (etcdctl lock)
	lease     int64
	createRev int64
}

func (c *cluster) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 10*time.Second)
}

func (c *cluster) get(sub string) *clientv3.GetResponse {
	c.t.Helper()
	ctx, cancel := c.ctx()
	defer cancel()
	resp, err := c.cli.Get(ctx, c.prefix+sub, clientv3.WithPrefix())
	if err != nil {
		c.t.Fatalf("etcd get %s%s: %v", c.prefix, sub, err)
	}
	return resp
}

func (c *cluster) slots() map[string]slotRec {
	c.t.Helper()
	out := map[string]slotRec{}
	for _, kv := range c.get("slots/").Kvs {
		var s slotRec
		if err := json.Unmarshal(kv.Value, &s); err != nil {
			c.t.Fatalf("slot %s: %v", kv.Key, err)
		}
		out[strings.TrimPrefix(string(kv.Key), c.prefix+"slots/")] = s
	}
	return out
}

func (c *cluster) alive(node string) (aliveRec, bool) {
	c.t.Helper()
	kvs := c.get("alive/" + node).Kvs
	for _, kv := range kvs {
		if string(kv.Key) != c.prefix+"alive/"+node {
			continue
		}
		var a aliveRec
		if err := json.Unmarshal(kv.Value, &a); err != nil {
			c.t.Fatalf("alive %s: %v", kv.Key, err)
		}
		return a, true
	}
	return aliveRec{}, false
}

// queue is the mutex queue in FIFO order; [0] owns the mutex.
func (c *cluster) queue() []lockEntry {
	c.t.Helper()
	var out []lockEntry
	for _, kv := range c.get("lock/").Kvs {
		e := lockEntry{key: string(kv.Key), lease: kv.Lease, createRev: kv.CreateRevision}
		var a lockAnnotation
		if json.Unmarshal(kv.Value, &a) == nil {
			e.node = a.Node
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].createRev < out[j].createRev })
	return out
}

// queuePos is node's 1-based place in the mutex queue, 0 when not queued.
func (c *cluster) queuePos(node string) int {
	for i, e := range c.queue() {
		if e.node == node {
			return i + 1
		}
	}
	return 0
}

func (c *cluster) history() []historyRec {
	c.t.Helper()
	var out []historyRec
	for _, kv := range c.get("history/").Kvs { // keys sort by time
		var h historyRec
		if err := json.Unmarshal(kv.Value, &h); err != nil {
			c.t.Fatalf("history %s: %v", kv.Key, err)
		}
		out = append(out, h)
	}
	return out
}

func (c *cluster) historyOf(node, event string) []historyRec {
	var out []historyRec
	for _, h := range c.history() {
		if h.Node == node && h.Event == event {
			out = append(out, h)
		}
	}
	return out
}

func (c *cluster) put(sub, value string) {
	c.t.Helper()
	ctx, cancel := c.ctx()
	defer cancel()
	if _, err := c.cli.Put(ctx, c.prefix+sub, value); err != nil {
		c.t.Fatalf("etcd put %s: %v", sub, err)
	}
}

// operatorLock takes the cluster mutex the way `etcdctl lock P/lock` does:
// a plain concurrency.Mutex on P/lock with the etcd client's own session.
// The returned func unlocks it and ends the session.
func (c *cluster) operatorLock() (unlock func()) {
	c.t.Helper()
	sess, err := concurrency.NewSession(c.cli, concurrency.WithTTL(30))
	if err != nil {
		c.t.Fatal(err)
	}
	m := concurrency.NewMutex(sess, strings.TrimSuffix(c.prefix, "/")+"/lock")
	ctx, cancel := c.ctx()
	defer cancel()
	if err := m.Lock(ctx); err != nil {
		c.t.Fatal(err)
	}
	var once sync.Once
	unlock = func() {
		once.Do(func() {
			ctx, cancel := c.ctx()
			defer cancel()
			if err := m.Unlock(ctx); err != nil {
				c.t.Errorf("operator unlock: %v", err)
			}
			sess.Close()
		})
	}
	c.t.Cleanup(unlock)
	return unlock
}

// revision is etcd's current revision.
func (c *cluster) revision() int64 {
	c.t.Helper()
	ctx, cancel := c.ctx()
	defer cancel()
	resp, err := c.cli.Get(ctx, c.prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		c.t.Fatal(err)
	}
	return resp.Header.Revision
}

// event is one change under the cluster prefix.
type event struct {
	rev    int64
	put    bool
	create bool
	key    string // relative to the prefix
	value  []byte
}

// recorder keeps every event under a prefix from the revision the cluster
// was created at: the test's view of the cluster's whole history.
type recorder struct {
	cli    *clientv3.Client
	prefix string
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	events   []event
	progress int64 // every event up to this revision has been received
	err      error
}

func startRecorder(t *testing.T, cli *clientv3.Client, prefix string) *recorder {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	gctx, gcancel := context.WithTimeout(ctx, 10*time.Second)
	resp, err := cli.Get(gctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	gcancel()
	if err != nil {
		cancel()
		t.Fatalf("recorder: %v", err)
	}
	r := &recorder{cli: cli, prefix: prefix, ctx: ctx, cancel: cancel, done: make(chan struct{}), progress: resp.Header.Revision}
	wch := cli.Watch(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1), clientv3.WithPrevKV())
	go r.loop(wch)
	return r
}

func (r *recorder) loop(wch clientv3.WatchChan) {
	defer close(r.done)
	for resp := range wch {
		r.mu.Lock()
		if err := resp.Err(); err != nil {
			r.err = err
		}
		for _, ev := range resp.Events {
			r.events = append(r.events, event{rev: ev.Kv.ModRevision, put: ev.Type == clientv3.EventTypePut,
				create: ev.IsCreate(), key: strings.TrimPrefix(string(ev.Kv.Key), r.prefix), value: ev.Kv.Value})
			r.progress = max(r.progress, ev.Kv.ModRevision)
		}
		if resp.IsProgressNotify() {
			r.progress = max(r.progress, resp.Header.Revision)
		}
		r.mu.Unlock()
	}
}

func (r *recorder) stop() {
	r.cancel()
	select {
	case <-r.done:
	case <-time.After(5 * time.Second):
	}
}

// sync waits until every event up to etcd's current revision was received.
func (r *recorder) sync(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
	resp, err := r.cli.Get(ctx, r.prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	cancel()
	if err != nil {
		t.Fatalf("recorder sync: %v", err)
	}
	target := resp.Header.Revision
	waitFor(t, fmt.Sprintf("the recorder to reach revision %d", target), 20*time.Second, func() bool {
		r.mu.Lock()
		p, werr := r.progress, r.err
		r.mu.Unlock()
		if werr != nil {
			t.Fatalf("recorder watch: %v", werr)
		}
		if p >= target {
			return true
		}
		_ = r.cli.RequestProgress(r.ctx)
		return false
	})
}

func (r *recorder) snapshot() []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// slotHistory replays the slot keys: the order in which nodes took slots and
// the largest number of slots that ever existed at once.
func (r *recorder) slotHistory(t *testing.T) (order []string, maxAtOnce int) {
	r.sync(t)
	held := map[string]bool{}
	for _, ev := range r.snapshot() {
		node, ok := strings.CutPrefix(ev.key, "slots/")
		if !ok {
			continue
		}
		switch {
		case ev.put && ev.create:
			held[node] = true
			order = append(order, node)
		case !ev.put:
			delete(held, node)
		}
		maxAtOnce = max(maxAtOnce, len(held))
	}
	return order, maxAtOnce
}

// queueHistory is the order in which named nodes first queued on the mutex.
func (r *recorder) queueHistory(t *testing.T) []string {
	r.sync(t)
	var order []string
	for _, ev := range r.snapshot() {
		if !strings.HasPrefix(ev.key, "lock/") || !ev.put || !ev.create {
			continue
		}
		var a lockAnnotation
		if json.Unmarshal(ev.value, &a) == nil && a.Node != "" && !slices.Contains(order, a.Node) {
			order = append(order, a.Node)
		}
	}
	return order
}

// queuedEver reports whether node ever put a key in the mutex queue (no
// sync: for polling).
func (r *recorder) queuedEver(node string) bool {
	for _, ev := range r.snapshot() {
		if strings.HasPrefix(ev.key, "lock/") && ev.put {
			var a lockAnnotation
			if json.Unmarshal(ev.value, &a) == nil && a.Node == node {
				return true
			}
		}
	}
	return false
}

// count counts the recorded events whose key starts with sub.
func (r *recorder) count(t *testing.T, sub string) int {
	r.sync(t)
	k := 0
	for _, ev := range r.snapshot() {
		if strings.HasPrefix(ev.key, sub) {
			k++
		}
	}
	return k
}

func (r *recorder) dump() string {
	var b strings.Builder
	for _, ev := range r.snapshot() {
		op := "DEL"
		if ev.put {
			op = "PUT"
		}
		v := string(ev.value)
		if len(v) > 200 {
			v = v[:200] + "…"
		}
		fmt.Fprintf(&b, "%6d %s %s %s\n", ev.rev, op, ev.key, v)
	}
	return b.String()
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
