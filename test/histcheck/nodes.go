package histcheck

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/cluster"
)

// reboot is one Down of a node and the Up that ended it.
type reboot struct {
	node   string
	bootID string    // the boot it left
	down   time.Time //
	up     time.Time // zero: never came back
}

// span is a time interval one node spent in some state.
type span struct {
	node     string
	from, to time.Time
}

// nodes checks the node-side records against the slots.
func (c *checker) nodes() {
	var evs []Event
	for _, e := range c.log.Events {
		if !e.Kind.etcd() {
			evs = append(evs, e)
		}
	}
	slices.SortStableFunc(evs, func(a, b Event) int { return a.At.Compare(b.At) })

	// Boots: fill in the boot a Down left, pair every Down with its Up.
	cur := map[string]string{}
	var reboots []*reboot
	open := map[string]*reboot{}
	for i := range evs {
		e := &evs[i]
		switch e.Kind {
		case Up:
			if r := open[e.Node]; r != nil {
				r.up = e.At
				delete(open, e.Node)
			}
			cur[e.Node] = e.BootID
		case Down:
			if e.BootID == "" {
				e.BootID = cur[e.Node]
			}
			r := &reboot{node: e.Node, bootID: e.BootID, down: e.At}
			reboots = append(reboots, r)
			open[e.Node] = r
			c.rep.Reboots++
		case RebootAsked:
			if e.BootID == "" {
				e.BootID = cur[e.Node]
			}
		}
	}

	// Every reboot, and every request a node made, inside a slot of the
	// boot it left; the slot of a node that went down kept until it is
	// back (or someone decided otherwise).
	for _, r := range reboots {
		l := c.slotAt(r.node, r.bootID, r.down)
		if l == nil {
			c.violate(RebootWithoutSlot, r.node, 0, r.down, "%s went down (boot %s) without holding a slot of that boot", r.node, short(r.bootID))
			continue
		}
		if l.open() || l.lost || (l.ender != nil && decided[l.ender.Event]) {
			continue
		}
		if r.up.IsZero() || l.ender.Event != cluster.EventCompleted || l.toAt.Before(r.up) || l.ender.BootID == r.bootID {
			l.lost = true
			c.violate(SlotLost, r.node, l.toRev, l.toAt, "slot of %s deleted (%s) before the node came back from its reboot (down %s, up %s)",
				r.node, l.ender.Event, clock(r.down), clock(r.up))
		}
	}
	for _, e := range evs {
		if e.Kind == RebootAsked && c.slotAt(e.Node, e.BootID, e.At) == nil {
			c.violate(RebootWithoutSlot, e.Node, 0, e.At, "%s asked for a reboot (boot %s, %s) without holding a slot of that boot", e.Node, short(e.BootID), e.Source)
		}
	}

	inFlight := c.inFlight(evs)
	c.rep.PeakInFlight = c.overlap(inFlight, TooManyInFlight, "between reboot requested and slot released")
	c.rep.PeakDown = c.overlap(c.down(reboots), TooManyDown, "down")
}

// slotAt finds the slot of node for boot (any boot when "") that existed
// at t.
func (c *checker) slotAt(node, boot string, t time.Time) *life {
	for _, l := range c.lives {
		if l.node == node && (boot == "" || l.bootID == "" || l.bootID == boot) && l.covers(t) {
			return l
		}
	}
	return nil
}

// inFlight: a node is in flight from the first sign of a reboot request
// (reboot-requested record, a request it made, going down) until its slot
// is deleted with a record while it is up, or by an operator's release or
// an expiry.
func (c *checker) inFlight(nodeEvs []Event) []span {
	type mark struct {
		at    time.Time
		kind  int // 0 request, 1 down, 2 up, 3 slot end
		node  string
		ender *cluster.HistoryEvent
	}
	var ms []mark
	for _, e := range nodeEvs {
		switch e.Kind {
		case RebootAsked:
			ms = append(ms, mark{at: e.At, kind: 0, node: e.Node})
		case Down:
			ms = append(ms, mark{at: e.At, kind: 1, node: e.Node})
		case Up:
			ms = append(ms, mark{at: e.At, kind: 2, node: e.Node})
		}
	}
	for _, e := range c.log.Events {
		if e.Kind == Record && e.History != nil && e.History.Event == cluster.EventRebootRequested {
			at := e.History.At
			if at.IsZero() {
				at = c.times.atOrBefore(e.Rev)
			}
			ms = append(ms, mark{at: at, kind: 0, node: e.History.Node})
		}
	}
	for _, l := range c.lives {
		if !l.open() {
			ms = append(ms, mark{at: l.toAt, kind: 3, node: l.node, ender: l.ender})
		}
	}
	slices.SortStableFunc(ms, func(a, b mark) int {
		if d := a.at.Compare(b.at); d != 0 {
			return d
		}
		return cmp.Compare(a.kind, b.kind)
	})
	type state struct {
		in, down bool
		from     time.Time
	}
	st := map[string]*state{}
	var out []span
	for _, m := range ms {
		s := st[m.node]
		if s == nil {
			s = &state{}
			st[m.node] = s
		}
		switch m.kind {
		case 0, 1:
			if !s.in {
				s.in, s.from = true, m.at
			}
			if m.kind == 1 {
				s.down = true
			}
		case 2:
			s.down = false
		case 3:
			end := m.ender != nil && (decided[m.ender.Event] || !s.down)
			if s.in && end {
				out = append(out, span{node: m.node, from: s.from, to: m.at})
				s.in, s.down = false, false
			}
		}
	}
	for n, s := range st {
		if s.in {
			out = append(out, span{node: n, from: s.from, to: forever})
		}
	}
	return out
}

// down: a node is down from Down to Up, or until its slot was released by
// an operator or expired while it was down.
func (c *checker) down(rs []*reboot) []span {
	var out []span
	for _, r := range rs {
		to := r.up
		if to.IsZero() {
			to = forever
		}
		for _, l := range c.lives {
			if l.node == r.node && !l.open() && l.ender != nil && decided[l.ender.Event] &&
				l.toAt.After(r.down) && l.toAt.Before(to) {
				to = l.toAt
			}
		}
		out = append(out, span{node: r.node, from: r.down, to: to})
	}
	return out
}

// overlap reports each episode of more than max_concurrent spans at once
// and returns the peak.
func (c *checker) overlap(ss []span, k ViolationKind, what string) int {
	type edge struct {
		at   time.Time
		d    int
		node string
	}
	var es []edge
	for _, s := range ss {
		es = append(es, edge{s.from, +1, s.node}, edge{s.to, -1, s.node})
	}
	// Ends before starts at one instant: touching spans do not overlap.
	slices.SortStableFunc(es, func(a, b edge) int {
		if d := a.at.Compare(b.at); d != 0 {
			return d
		}
		return cmp.Compare(a.d, b.d)
	})
	in := map[string]int{}
	n, peak, over := 0, 0, false
	for _, e := range es {
		n += e.d
		in[e.node] += e.d
		peak = max(peak, n)
		if n <= c.log.MaxConcurrent {
			over = false
			continue
		}
		if over {
			continue
		}
		over = true
		var who []string
		for k, v := range in {
			if v > 0 {
				who = append(who, k)
			}
		}
		slices.Sort(who)
		c.violate(k, "", 0, e.at, "%d nodes %s at once (%s), max_concurrent %d", n, what, strings.Join(who, ", "), c.log.MaxConcurrent)
	}
	return peak
}

func clock(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.Format("15:04:05.000")
}
