package main

import (
	"log"
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// schedule computes when a queued packet is released: now + delay ± a
// uniform jitter, but never before the packet queued ahead of it, so that
// the link keeps its order (TCP sees delay, not reordering).
type schedule struct {
	delay, jitter time.Duration
	rnd           *rand.Rand
	last          time.Time
}

func newSchedule(delay, jitter time.Duration, seed uint64) *schedule {
	return &schedule{delay: delay, jitter: jitter, rnd: rand.New(rand.NewPCG(seed, seed^0x2545f4914f6cdd1d))}
}

// release returns the release time of a packet that arrived at now.
func (s *schedule) release(now time.Time) time.Time {
	d := s.delay
	if s.jitter > 0 {
		d += time.Duration(s.rnd.Int64N(2*int64(s.jitter)+1)) - s.jitter
	}
	t := now.Add(max(d, 0))
	if t.Before(s.last) {
		t = s.last
	}
	s.last = t
	return t
}

// queued is a packet waiting for its verdict.
type queued struct {
	id  uint32
	due time.Time
}

// releaser gives the verdicts, in arrival order, each at its due time.
// Once flush is closed it accepts everything at once, waiting no more.
type releaser struct {
	in     chan queued
	flush  chan struct{}
	accept func(id uint32) error
	log    *log.Logger

	accepted, failed, flushed atomic.Uint64
}

func newReleaser(capacity int, accept func(uint32) error, logger *log.Logger) *releaser {
	return &releaser{in: make(chan queued, capacity), flush: make(chan struct{}), accept: accept, log: logger}
}

// run returns when in is closed and every packet got its verdict.
func (r *releaser) run() {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	flushing := false
	for q := range r.in {
		if !flushing {
			if wait := time.Until(q.due); wait > 0 {
				timer.Reset(wait)
				select {
				case <-timer.C:
				case <-r.flush:
					timer.Stop()
					flushing = true
				}
			}
		}
		if flushing {
			r.flushed.Add(1)
		}
		if err := r.accept(q.id); err != nil {
			r.failed.Add(1)
			r.log.Printf("verdict for packet %d: %v", q.id, err)
			continue
		}
		r.accepted.Add(1)
	}
}

// stop makes run accept what is pending without waiting.
func (r *releaser) stop() {
	select {
	case <-r.flush:
	default:
		close(r.flush)
	}
}
