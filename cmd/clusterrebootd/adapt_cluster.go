package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/cluster"
	co "github.com/clusterrebootd/clusterrebootd/lib/coordinator"
)

// clusterPort adapts *cluster.Client to coordinator.Cluster: it converts
// records and maps lib/cluster's sentinel errors onto the coordinator's.
type clusterPort struct {
	lazy       *lazyCluster
	aliveTTL   time.Duration
	historyTTL time.Duration
	lockTTL    time.Duration

	mu         sync.Mutex
	aliveLease map[string]int64 // from the last View: saves PublishAlive a Get
}

// mapErr wraps err with the coordinator sentinel matching its cluster one.
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	for _, m := range []struct{ from, to error }{
		{cluster.ErrLockLost, co.ErrLockLost},
		{cluster.ErrUnavailable, co.ErrUnavailable},
		{cluster.ErrAuth, co.ErrUnavailable}, // refused by etcd: this node cannot coordinate (exit 6)
		{cluster.ErrCorrupt, co.ErrCorrupt},
		{cluster.ErrConflict, co.ErrConflict},
	} {
		if errors.Is(err, m.from) {
			return fmt.Errorf("%w: %w", m.to, err)
		}
	}
	return err
}

func (p *clusterPort) View(ctx context.Context) (co.View, error) {
	return p.view(ctx, (*cluster.Client).Snapshot)
}

func (p *clusterPort) NodeView(ctx context.Context, node string) (co.View, error) {
	return p.view(ctx, func(c *cluster.Client, ctx context.Context) (cluster.Snapshot, error) {
		return c.NodeSnapshot(ctx, node)
	})
}

func (p *clusterPort) GateView(ctx context.Context) (co.View, error) {
	return p.view(ctx, (*cluster.Client).SnapshotWithoutQueue)
}

// QueueView reads the mutex queue alone; it leaves the alive-lease hints
// of the last full read as they are.
func (p *clusterPort) QueueView(ctx context.Context) (co.View, error) {
	s, err := p.snapshot(ctx, (*cluster.Client).QueueSnapshot)
	if err != nil {
		return co.View{}, err
	}
	return co.View{Revision: s.Revision, Queue: waitersOf(s)}, nil
}

// snapshot runs read on the (lazily dialled) client, errors mapped.
func (p *clusterPort) snapshot(ctx context.Context, read func(*cluster.Client, context.Context) (cluster.Snapshot, error)) (cluster.Snapshot, error) {
	c, err := p.lazy.get(ctx)
	if err != nil {
		return cluster.Snapshot{}, mapErr(err)
	}
	s, err := read(c, ctx)
	return s, mapErr(err)
}

func (p *clusterPort) view(ctx context.Context, read func(*cluster.Client, context.Context) (cluster.Snapshot, error)) (co.View, error) {
	s, err := p.snapshot(ctx, read)
	if err != nil {
		return co.View{}, err
	}
	v := co.View{Revision: s.Revision}
	p.mu.Lock()
	p.aliveLease = make(map[string]int64, len(s.Alive))
	for _, a := range s.Alive {
		p.aliveLease[a.Node] = s.AliveLease(a.Node)
	}
	p.mu.Unlock()
	for _, m := range s.Members {
		v.Members = append(v.Members, m.Node)
	}
	for _, a := range s.Alive {
		v.Alive = append(v.Alive, co.Alive(a))
	}
	for _, sl := range s.Slots {
		v.Slots = append(v.Slots, co.Slot(sl))
	}
	if s.Pause != nil {
		pz := co.Pause(*s.Pause)
		v.Pause = &pz
	}
	if s.Settings != nil {
		v.MaxConcurrent = s.Settings.MaxConcurrent
	}
	v.Queue = waitersOf(s)
	return v, nil
}

func waitersOf(s cluster.Snapshot) []co.Waiter {
	var q []co.Waiter
	for _, w := range s.Queue {
		q = append(q, co.Waiter{Node: w.Node, PID: w.PID, QueuedAt: w.QueuedAt, Key: w.Key})
	}
	return q
}

func (p *clusterPort) Register(ctx context.Context, node string) error {
	c, err := p.lazy.get(ctx)
	if err != nil {
		return mapErr(err)
	}
	return mapErr(c.Register(ctx, node))
}

func (p *clusterPort) PublishAlive(ctx context.Context, a co.Alive) error {
	c, err := p.lazy.get(ctx)
	if err != nil {
		return mapErr(err)
	}
	p.mu.Lock()
	hint := p.aliveLease[a.Node]
	delete(p.aliveLease, a.Node) // a hint is used once; later calls look the lease up
	p.mu.Unlock()
	return mapErr(c.PublishAliveOn(ctx, cluster.Alive(a), p.aliveTTL, hint))
}

