package main

import (
	"errors"
	"io"
	"log"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestScheduleRelease(t *testing.T) {
	tests := []struct {
		name          string
		delay, jitter time.Duration
		gap           time.Duration // between arrivals
	}{
		{"no jitter", 100 * time.Millisecond, 0, time.Millisecond},
		{"jitter larger than the gaps", 120 * time.Millisecond, 30 * time.Millisecond, time.Millisecond},
		{"jitter smaller than the gaps", 50 * time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond},
		{"jitter equal to delay", 10 * time.Millisecond, 10 * time.Millisecond, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSchedule(tt.delay, tt.jitter, 1)
			now := time.Unix(1000, 0)
			var prev time.Time
			raised := 0
			for i := range 2000 {
				due := s.release(now)
				d := due.Sub(now)
				if d < tt.delay-tt.jitter || d < 0 {
					t.Fatalf("packet %d: delay %v below %v - %v", i, d, tt.delay, tt.jitter)
				}
				if due.Before(prev) {
					t.Fatalf("packet %d released at %v, before packet %d (%v): reordered", i, due, i-1, prev)
				}
				if d > tt.delay+tt.jitter {
					raised++ // held back behind the packet before it
					if due != prev {
						t.Fatalf("packet %d: delay %v above %v + %v but not held behind its predecessor", i, d, tt.delay, tt.jitter)
					}
				}
				prev = due
				now = now.Add(tt.gap)
			}
			if tt.jitter == 0 && raised != 0 {
				t.Fatalf("%d packets held back without jitter", raised)
			}
		})
	}
}

func TestScheduleJitterSpreads(t *testing.T) {
	// Arrivals far apart: nothing is held back, the delays cover the
	// whole range delay ± jitter.
	s := newSchedule(100*time.Millisecond, 20*time.Millisecond, 7)
	now := time.Unix(0, 0)
	lo, hi := time.Hour, time.Duration(0)
	for range 5000 {
		d := s.release(now).Sub(now)
		lo, hi = min(lo, d), max(hi, d)
		now = now.Add(time.Second)
	}
	if lo > 82*time.Millisecond || hi < 118*time.Millisecond || lo < 80*time.Millisecond || hi > 120*time.Millisecond {
		t.Fatalf("delays span [%v, %v], want about [80ms, 120ms]", lo, hi)
	}
}

// verdicts records the ids and times of accepted packets.
type verdicts struct {
	mu   sync.Mutex
	ids  []uint32
	when []time.Time
	fail map[uint32]bool
}

func (v *verdicts) accept(id uint32) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.fail[id] {
		return errors.New("refused")
	}
	v.ids = append(v.ids, id)
	v.when = append(v.when, time.Now())
	return nil
}

func TestReleaserOrderAndTiming(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := &verdicts{fail: map[uint32]bool{3: true}}
		var logs strings.Builder
		r := newReleaser(16, v.accept, log.New(&logs, "", 0))
		done := make(chan struct{})
		go func() { r.run(); close(done) }()
		s := newSchedule(100*time.Millisecond, 30*time.Millisecond, 3)
		t0 := time.Now()
		dues := map[uint32]time.Time{}
		for id := uint32(1); id <= 5; id++ {
			dues[id] = s.release(time.Now())
			r.in <- queued{id: id, due: dues[id]}
			time.Sleep(10 * time.Millisecond)
		}
		close(r.in)
		<-done
		if want := []uint32{1, 2, 4, 5}; !slices.Equal(v.ids, want) {
			t.Fatalf("accepted %v, want %v", v.ids, want)
		}
		for i, id := range v.ids {
			if !v.when[i].Equal(dues[id]) {
				t.Fatalf("packet %d accepted at +%v, due at +%v", id, v.when[i].Sub(t0), dues[id].Sub(t0))
			}
		}
		if r.accepted.Load() != 4 || r.failed.Load() != 1 || r.flushed.Load() != 0 {
			t.Fatalf("accepted %d failed %d flushed %d", r.accepted.Load(), r.failed.Load(), r.flushed.Load())
		}
		if !strings.Contains(logs.String(), "packet 3: refused") {
			t.Fatalf("failed verdict not logged: %q", logs.String())
		}
	})
}

func TestReleaserFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := &verdicts{}
		r := newReleaser(16, v.accept, log.New(io.Discard, "", 0))
		done := make(chan struct{})
		go func() { r.run(); close(done) }()
		t0 := time.Now()
		r.in <- queued{id: 1, due: t0.Add(10 * time.Millisecond)}
		for id := uint32(2); id <= 4; id++ {
			r.in <- queued{id: id, due: t0.Add(10 * time.Second)}
		}
		time.Sleep(time.Second)
		r.stop()
		r.stop()                                              // idempotent
		r.in <- queued{id: 5, due: time.Now().Add(time.Hour)} // arrives after the signal
		close(r.in)
		<-done
		if !slices.Equal(v.ids, []uint32{1, 2, 3, 4, 5}) {
			t.Fatalf("accepted %v", v.ids)
		}
		if d := v.when[0].Sub(t0); d != 10*time.Millisecond {
			t.Fatalf("packet 1 (before the signal) accepted at +%v", d)
		}
		for i := 1; i < 5; i++ {
			if d := v.when[i].Sub(t0); d != time.Second {
				t.Fatalf("packet %d accepted at +%v, want at the signal (+1s)", v.ids[i], d)
			}
		}
		if r.flushed.Load() != 4 {
			t.Fatalf("flushed %d, want 4", r.flushed.Load())
		}
	})
}

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		want  options
		usage bool
	}{
		{"full", []string{"--queue", "7", "--delay", "120ms", "--jitter", "30ms", "--maxlen", "100", "--pidfile", "/run/x.pid"},
			options{queue: 7, delay: 120 * time.Millisecond, jitter: 30 * time.Millisecond, maxlen: 100, pidfile: "/run/x.pid"}, false},
		{"defaults", []string{"-delay=1s"}, options{delay: time.Second, maxlen: 4096}, false},
		{"no delay", nil, options{}, true},
		{"negative delay", []string{"--delay", "-1ms"}, options{}, true},
		{"delay too long", []string{"--delay", "31s"}, options{}, true},
		{"jitter above delay", []string{"--delay", "10ms", "--jitter", "11ms"}, options{}, true},
		{"negative jitter", []string{"--delay", "10ms", "--jitter", "-1ms"}, options{}, true},
		{"queue out of range", []string{"--delay", "10ms", "--queue", "65536"}, options{}, true},
		{"maxlen zero", []string{"--delay", "10ms", "--maxlen", "0"}, options{}, true},
		{"not a duration", []string{"--delay", "120"}, options{}, true},
		{"unknown flag", []string{"--delay", "10ms", "--loss", "5"}, options{}, true},
		{"positional argument", []string{"--delay", "10ms", "eth0"}, options{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr strings.Builder
			got, err := parseFlags(tt.args, &stderr)
			if tt.usage {
				if !errors.Is(err, errUsage) {
					t.Fatalf("err %v, want a usage error", err)
				}
				if !strings.Contains(stderr.String(), "usage: nfdelay") && !strings.Contains(stderr.String(), "-delay") {
					t.Fatalf("no usage text: %q", stderr.String())
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}
