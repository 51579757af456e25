package coordinator

// In-memory fakes of every port in ports.go. They record each call, in
// order, in a shared recorder so that tests can assert which adapter was
// asked what and in which order. The fake Cluster keeps members, alive
// records, slots, pause, settings and history in memory; its mutex is a
// buffered channel so that a Lock blocks (durably, for testing/synctest)
// until the owner unlocks or its session ends.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorder is the ordered log of adapter calls shared by all fakes.
type recorder struct {
	mu    sync.Mutex
	calls []string
}

func (r *recorder) add(call string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, call)
}

func (r *recorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

func (r *recorder) count(call string) int {
	n := 0
	for _, c := range r.list() {
		if c == call {
			n++
		}
	}
	return n
}

// first returns the index of the first occurrence of call, -1 if none.
func (r *recorder) first(call string) int { return slices.Index(r.list(), call) }

// last returns the index of the last occurrence of call, -1 if none.
func (r *recorder) last(call string) int {
	l := r.list()
	for i := len(l) - 1; i >= 0; i-- {
		if l[i] == call {
			return i
		}
	}
	return -1
}

// only returns the calls that start with one of the prefixes, in order.
func (r *recorder) only(prefixes ...string) []string {
	var out []string
	for _, c := range r.list() {
		for _, p := range prefixes {
			if strings.HasPrefix(c, p) {
				out = append(out, c)
				break
			}
		}
	}
	return out
}

// mutating are the calls that change cluster or node state.
var mutating = []string{
	"cluster.Register", "cluster.PublishAlive", "cluster.UpdateSlot", "cluster.ReleaseSlot",
	"cluster.AppendHistory", "cluster.NewSession", "cluster.SetPause", "cluster.ClearPause",
	"cluster.SetMaxConcurrent", "cluster.Forget", "session.Lock", "session.Unlock",
	"session.AcquireSlot", "session.Close", "host.MarkRebootRequested", "host.ClearRebootRequested",
	"host.MarkRebooted", "state.Save", "holder.Start", "rebooter.Reboot",
}

// clock is a settable clock for tests outside a synctest bubble.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// ---- Cluster ----

type fakeCluster struct {
	foreign   []Waiter // queued ahead of every session (e.g. `etcdctl lock`)
	gateViews int      // GateView calls (full reads under the lock)
	rec       *recorder

	mu       sync.Mutex
	rev      int64
	slotsRev int64 // revision of the last change under P/slots/
	pauseRev int64
	members  []string
	alive    map[string]Alive
	slots    map[string]Slot
	pause    *Pause
	settings int
	history  []HistoryEvent
	// published is every PublishAlive, in order.
	published []Alive
	changed   chan struct{} // closed and replaced on every change
	lockTok   chan struct{} // the mutex: capacity 1, full while owned
	sessions  []*fakeSession
	nextLease int64

	// Failure injection. viewErr, if set, is consulted on every View with
	// the 1-based call number.
	viewErr                                                   func(n int) error
	views                                                     int
	registerErr, publishErr, updateErr, releaseErr, appendErr error
	historyErr, sessionErr, setPauseErr, clearPauseErr        error
	setMaxErr, forgetErr, waitErr                             error
	// session behaviour for new sessions
	acquireErr, lockErr, unlockErr, closeErr error
	// historySince is the since argument of the last History call.
	historySince time.Time
}

func newFakeCluster(rec *recorder) *fakeCluster {
	return &fakeCluster{
		rec: rec, rev: 1, alive: map[string]Alive{}, slots: map[string]Slot{},
		changed: make(chan struct{}), lockTok: make(chan struct{}, 1), nextLease: 0x100,
	}
}

// bump advances the revision and wakes every WaitChange; c.mu held.
func (c *fakeCluster) bump() int64 {
	c.rev++
	close(c.changed)
	c.changed = make(chan struct{})
	return c.rev
}

func (c *fakeCluster) NodeView(ctx context.Context, node string) (View, error) {
	v, err := c.View(ctx)
	v.Queue = nil
	v.Members = slices.DeleteFunc(v.Members, func(m string) bool { return m != node })
	v.Alive = slices.DeleteFunc(v.Alive, func(a Alive) bool { return a.Node != node })
	return v, err
}

func (c *fakeCluster) GateView(ctx context.Context) (View, error) {
	c.mu.Lock()
	c.gateViews++
	c.mu.Unlock()
	v, err := c.View(ctx)
	v.Queue = nil
	return v, err
}

func (c *fakeCluster) QueueView(ctx context.Context) (View, error) {
	v, err := c.View(ctx)
	return View{Revision: v.Revision, Queue: v.Queue}, err
}

func (c *fakeCluster) View(ctx context.Context) (View, error) {
	c.rec.add("cluster.View")
	c.mu.Lock()
	defer c.mu.Unlock()
	c.views++
	if c.viewErr != nil {
		if err := c.viewErr(c.views); err != nil {
			return View{}, err
		}
	}
	v := View{Revision: c.rev, Members: slices.Clone(c.members), MaxConcurrent: c.settings}
	for _, k := range slices.Sorted(maps.Keys(c.alive)) {
		v.Alive = append(v.Alive, c.alive[k])
	}
	for _, k := range slices.Sorted(maps.Keys(c.slots)) {
		v.Slots = append(v.Slots, c.slots[k])
	}
	if c.pause != nil {
		p := *c.pause
		v.Pause = &p
	}
	for _, s := range c.sessions {
		if s.isLocked() {
			v.Queue = append([]Waiter{{Node: s.info.Node, PID: s.info.PID}}, v.Queue...)
		}
	}
	v.Queue = append(slices.Clone(c.foreign), v.Queue...)
	return v, nil
}

func (c *fakeCluster) Register(ctx context.Context, node string) error {
	c.rec.add("cluster.Register")
	if c.registerErr != nil {
		return c.registerErr
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !slices.Contains(c.members, node) {
		c.members = append(c.members, node)
		c.bump()
	}
	return nil
}

func (c *fakeCluster) PublishAlive(ctx context.Context, a Alive) error {
	c.rec.add("cluster.PublishAlive")
	c.mu.Lock()
	defer c.mu.Unlock()
	c.published = append(c.published, a)
	if c.publishErr != nil {
		return c.publishErr
	}
	c.alive[a.Node] = a
	c.bump()
	return nil
}

func (c *fakeCluster) UpdateSlot(ctx context.Context, s Slot) (Slot, error) {
	c.rec.add("cluster.UpdateSlot")
	if c.updateErr != nil {
		return Slot{}, c.updateErr
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cur, ok := c.slots[s.Node]
	if !ok || cur.ModRevision != s.ModRevision {
		return Slot{}, fmt.Errorf("update slot %s: %w", s.Node, ErrConflict)
	}
	s.ModRevision = c.bump()
	c.slotsRev = s.ModRevision
	c.slots[s.Node] = s
	return s, nil
}

func (c *fakeCluster) ReleaseSlot(ctx context.Context, s Slot, ev HistoryEvent) error {
	c.rec.add("cluster.ReleaseSlot")
	if c.releaseErr != nil {
		return c.releaseErr
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cur, ok := c.slots[s.Node]
	if !ok || cur.ModRevision != s.ModRevision {
		return fmt.Errorf("release slot %s: %w", s.Node, ErrConflict)
	}
	delete(c.slots, s.Node)
	c.history = append(c.history, ev)
	c.slotsRev = c.bump()
	return nil
}

func (c *fakeCluster) AppendHistory(ctx context.Context, ev HistoryEvent) error {
	c.rec.add("cluster.AppendHistory")
	if c.appendErr != nil {
		return c.appendErr
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.history = append(c.history, ev)
	c.bump()
	return nil
}

func (c *fakeCluster) History(ctx context.Context, node string, since time.Time) ([]HistoryEvent, error) {
	c.rec.add("cluster.History")
	if c.historyErr != nil {
		return nil, c.historyErr
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.historySince = since
	var out []HistoryEvent
	for _, h := range c.history {
		if (node == "" || h.Node == node) && !h.At.Before(since) {
			out = append(out, h)
		}
	}
	return out, nil
}

func (c *fakeCluster) WaitChange(ctx context.Context, w Watch, afterRev int64) error {
	c.rec.add("cluster.WaitChange")
	if c.waitErr != nil {
		return c.waitErr
	}
	for {
		c.mu.Lock()
		rev := c.slotsRev
		if w == WatchPause {
			rev = c.pauseRev
		}
		ch := c.changed
		c.mu.Unlock()
		if rev > afterRev {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (c *fakeCluster) NewSession(ctx context.Context, info LockInfo) (Session, error) {
	c.rec.add("cluster.NewSession")
	if c.sessionErr != nil {
		return nil, c.sessionErr
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nextLease++
	s := &fakeSession{c: c, id: c.nextLease, info: info, done: make(chan struct{}),
		acquireErr: c.acquireErr, lockErr: c.lockErr, unlockErr: c.unlockErr, closeErr: c.closeErr}
	c.sessions = append(c.sessions, s)
	return s, nil
}

func (c *fakeCluster) SetPause(ctx context.Context, p Pause) error {
	c.rec.add("cluster.SetPause")
	if c.setPauseErr != nil {
		return c.setPauseErr
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pause = &p
	c.pauseRev = c.bump()
	return nil
}

func (c *fakeCluster) ClearPause(ctx context.Context) (bool, error) {
	c.rec.add("cluster.ClearPause")
	if c.clearPauseErr != nil {
		return false, c.clearPauseErr
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	was := c.pause != nil
	c.pause = nil
	c.pauseRev = c.bump()
	return was, nil
}

func (c *fakeCluster) SetMaxConcurrent(ctx context.Context, n int) error {
	c.rec.add("cluster.SetMaxConcurrent")
	if c.setMaxErr != nil {
		return c.setMaxErr
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.settings = n
	c.bump()
	return nil
}

func (c *fakeCluster) Forget(ctx context.Context, node string) error {
	c.rec.add("cluster.Forget")
	if c.forgetErr != nil {
		return c.forgetErr
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.members = slices.DeleteFunc(c.members, func(m string) bool { return m == node })
	delete(c.alive, node)
	c.bump()
	return nil
}

// putSlot stores a slot held by another node (test setup).
func (c *fakeCluster) putSlot(s Slot) Slot {
	c.mu.Lock()
	defer c.mu.Unlock()
	s.ModRevision = c.bump()
	if s.FenceRevision == 0 {
		s.FenceRevision = s.ModRevision
	}
	c.slotsRev = s.ModRevision
	c.slots[s.Node] = s
	return s
}

// dropSlot deletes a slot as another node's post-boot release would.
func (c *fakeCluster) dropSlot(node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.slots, node)
	c.slotsRev = c.bump()
}

func (c *fakeCluster) slot(node string) (Slot, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.slots[node]
	return s, ok
}

func (c *fakeCluster) setPause(p *Pause) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pause = p
	c.pauseRev = c.bump()
}

func (c *fakeCluster) events() []HistoryEvent {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.history)
}

func (c *fakeCluster) eventNames() []string {
	var out []string
	for _, h := range c.events() {
		out = append(out, h.Event)
	}
	return out
}

func (c *fakeCluster) publishes() []Alive {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.published)
}

func (c *fakeCluster) session(t *testing.T) *fakeSession {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.sessions) != 1 {
		t.Fatalf("want exactly one session, have %d", len(c.sessions))
	}
	return c.sessions[0]
}

// sess0 returns the first session created.
func (c *fakeCluster) sess0() *fakeSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessions[0]
}

// lockFree reports whether nobody owns the mutex.
func (c *fakeCluster) lockFree() bool { return len(c.lockTok) == 0 }

// ---- Session ----

type fakeSession struct {
	c    *fakeCluster
	id   int64
	info LockInfo
	done chan struct{}

	mu                                       sync.Mutex
	locked, closed                           bool
	locks, acquired, unlocks, closes         int
	acquireErr, lockErr, unlockErr, closeErr error
}

func (s *fakeSession) isLocked() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.locked
}

func (s *fakeSession) Lock(ctx context.Context) error {
	s.c.rec.add("session.Lock")
	s.mu.Lock()
	s.locks++
	err := s.lockErr
	s.mu.Unlock()
	if err != nil {
		return err
	}
	select {
	case s.c.lockTok <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed { // the lease ended while we queued
		<-s.c.lockTok
		return ErrLockLost
	}
	s.locked = true
	s.acquired++
	return nil
}

// release frees the mutex if this session owns it; s.mu held.
func (s *fakeSession) release() {
	if s.locked {
		s.locked = false
		<-s.c.lockTok
	}
}

func (s *fakeSession) Unlock(ctx context.Context) error {
	s.c.rec.add("session.Unlock")
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unlocks++
	s.release()
	return s.unlockErr
}

func (s *fakeSession) AcquireSlot(ctx context.Context, sl Slot, ev HistoryEvent) (Slot, error) {
	s.c.rec.add("session.AcquireSlot")
	s.mu.Lock()
	locked, err := s.locked, s.acquireErr
	s.mu.Unlock()
	if err != nil {
		return Slot{}, err
	}
	if !locked {
		return Slot{}, fmt.Errorf("fenced write: %w", ErrLockLost)
	}
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	sl.ModRevision = c.bump()
	sl.FenceRevision = sl.ModRevision
	c.slotsRev = sl.ModRevision
	c.slots[sl.Node] = sl
	c.history = append(c.history, ev)
	return sl, nil
}

func (s *fakeSession) Done() <-chan struct{}  { return s.done }
func (s *fakeSession) KeepAliveHealthy() bool { return true }

func (s *fakeSession) LeaseID() int64 { return s.id }

// kill ends the session as an expired lease would: Done closes and the
// mutex is freed.
func (s *fakeSession) kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.done)
	}
	s.release()
}

func (s *fakeSession) Close(ctx context.Context) error {
	s.c.rec.add("session.Close")
	s.mu.Lock()
	s.closes++
	err := s.closeErr
	s.mu.Unlock()
	s.kill()
	return err
}

// counts returns how often the lock was taken, released and the session
// closed.
func (s *fakeSession) counts() (acquired, unlocks, closes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.acquired, s.unlocks, s.closes
}

// ---- Detector ----

type fakeDetector struct {
	rec  *recorder
	mu   sync.Mutex
	seq  []Detection // returned in turn; the last one repeats
	next int
	// hook, when set, answers instead of seq (it runs without d.mu).
	hook func(ctx context.Context) Detection
}

func (d *fakeDetector) Detect(ctx context.Context) Detection {
	d.rec.add("detector.Detect")
	d.mu.Lock()
	hook := d.hook
	d.mu.Unlock()
	if hook != nil {
		return hook(ctx)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	r := d.seq[min(d.next, len(d.seq)-1)]
	d.next++
	return r
}

func (d *fakeDetector) set(seq ...Detection) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.seq, d.next = seq, 0
}

var (
	detYes     = Detection{Need: NeedYes, Detector: "file", Reason: "kernel 6.1.0-30 installed"}
	detNo      = Detection{Need: NeedNo, Detector: "file"}
	detUnknown = Detection{Need: NeedUnknown, Detector: "command", Reason: "exit code 9"}
)

// ---- HealthScript ----

type fakeScript struct {
	rec     *recorder
	mu      sync.Mutex
	phases  []string
	verdict ScriptVerdict
	err     error
}

func (s *fakeScript) Run(ctx context.Context, phase string, v View) (ScriptVerdict, error) {
	s.rec.add("script.Run")
	s.mu.Lock()
	defer s.mu.Unlock()
	s.phases = append(s.phases, phase)
	return s.verdict, s.err
}

func (s *fakeScript) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.phases)
}

// ---- Windows ----

type fakeWindows struct {
	rec      *recorder
	mu       sync.Mutex
	verdict  WindowVerdict
	closedN  int // the first closedN checks say closed, whatever verdict says
	calls    int
	lastTime time.Time
}

func (w *fakeWindows) Check(now time.Time) WindowVerdict {
	w.rec.add("windows.Check")
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls++
	w.lastTime = now
	if w.calls <= w.closedN {
		return WindowVerdict{Open: false, Reason: "outside the allow windows"}
	}
	return w.verdict
}

// ---- Policies ----

type fakePolicies struct {
	rec    *recorder
	mu     sync.Mutex
	health PolicyVerdict
	assume []bool // assumeSlotsReturn of every ClusterHealth call
	maxes  []int  // maxConcurrent of every SlotLimit call
}

// SlotLimit counts other nodes' slots like lib/gate with slot_expiry
// freeze: any overdue slot freezes (rule "overdue"), else rule "slots".
func (p *fakePolicies) SlotLimit(self string, v View, maxConcurrent int, now time.Time) PolicyVerdict {
	p.rec.add("policies.SlotLimit")
	p.mu.Lock()
	p.maxes = append(p.maxes, maxConcurrent)
	p.mu.Unlock()
	used := 0
	for _, s := range v.Slots {
		if s.Node == self {
			continue
		}
		if s.Overdue(now) {
			return PolicyVerdict{Rule: "overdue", Reason: "overdue slot of " + s.Node + ": cluster frozen"}
		}
		used++
	}
	return PolicyVerdict{Allowed: used < maxConcurrent, Rule: "slots",
		Reason: fmt.Sprintf("%d of %d slots in use", used, maxConcurrent)}
}

func (p *fakePolicies) ClusterHealth(self string, v View, assumeSlotsReturn bool, _ time.Time) PolicyVerdict {
	p.rec.add("policies.ClusterHealth")
	p.mu.Lock()
	defer p.mu.Unlock()
	p.assume = append(p.assume, assumeSlotsReturn)
	return p.health
}

// ---- NodeHealth ----

type fakeNodeHealth struct {
	rec *recorder
	mu  sync.Mutex
	ok  bool
	why string
	err error
}

func (n *fakeNodeHealth) Healthy(ctx context.Context) (bool, string, error) {
	n.rec.add("nodehealth.Healthy")
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ok, n.why, n.err
}

// ---- Inhibitors ----

type fakeInhibitors struct {
	rec *recorder
	by  string
	err error
}

func (i *fakeInhibitors) Blocking(ctx context.Context) (string, error) {
	i.rec.add("inhibitors.Blocking")
	return i.by, i.err
}

// ---- Rebooter ----

type fakeRebooter struct {
	rec     *recorder
	cl      *fakeCluster
	node    string
	mu      sync.Mutex
	reasons []string
	err     error
	// observed at the moment of the reboot call
	hadSlot, lockWasFree bool
	// during, when set, runs inside the call (e.g. the shutdown stopping
	// the holder); ctxErr is the call's context error after it.
	during func()
	ctxErr error
}

func (r *fakeRebooter) Reboot(ctx context.Context, reason string) error {
	r.rec.add("rebooter.Reboot")
	_, slot := r.cl.slot(r.node)
	free := r.cl.lockFree()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reasons = append(r.reasons, reason)
	r.hadSlot, r.lockWasFree = slot, free
	if r.during != nil {
		r.during()
	}
	r.ctxErr = ctx.Err()
	return r.err
}

func (r *fakeRebooter) calls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.reasons)
}

// ---- Holder ----

type fakeHolder struct {
	rec       *recorder
	active    bool
	activeErr error
	startErr  error
}

func (h *fakeHolder) Active(ctx context.Context) (bool, error) {
	h.rec.add("holder.Active")
	return h.active, h.activeErr
}

// holderExit is a transient holder that exited before it was ready, as
// lib/systemd's JobError reports it.
type holderExit struct{ status int }

func (e holderExit) Error() string   { return fmt.Sprintf("holder exited with status %d", e.status) }
func (e holderExit) ExitStatus() int { return e.status }

func (h *fakeHolder) Start(ctx context.Context) error {
	h.rec.add("holder.Start")
	return h.startErr
}

// ---- Host ----

type fakeHost struct {
	rec *recorder

	mu                              sync.Mutex
	bootID                          string
	bootErr                         error
	kill                            bool
	killErr                         error
	requested                       map[string]bool
	markErr, requestedErr, clearErr error
	rebootedAt                      []time.Time
	rebootedErr                     error
}

func (h *fakeHost) BootID() (string, error) {
	h.rec.add("host.BootID")
	return h.bootID, h.bootErr
}

func (h *fakeHost) KillSwitch() (bool, error) {
	h.rec.add("host.KillSwitch")
	return h.kill, h.killErr
}

func (h *fakeHost) MarkRebootRequested(bootID string) error {
	h.rec.add("host.MarkRebootRequested")
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.markErr != nil {
		return h.markErr
	}
	h.requested[bootID] = true
	return nil
}

func (h *fakeHost) RebootRequested(bootID string) (bool, error) {
	h.rec.add("host.RebootRequested")
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.requested[bootID], h.requestedErr
}

func (h *fakeHost) ClearRebootRequested() error {
	h.rec.add("host.ClearRebootRequested")
	h.mu.Lock()
	defer h.mu.Unlock()
	clear(h.requested)
	return h.clearErr
}

func (h *fakeHost) MarkRebooted(at time.Time) error {
	h.rec.add("host.MarkRebooted")
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rebootedAt = append(h.rebootedAt, at)
	return h.rebootedErr
}

func (h *fakeHost) marked(bootID string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.requested[bootID]
}

// ---- StateStore ----

type fakeState struct {
	rec     *recorder
	mu      sync.Mutex
	st      State
	loadErr error
	saveErr error
	saves   int
	// failLoadFrom / failSaveFrom make the n-th and later calls fail
	// (1-based; 0: never).
	failLoadFrom, failSaveFrom int
	loads, saveCalls           int
}

func copyState(s State) State {
	s.RebootsForReason = maps.Clone(s.RebootsForReason)
	return s
}

func (f *fakeState) Load() (State, error) {
	f.rec.add("state.Load")
	f.mu.Lock()
	defer f.mu.Unlock()
	f.loads++
	if f.failLoadFrom > 0 && f.loads >= f.failLoadFrom {
		return State{}, errors.New("state: read error")
	}
	if f.loadErr != nil {
		return State{}, f.loadErr
	}
	return copyState(f.st), nil
}

func (f *fakeState) Save(s State) error {
	f.rec.add("state.Save")
	f.mu.Lock()
	defer f.mu.Unlock()
	f.saveCalls++
	if f.failSaveFrom > 0 && f.saveCalls >= f.failSaveFrom {
		return errors.New("state: write error")
	}
	if f.saveErr != nil {
		return f.saveErr
	}
	f.saves++
	f.st = copyState(s)
	return nil
}

func (f *fakeState) get() State {
	f.mu.Lock()
	defer f.mu.Unlock()
	return copyState(f.st)
}

// ---- environment ----

// t0 is the fixed "now" of tests outside a synctest bubble.
var t0 = time.Date(2025, 3, 4, 22, 30, 0, 0, time.UTC)

const self = "n1"

// env is one node's coordinator wired to fakes, with a healthy three-node
// cluster, a needed reboot, open windows and a passing health script.
type env struct {
	rec    *recorder
	clk    *clock
	cl     *fakeCluster
	det    *fakeDetector
	script *fakeScript
	win    *fakeWindows
	pol    *fakePolicies
	nh     *fakeNodeHealth
	inh    *fakeInhibitors
	rb     *fakeRebooter
	holder *fakeHolder
	host   *fakeHost
	st     *fakeState
	notify *fakeNotifier
	opt    Options
	// noInhibitors wires a nil Inhibitors port.
	noInhibitors bool
	// now overrides the clock (time.Now inside a synctest bubble).
	now func() time.Time
}

func newEnv() *env {
	rec := &recorder{}
	cl := newFakeCluster(rec)
	cl.members = []string{"n1", "n2", "n3"}
	for _, n := range []string{"n2", "n3"} {
		cl.alive[n] = Alive{Node: n, Healthy: true, State: StateIdle, MaxConcurrent: 1}
	}
	e := &env{
		rec:    rec,
		clk:    &clock{t: t0},
		cl:     cl,
		det:    &fakeDetector{rec: rec, seq: []Detection{detYes}},
		script: &fakeScript{rec: rec, verdict: ScriptVerdict{Allowed: true, FirstLine: "cluster ok"}},
		win:    &fakeWindows{rec: rec, verdict: WindowVerdict{Open: true, Reason: "inside allow window"}},
		pol:    &fakePolicies{rec: rec, health: PolicyVerdict{Allowed: true, Rule: "min_healthy_absolute", Reason: "3 healthy"}},
		nh:     &fakeNodeHealth{rec: rec, ok: true, why: "running"},
		inh:    &fakeInhibitors{rec: rec},
		rb:     &fakeRebooter{rec: rec, cl: cl, node: self},
		holder: &fakeHolder{rec: rec},
		host:   &fakeHost{rec: rec, bootID: "boot-2", requested: map[string]bool{}},
		st:     &fakeState{rec: rec},
		opt: Options{
			Node: self, Cluster: "test", Version: "1.0.0", Kernel: "6.1.0-29",
			MaxConcurrent: 1, MaxHoldWait: time.Hour, BackoffMin: time.Second, BackoffMax: 10 * time.Second,
			MaxRebootDuration: 30 * time.Minute, MaxRebootsPerReason: 1, RespectInhibitors: true,
			KillSwitchPath: "/etc/clusterrebootd/disable", CleanupTimeout: 5 * time.Second,
		},
	}
	return e
}

func (e *env) coord(t *testing.T) *Coordinator {
	t.Helper()
	d := Deps{
		Cluster: e.cl, Detector: e.det, Script: e.script, Windows: e.win, Policies: e.pol,
		NodeHealth: e.nh, Inhibitors: e.inh, Rebooter: e.rb, Holder: e.holder, Host: e.host,
		State: e.st, Now: e.clk.Now,
	}
	if e.notify != nil {
		d.Notify = e.notify
	}
	if e.noInhibitors {
		d.Inhibitors = nil
	}
	if e.now != nil {
		d.Now = e.now
	}
	c, err := New(e.opt, d)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// wantErr checks err's exit code and, when gate is not empty, its gate.
func wantErr(t *testing.T, err error, code Code, gate string) *Error {
	t.Helper()
	if got := CodeOf(err); got != code {
		t.Fatalf("exit code = %d, want %d (err: %v)", got, code, err)
	}
	if code == CodeOK {
		if err != nil {
			t.Fatalf("err = %v, want nil", err)
		}
		return nil
	}
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("err %T %v is not an *Error", err, err)
	}
	if gate != "" && ce.Gate != gate {
		t.Fatalf("gate = %q, want %q (err: %v)", ce.Gate, gate, err)
	}
	return ce
}

// fakeNotifier records sd_notify calls.
type fakeNotifier struct {
	mu       sync.Mutex
	ready    int
	statuses []string
	watchdog int
}

func (n *fakeNotifier) Ready() { n.mu.Lock(); n.ready++; n.mu.Unlock() }
func (n *fakeNotifier) Status(line string) {
	n.mu.Lock()
	n.statuses = append(n.statuses, line)
	n.mu.Unlock()
}
func (n *fakeNotifier) Watchdog(ctx context.Context, healthy func() bool) {
	n.mu.Lock()
	n.watchdog++
	n.mu.Unlock()
}
func (n *fakeNotifier) lines() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.statuses)
}