func (p *clusterPort) UpdateSlot(ctx context.Context, s co.Slot) (co.Slot, error) {
	c, err := p.lazy.get(ctx)
	if err != nil {
		return co.Slot{}, mapErr(err)
	}
	out, err := c.UpdateSlot(ctx, cluster.Slot(s))
	return co.Slot(out), mapErr(err)
}

func (p *clusterPort) ReleaseSlot(ctx context.Context, s co.Slot, ev co.HistoryEvent) error {
	c, err := p.lazy.get(ctx)
	if err != nil {
		return mapErr(err)
	}
	return mapErr(c.ReleaseSlot(ctx, cluster.Slot(s), historyOf(ev), p.historyTTL))
}

func (p *clusterPort) AppendHistory(ctx context.Context, ev co.HistoryEvent) error {
	c, err := p.lazy.get(ctx)
	if err != nil {
		return mapErr(err)
	}
	return mapErr(c.AppendHistory(ctx, historyOf(ev), p.historyTTL))
}

func (p *clusterPort) History(ctx context.Context, node string, since time.Time) ([]co.HistoryEvent, error) {
	c, err := p.lazy.get(ctx)
	if err != nil {
		return nil, mapErr(err)
	}
	hs, err := c.History(ctx, node, since)
	if err != nil {
		return nil, mapErr(err)
	}
	out := make([]co.HistoryEvent, 0, len(hs))
	for _, h := range hs {
		out = append(out, co.HistoryEvent{Event: h.Event, Node: h.Node, Reason: h.Reason, By: h.By, BootID: h.BootID, At: h.At, DurationMS: h.DurationMS})
	}
	return out, nil
}

func historyOf(ev co.HistoryEvent) cluster.HistoryEvent {
	return cluster.HistoryEvent{Event: ev.Event, Node: ev.Node, Reason: ev.Reason, By: ev.By, BootID: ev.BootID, At: ev.At, DurationMS: ev.DurationMS}
}

func (p *clusterPort) WaitChange(ctx context.Context, w co.Watch, afterRev int64) error {
	c, err := p.lazy.get(ctx)
	if err != nil {
		return mapErr(err)
	}
	key, prefix := c.Prefix()+"/pause", false
	if w == co.WatchSlots {
		key, prefix = c.Prefix()+"/slots/", true
	}
	return mapErr(c.WaitChange(ctx, key, prefix, afterRev))
}

func (p *clusterPort) NewSession(ctx context.Context, info co.LockInfo) (co.Session, error) {
	c, err := p.lazy.get(ctx)
	if err != nil {
		return nil, mapErr(err)
	}
	s, err := c.NewSession(ctx, p.lockTTL, cluster.LockInfo(info))
	if err != nil {
		return nil, mapErr(err)
	}
	return &sessionPort{s: s, historyTTL: p.historyTTL}, nil
}

func (p *clusterPort) SetPause(ctx context.Context, pz co.Pause) error {
	c, err := p.lazy.get(ctx)
	if err != nil {
		return mapErr(err)
	}
	return mapErr(c.SetPause(ctx, cluster.Pause(pz)))
}

func (p *clusterPort) ClearPause(ctx context.Context) (bool, error) {
	c, err := p.lazy.get(ctx)
	if err != nil {
		return false, mapErr(err)
	}
	was, err := c.ClearPause(ctx)
	return was, mapErr(err)
}

func (p *clusterPort) SetMaxConcurrent(ctx context.Context, n int) error {
	c, err := p.lazy.get(ctx)
	if err != nil {
		return mapErr(err)
	}
	return mapErr(c.SetSettings(ctx, cluster.Settings{MaxConcurrent: n}))
}

func (p *clusterPort) Forget(ctx context.Context, node string) error {
	c, err := p.lazy.get(ctx)
	if err != nil {
		return mapErr(err)
	}
	return mapErr(c.Forget(ctx, node))
}

// sessionPort adapts *cluster.Session to coordinator.Session.
type sessionPort struct {
	s          *cluster.Session
	historyTTL time.Duration
}

func (s *sessionPort) Lock(ctx context.Context) error   { return mapErr(s.s.Lock(ctx)) }
func (s *sessionPort) Unlock(ctx context.Context) error { return mapErr(s.s.Unlock(ctx)) }
func (s *sessionPort) Done() <-chan struct{}            { return s.s.Done() }
func (s *sessionPort) LeaseID() int64                   { return s.s.LeaseID() }
func (s *sessionPort) KeepAliveHealthy() bool           { return s.s.KeepAliveHealthy() }
func (s *sessionPort) Close(ctx context.Context) error  { return mapErr(s.s.Close(ctx)) }

func (s *sessionPort) AcquireSlot(ctx context.Context, sl co.Slot, ev co.HistoryEvent) (co.Slot, error) {
	out, err := s.s.AcquireSlot(ctx, cluster.Slot(sl), historyOf(ev), s.historyTTL)
	return co.Slot(out), mapErr(err)
}
