package histcheck

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/cluster"
)

// SourceSnapshot marks events Collect synthesised from the state before its
// start revision: their creation was not observed, so it is not checked.
const SourceSnapshot = "snapshot"

// life is one slot from its creation to its deletion.
type life struct {
	node           string
	bootID         string
	fromRev, toRev int64 // toRev 0: still held at the end
	fromAt, toAt   time.Time
	ender          *cluster.HistoryEvent // nil: deleted without a record (or still held)
	lost           bool                  // already reported as lost
}

func (l *life) open() bool { return l.toRev == 0 }

// covers reports whether the slot existed at t (bounds inclusive).
func (l *life) covers(t time.Time) bool {
	return !t.Before(l.fromAt) && (l.open() || !t.After(l.toAt))
}

type checker struct {
	log   Log
	rep   Report
	lives []*life
	times revTimes
}

// Check replays a run's log and reports every violation of the safety
// invariant. It never modifies l.
func Check(l Log) Report {
	c := &checker{log: l}
	if c.log.MaxConcurrent < 1 {
		c.log.MaxConcurrent = 1
	}
	c.times = newRevTimes(l.Events)
	c.revisions()
	c.nodes()
	c.final()
	return c.rep
}

func (c *checker) violate(k ViolationKind, node string, rev int64, at time.Time, format string, args ...any) {
	c.rep.Violations = append(c.rep.Violations, Violation{Kind: k, Node: node, Rev: rev, At: at, Msg: fmt.Sprintf(format, args...)})
}

// revisions replays the etcd events in revision order.
func (c *checker) revisions() {
	var evs []Event
	for _, e := range c.log.Events {
		if e.Kind.etcd() {
			evs = append(evs, e)
		}
	}
	slices.SortStableFunc(evs, func(a, b Event) int { return cmp.Compare(a.Rev, b.Rev) })
	held := map[string]*life{}
	locks := map[string]int64{} // key → create revision
	over := false
	for i := 0; i < len(evs); {
		j := i
		for j < len(evs) && evs[j].Rev == evs[i].Rev {
			j++
		}
		group := evs[i:j]
		rev := evs[i].Rev
		i = j

		records := map[string][]*cluster.HistoryEvent{} // node → records of this revision
		for _, e := range group {
			if e.Kind == Record && e.History != nil {
				c.rep.Records++
				records[e.History.Node] = append(records[e.History.Node], e.History)
			}
		}
		// Slot creations, checked against the mutex queue before this
		// revision (the fenced Txn compares that state).
		for _, e := range group {
			if e.Kind != SlotPut || held[e.Node] != nil || e.Source == SourceSnapshot {
				continue
			}
			c.rep.SlotsTaken++
			if !hasEvent(records[e.Node], cluster.EventSlotTaken) {
				c.violate(UnfencedSlot, e.Node, rev, c.times.at(rev), "slot of %s created without a slot-taken record in the same revision", e.Node)
			}
			if c.log.Locks {
				c.checkFence(e, rev, locks)
			}
		}
		for _, e := range group {
			switch e.Kind {
			case LockPut:
				locks[e.Key] = e.CreateRev
			case LockDelete:
				delete(locks, e.Key)
			case SlotPut:
				if l := held[e.Node]; l != nil {
					if e.Slot != nil && e.Slot.BootID != "" && l.bootID != "" && e.Slot.BootID != l.bootID {
						c.violate(UnfencedSlot, e.Node, rev, c.times.at(rev), "slot of %s rewritten for boot %s, taken for boot %s", e.Node, short(e.Slot.BootID), short(l.bootID))
					}
					continue
				}
				l := &life{node: e.Node, fromRev: rev, fromAt: c.times.atOrBefore(rev)}
				if e.Slot != nil {
					l.bootID = e.Slot.BootID
				}
				held[e.Node] = l
				c.lives = append(c.lives, l)
			case SlotDelete:
				l := held[e.Node]
				if l == nil {
					continue // a delete of nothing (the snapshot did not show it)
				}
				delete(held, e.Node)
				l.toRev, l.toAt = rev, c.times.atOrAfter(rev)
				l.ender = firstEnder(records[e.Node])
				if l.ender == nil {
					l.lost = true
					c.violate(SlotLost, e.Node, rev, l.toAt, "slot of %s (boot %s, taken at revision %d) deleted without a release record", e.Node, short(l.bootID), l.fromRev)
				}
			}
		}
		if n := len(held); n > c.log.MaxConcurrent {
			if !over {
				c.violate(TooManySlots, "", rev, c.times.at(rev), "%d slots at once (%s), max_concurrent %d", n, strings.Join(sortedKeys(held), ", "), c.log.MaxConcurrent)
			}
			over = true
		} else {
			over = false
		}
		c.rep.PeakSlots = max(c.rep.PeakSlots, len(held))
		// A reboot-requested record is written while the node holds its slot.
		for node, rs := range records {
			for _, r := range rs {
				if r.Event != cluster.EventRebootRequested {
					continue
				}
				l := held[node]
				if l == nil || (r.BootID != "" && l.bootID != "" && r.BootID != l.bootID) {
					c.violate(RebootWithoutSlot, node, rev, r.At, "%s recorded reboot-requested (boot %s) without holding a slot of that boot", node, short(r.BootID))
				}
			}
		}
	}
}

