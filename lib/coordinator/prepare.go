package coordinator

import (
	"context"
	"sync"
)

// prepareReboot does what must be done between the fenced slot write and
// the reboot call, and returns only when all of it is done:
//
//   - unlock the mutex (the slot protects the cluster from here on; the
//     cluster adapter may have released it with the slot write already);
//   - the reboot-requested marker, then the slot's boot id in the state
//     file (a kill switch set during the reboot still lets the slot go);
//   - once the marker is written: the "rebooting" alive record and the
//     reboot-requested history record.
//
// These are independent of each other, so they run at the same time: the
// marker and the state file are local writes (each an fsync), the others
// etcd round trips, and in a rolling reboot every one of them used to sit on
// the critical path of every wave (docs/performance.md, rollout). Ordering
// that matters is kept: nothing is published or recorded as requested
// unless the marker was written, and the caller checks the slot's deadline
// and calls the Rebooter only after everything here returned.
//
// The error is the marker's: then no reboot may follow and the caller gives
// the slot back. The state file, the alive record and the history record
// are best effort (logged), as they were when run one after the other.
func (h *holdRun) prepareReboot(det Detection) error {
	c := h.c
	var wg sync.WaitGroup
	wg.Go(h.unlock)
	err := c.Host.MarkRebootRequested(h.bootID)
	if err == nil {
		wg.Go(func() { h.publish(StateRebooting, det.Reason) })
		wg.Go(func() {
			req := HistoryEvent{Event: EventRebootRequested, Node: c.opt.Node, Reason: det.Reason, BootID: h.bootID, At: c.Now()}
			if err := c.Cluster.AppendHistory(h.ctx, req); err != nil {
				h.log.Warn("could not record reboot-requested in the history", "error", err)
			}
		})
		if st, lerr := c.State.Load(); lerr == nil {
			st.SlotBootID = h.bootID
			if serr := c.State.Save(st); serr != nil {
				h.log.Warn("could not note the slot in the state file (a kill switch would keep it after the reboot)", "error", serr)
			}
		}
	}
	wg.Wait()
	return err
}

// goValue runs f in a goroutine and returns a function that waits for its
// result (the join); it may be called any number of times.
func goValue[T any](f func() T) func() T {
	ch := make(chan T, 1)
	go func() { ch <- f() }()
	return sync.OnceValue(func() T { return <-ch })
}

// healthResult is one run of the local node-health test (nodeHealthy).
type healthResult struct {
	ok  bool
	why string
}

// viewResult is a view read in the background.
type viewResult struct {
	v   View
	err error
}

// healthTest runs the local node-health test once.
func (c *Coordinator) healthTest(ctx context.Context) healthResult {
	ok, why := c.nodeHealthy(ctx)
	return healthResult{ok, why}
}

// startGateView reads the gate view in the background; the function it
// returns joins the read.
func (c *Coordinator) startGateView(ctx context.Context) func() viewResult {
	return goValue(func() viewResult { v, err := c.Cluster.GateView(ctx); return viewResult{v, err} })
}

// prefetchGateView starts reading the view the post-boot health script
// needs, at the same time as the check's own first read, when the state
// file says this node asked for a coordinated reboot in an earlier boot:
// then the check is almost certainly the post-boot check that releases the
// slot, and the read that would follow NodeView is on the critical path of
// every wave of a rollout. It returns nil otherwise (the idle tick stays at
// one read of its own records). The caller joins it on every path.
func (c *Coordinator) prefetchGateView(ctx context.Context, bootID string) func() viewResult {
	st, err := c.State.Load()
	if err != nil || st.SlotBootID == "" || st.SlotBootID == bootID {
		return nil
	}
	return c.startGateView(ctx)
}
