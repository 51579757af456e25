package gate

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// SearchHorizon bounds how far ahead Check looks for the next possible
// reboot start.
const SearchHorizon = 8 * 24 * time.Hour

const horizonText = "8 days" // SearchHorizon, for reasons

// maxRebootDuration bounds the expected reboot duration a Schedule accepts.
const maxRebootDuration = 7 * 24 * time.Hour

// Schedule is the set of allow and deny windows of one node, evaluated in
// one time zone. It is immutable and safe for concurrent use.
type Schedule struct {
	allow, deny []entry
	loc         *time.Location
	dur         time.Duration
}

type entry struct {
	spec string // as configured, for reasons
	w    Window
}

// WindowVerdict says whether a reboot may start now.
type WindowVerdict struct {
	Open   bool
	Reason string // human, for logs and status
	// NextOpen is the earliest instant >= now at which a reboot could
	// start (now itself when Open); zero when there is none within
	// SearchHorizon.
	NextOpen time.Time
	// OpenUntil is, when Open, the end of the allowed time that contains
	// now; zero when closed, and zero when the allowed time lasts beyond
	// SearchHorizon plus the reboot duration (for example with no windows).
	OpenUntil time.Time
}

// NewSchedule parses the allow and deny lists. tz is "" or "Local" for the
// local zone, or an IANA name such as "Europe/Berlin". expectedRebootDuration
// (0 to 7 days) is how long a reboot keeps the node away: a reboot may start
// at t only if [t, t+expectedRebootDuration) lies entirely in allowed time.
func NewSchedule(allow, deny []string, tz string, expectedRebootDuration time.Duration) (*Schedule, error) {
	s := &Schedule{dur: expectedRebootDuration}
	switch tz {
	case "", "Local":
		s.loc = time.Local
	default:
		loc, err := time.LoadLocation(tz)
		if err != nil {
			return nil, fmt.Errorf("gate: window time zone %q: %w", tz, err)
		}
		s.loc = loc
	}
	if expectedRebootDuration < 0 || expectedRebootDuration > maxRebootDuration {
		return nil, fmt.Errorf("gate: expected reboot duration %s out of range (0 to %s)", expectedRebootDuration, maxRebootDuration)
	}
	for _, l := range []struct {
		name  string
		specs []string
		dst   *[]entry
	}{{"allow", allow, &s.allow}, {"deny", deny, &s.deny}} {
		for _, spec := range l.specs {
			w, err := ParseWindow(spec)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", l.name, err)
			}
			*l.dst = append(*l.dst, entry{spec: spec, w: w})
		}
	}
	return s, nil
}

// Location is the zone the schedule is evaluated in.
func (s *Schedule) Location() *time.Location { return s.loc }

// interval is a half-open span of real time [s, e); src indexes the entry
// it came from.
type interval struct {
	s, e time.Time
	src  int
}

// Check decides whether a reboot may start at now. Deny wins over allow; an
// empty allow list means always allowed minus deny. The work is bounded:
// windows are expanded day by day over SearchHorizon (plus the reboot
// duration) and a week of look-back.
func (s *Schedule) Check(now time.Time) WindowVerdict {
	now = now.Round(0).In(s.loc)
	searchEnd := now.Add(SearchHorizon)
	hi := searchEnd.Add(s.dur)
	y, m, d := now.Date()
	first := time.Date(y, m, d-8, 0, 0, 0, 0, time.UTC) // spans are shorter than 7 days
	hy, hm, hd := hi.Date()
	last := time.Date(hy, hm, hd+1, 0, 0, 0, 0, time.UTC)

	denyIv := expand(s.deny, first, last, s.loc)
	var base []interval
	if len(s.allow) == 0 {
		base = []interval{{s: now, e: hi}}
	} else {
		base = clip(merge(expand(s.allow, first, last, s.loc)), now, hi)
	}
	allowed := subtract(base, merge(denyIv))

	v := WindowVerdict{}
	fits := func(t, end time.Time) bool {
		return t.Before(end) && !t.Add(s.dur).After(end)
	}
	for _, a := range allowed {
		t := a.s // >= now after clipping
		if t.After(searchEnd) {
			break
		}
		if fits(t, a.e) {
			v.NextOpen = t
			break
		}
	}
	var stretch *interval // the allowed time containing now
	if len(allowed) > 0 && allowed[0].s.Equal(now) {
		stretch = &allowed[0]
	}

	if v.NextOpen.Equal(now) && !v.NextOpen.IsZero() {
		v.Open = true
		if stretch.e.Before(hi) {
			v.OpenUntil = stretch.e
		}
		switch {
		case len(s.allow) == 0 && len(s.deny) == 0:
			v.Reason = "no maintenance windows configured"
		case v.OpenUntil.IsZero():
			v.Reason = "window open for more than " + horizonText
		default:
			v.Reason = "window open until " + fmtTime(v.OpenUntil, now)
		}
		return v
	}

	var why string
	if i, end, ok := containing(denyIv, now); ok {
		why = fmt.Sprintf("window closed: deny %q until %s", s.deny[i].spec, fmtTime(end, now))
	} else if stretch != nil {
		if j, _, ok := containing(denyIv, stretch.e); ok {
			why = fmt.Sprintf("window closed: reboot of %s would run into deny %q at %s",
				fmtDuration(s.dur), s.deny[j].spec, fmtTime(stretch.e, now))
		} else {
			why = fmt.Sprintf("window closed: reboot of %s would run past the allow window end %s",
				fmtDuration(s.dur), fmtTime(stretch.e, now))
		}
	} else {
		specs := make([]string, len(s.allow))
		for i, a := range s.allow {
			specs[i] = fmt.Sprintf("%q", a.spec)
		}
		why = "window closed: outside the allow windows (" + strings.Join(specs, ", ") + ")"
	}
	if v.NextOpen.IsZero() {
		why += "; no possible start within " + horizonText
	} else {
		why += "; next possible start " + fmtTime(v.NextOpen, now)
	}
	v.Reason = why
	return v
}

