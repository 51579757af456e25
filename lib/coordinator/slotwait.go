package coordinator

// slotsFull is the holder's cheap first look under the lock (when it queued
// behind at least max_concurrent others, see underLock), on NodeView,
// whose size does not depend on the cluster's (own records, the slots,
// pause and settings). When other nodes hold at least max_concurrent slots
// and no pause is set, it asks the slot limit, and returns its verdict when
// the slot table is full: the holder waits for a change of P/slots/ after
// revision rev. In every other case it returns nil, and the full view
// decides with every gate in order, as before.
//
// Why: the holder that gets the mutex right after its predecessor took the
// last slot finds the slots full, and used to read the whole cluster (every
// member and alive record) only to learn that; with 1000 nodes that read was
// the largest part of a back-to-back handover (docs/performance.md). A slot
// is still only ever taken on the full view with every gate passed: this
// look only decides to wait, on the slot limit alone, which depends only on
// the slots and the settings and so says the same on either view. The gates
// that come before the slot limit in the full list (kill switch, pause,
// window, detector) run when a slot is free, before any slot is taken.
func (h *holdRun) slotsFull() (wait *GateResult, rev int64, err error) {
	c := h.c
	v, err := c.Cluster.NodeView(h.ctx, c.opt.Node)
	if err != nil {
		return nil, 0, err
	}
	others := 0
	for _, s := range v.Slots {
		if s.Node != c.opt.Node {
			others++
		}
	}
	if v.Pause != nil || others < v.EffectiveMax(c.opt.MaxConcurrent) {
		return nil, 0, nil // a slot may be free: the full view decides
	}
	r := c.gateSlots(h.ctx, &gateInput{phase: phaseUnderLock, view: v, now: c.Now()})
	if r.Pass || !r.Wait {
		return nil, 0, nil
	}
	r.Gate = "slots"
	return &r, v.Revision, nil
}