// checkFence: the slot's fence revision is the create revision of a mutex
// key that exists and heads the queue.
func (c *checker) checkFence(e Event, rev int64, locks map[string]int64) {
	if e.Slot == nil || e.Slot.FenceRevision == 0 {
		c.violate(UnfencedSlot, e.Node, rev, c.times.at(rev), "slot of %s has no fence revision", e.Node)
		return
	}
	fence, head := e.Slot.FenceRevision, int64(0)
	found := false
	for _, cr := range locks {
		if cr == fence {
			found = true
		}
		if head == 0 || cr < head {
			head = cr
		}
	}
	switch {
	case !found:
		c.violate(UnfencedSlot, e.Node, rev, c.times.at(rev), "slot of %s written with fence revision %d: no such mutex key", e.Node, fence)
	case head != fence:
		c.violate(UnfencedSlot, e.Node, rev, c.times.at(rev), "slot of %s written with fence revision %d while the mutex key of revision %d heads the queue", e.Node, fence, head)
	}
}

func hasEvent(rs []*cluster.HistoryEvent, ev string) bool {
	return slices.ContainsFunc(rs, func(r *cluster.HistoryEvent) bool { return r.Event == ev })
}

func firstEnder(rs []*cluster.HistoryEvent) *cluster.HistoryEvent {
	for _, r := range rs {
		if enders[r.Event] {
			return r
		}
	}
	return nil
}

func short(id string) string {
	if id == "" {
		return "?"
	}
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

func sortedKeys[K ~string, V any](m map[K]V) []K {
	ks := make([]K, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// final reports the slot and mutex keys left at the end.
func (c *checker) final() {
	f := c.log.Final
	if f == nil {
		return
	}
	for _, n := range f.Slots {
		c.violate(StaleKey, n, f.Rev, time.Time{}, "slot of %s left at the end", n)
	}
	for _, k := range f.Locks {
		c.violate(StaleKey, "", f.Rev, time.Time{}, "mutex key %s left at the end", k)
	}
}

// revTimes maps revisions to times: the earliest time any event of that
// revision carries (a record's or slot's own time is written just before
// the commit, a watch's receive time just after).
type revTimes struct {
	revs  []int64
	times []time.Time
}

func newRevTimes(evs []Event) revTimes {
	m := map[int64]time.Time{}
	note := func(rev int64, t time.Time) {
		if rev <= 0 || t.IsZero() {
			return
		}
		if o, ok := m[rev]; !ok || t.Before(o) {
			m[rev] = t
		}
	}
	for _, e := range evs {
		if !e.Kind.etcd() {
			continue
		}
		note(e.Rev, e.At)
		if e.History != nil {
			note(e.Rev, e.History.At)
		}
		if e.Kind == SlotPut && e.Slot != nil && e.Slot.ModRevision == 0 {
			note(e.Rev, e.Slot.AcquiredAt)
		}
	}
	var rt revTimes
	for r := range m {
		rt.revs = append(rt.revs, r)
	}
	slices.Sort(rt.revs)
	for _, r := range rt.revs {
		rt.times = append(rt.times, m[r])
	}
	return rt
}

// at is the time of rev, zero when unknown.
func (rt revTimes) at(rev int64) time.Time {
	if i, ok := slices.BinarySearch(rt.revs, rev); ok {
		return rt.times[i]
	}
	return time.Time{}
}

// atOrBefore is the time of rev or of the latest earlier known revision
// (a lower bound), zero when none.
func (rt revTimes) atOrBefore(rev int64) time.Time {
	i, ok := slices.BinarySearch(rt.revs, rev)
	if ok {
		return rt.times[i]
	}
	if i == 0 {
		return time.Time{}
	}
	return rt.times[i-1]
}

// atOrAfter is the time of rev or of the earliest later known revision (an
// upper bound); far in the future when none.
func (rt revTimes) atOrAfter(rev int64) time.Time {
	i, _ := slices.BinarySearch(rt.revs, rev)
	if i == len(rt.revs) {
		return forever
	}
	return rt.times[i]
}

var forever = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