// expand turns entries into concrete intervals for the civil days first..last
// (UTC-normalised dates; only their Y/M/D and weekday are used).
func expand(entries []entry, first, last time.Time, loc *time.Location) []interval {
	var out []interval
	for i, en := range entries {
		w := en.w
		for day := first; !day.After(last); day = day.AddDate(0, 0, 1) {
			wd := day.Weekday()
			var endDay time.Time
			if w.span {
				if wd != w.startDay {
					continue
				}
				k := (int(w.endDay) - int(w.startDay) + 7) % 7
				if k == 0 && w.end <= w.start {
					k = 7
				}
				endDay = day.AddDate(0, 0, k)
			} else {
				if w.days&(1<<wd) == 0 {
					continue
				}
				endDay = day
				if w.end < w.start {
					endDay = day.AddDate(0, 0, 1)
				}
			}
			st := wallBoundary(day, w.start, loc)
			et := wallBoundary(endDay, w.end, loc)
			if et.After(st) { // a window inside a DST gap is empty that day
				out = append(out, interval{s: st, e: et, src: i})
			}
		}
	}
	return out
}

// wallBoundary is the first instant at which a clock in loc shows the civil
// date of day, min minutes after midnight, or later (min may be 1440). See
// the package documentation for what this means around DST transitions.
func wallBoundary(day time.Time, min int, loc *time.Location) time.Time {
	y, m, d := day.Date()
	naive := time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Add(time.Duration(min) * time.Minute).Unix()
	var offs [3]int
	for i, probe := range [3]int64{naive - 30*3600, naive, naive + 30*3600} {
		_, offs[i] = time.Unix(probe, 0).In(loc).Zone()
	}
	var best time.Time
	for _, o := range offs { // instants showing exactly the wall time
		t := time.Unix(naive-int64(o), 0).In(loc)
		if _, off := t.Zone(); off == o && (best.IsZero() || t.Before(best)) {
			best = t
		}
	}
	if !best.IsZero() {
		return best
	}
	for _, o := range offs { // a gap: the first instant after it
		t := time.Unix(naive-int64(o), 0).In(loc)
		if _, off := t.Zone(); t.Unix()+int64(off) > naive {
			if start, _ := t.ZoneBounds(); !start.IsZero() && (best.IsZero() || start.Before(best)) {
				best = start
			}
		}
	}
	if best.IsZero() { // not reachable with real zone data; stay deterministic
		best = time.Date(y, m, d, 0, min, 0, 0, loc)
	}
	return best
}

// merge sorts and unites overlapping or touching intervals.
func merge(iv []interval) []interval {
	if len(iv) == 0 {
		return nil
	}
	iv = slices.Clone(iv)
	slices.SortFunc(iv, func(a, b interval) int { return a.s.Compare(b.s) })
	out := []interval{iv[0]}
	for _, x := range iv[1:] {
		last := &out[len(out)-1]
		if !x.s.After(last.e) {
			if x.e.After(last.e) {
				last.e = x.e
			}
			continue
		}
		out = append(out, x)
	}
	return out
}

// clip restricts sorted intervals to [lo, hi).
func clip(iv []interval, lo, hi time.Time) []interval {
	var out []interval
	for _, x := range iv {
		if x.s.Before(lo) {
			x.s = lo
		}
		if x.e.After(hi) {
			x.e = hi
		}
		if x.s.Before(x.e) {
			out = append(out, x)
		}
	}
	return out
}

// subtract removes the sorted, merged intervals cut from the sorted, merged
// intervals base.
func subtract(base, cut []interval) []interval {
	var out []interval
	for _, b := range base {
		s := b.s
		for _, c := range cut {
			if !c.e.After(s) || !c.s.Before(b.e) {
				continue
			}
			if c.s.After(s) {
				out = append(out, interval{s: s, e: c.s})
			}
			if c.e.After(s) {
				s = c.e
			}
		}
		if s.Before(b.e) {
			out = append(out, interval{s: s, e: b.e})
		}
	}
	return out
}

// containing returns the entry index and the end of the interval containing
// t that ends last.
func containing(iv []interval, t time.Time) (int, time.Time, bool) {
	idx, found := -1, false
	var end time.Time
	for _, x := range iv {
		if !x.s.After(t) && t.Before(x.e) && (!found || x.e.After(end)) {
			idx, end, found = x.src, x.e, true
		}
	}
	return idx, end, found
}

// fmtTime renders an instant for reasons: "Mon 08:00 CET", with the date
// when it is six days or more after now.
func fmtTime(t, now time.Time) string {
	if t.Sub(now) >= 6*24*time.Hour {
		return t.Format("Mon 2006-01-02 15:04 MST")
	}
	return t.Format("Mon 15:04 MST")
}

// fmtDuration renders "10m" rather than "10m0s".
func fmtDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
