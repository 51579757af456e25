package gate

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the DST tests must not depend on the host's zoneinfo
)

func mustSchedule(t *testing.T, allow, deny []string, tz string, d time.Duration) *Schedule {
	t.Helper()
	s, err := NewSchedule(allow, deny, tz, d)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// utc builds a time on the reference week: 2026-06-01 is a Monday.
func utc(day, hh, mm int) time.Time {
	return time.Date(2026, 6, day, hh, mm, 0, 0, time.UTC)
}

func TestReferenceWeek(t *testing.T) {
	if utc(1, 0, 0).Weekday() != time.Monday {
		t.Fatal("2026-06-01 must be a Monday for these tests")
	}
}

type check struct {
	name      string
	now       time.Time
	open      bool
	reason    string    // substring
	nextOpen  time.Time // zero: expect zero
	openUntil time.Time // zero: expect zero
}

func runChecks(t *testing.T, s *Schedule, cases []check) {
	t.Helper()
	for _, c := range cases {
		v := s.Check(c.now)
		if v.Open != c.open {
			t.Errorf("%s: Open %v, want %v (%s)", c.name, v.Open, c.open, v.Reason)
		}
		if !strings.Contains(v.Reason, c.reason) {
			t.Errorf("%s: reason %q does not contain %q", c.name, v.Reason, c.reason)
		}
		if !v.NextOpen.Equal(c.nextOpen) {
			t.Errorf("%s: NextOpen %v, want %v", c.name, v.NextOpen.UTC(), c.nextOpen.UTC())
		}
		if !v.OpenUntil.Equal(c.openUntil) {
			t.Errorf("%s: OpenUntil %v, want %v", c.name, v.OpenUntil.UTC(), c.openUntil.UTC())
		}
		if c.open && !v.NextOpen.Equal(c.now) {
			t.Errorf("%s: open but NextOpen %v != now", c.name, v.NextOpen)
		}
	}
}

func TestScheduleNoWindows(t *testing.T) {
	s := mustSchedule(t, nil, nil, "UTC", 10*time.Minute)
	now := utc(3, 12, 34)
	runChecks(t, s, []check{{"always", now, true, "no maintenance windows configured", now, time.Time{}}})
}

func TestScheduleAllowDaily(t *testing.T) {
	s := mustSchedule(t, []string{"Tue 22:00-23:00"}, nil, "UTC", 10*time.Minute)
	runChecks(t, s, []check{
		{"at start", utc(2, 22, 0), true, "window open until Tue 23:00 UTC", utc(2, 22, 0), utc(2, 23, 0)},
		{"last fitting start", utc(2, 22, 50), true, "until Tue 23:00 UTC", utc(2, 22, 50), utc(2, 23, 0)},
		{"would run past end", utc(2, 22, 51), false,
			"window closed: reboot of 10m would run past the allow window end Tue 23:00 UTC; next possible start Tue 2026-06-09 22:00 UTC",
			utc(9, 22, 0), time.Time{}},
		{"before", utc(2, 21, 0), false, `window closed: outside the allow windows ("Tue 22:00-23:00"); next possible start Tue 22:00 UTC`, utc(2, 22, 0), time.Time{}},
		{"at end (half-open)", utc(2, 23, 0), false, "outside the allow windows", utc(9, 22, 0), time.Time{}},
		{"other day", utc(4, 22, 30), false, "outside", utc(9, 22, 0), time.Time{}},
	})
}

func TestScheduleDenyAcrossWeekend(t *testing.T) {
	s := mustSchedule(t, nil, []string{"Fri 18:00-Mon 08:00"}, "UTC", 10*time.Minute)
	runChecks(t, s, []check{
		{"saturday", utc(6, 12, 0), false, `window closed: deny "Fri 18:00-Mon 08:00" until Mon 08:00 UTC; next possible start Mon 08:00 UTC`, utc(8, 8, 0), time.Time{}},
		{"sunday late", utc(7, 23, 59), false, `deny "Fri 18:00-Mon 08:00" until Mon 08:00 UTC`, utc(8, 8, 0), time.Time{}},
		{"monday early (week wrap)", utc(1, 7, 59), false, "until Mon 08:00 UTC", utc(1, 8, 0), time.Time{}},
		{"monday at end", utc(1, 8, 0), true, "window open until Fri 18:00 UTC", utc(1, 8, 0), utc(5, 18, 0)},
		{"friday just before, fits", utc(5, 17, 50), true, "until Fri 18:00", utc(5, 17, 50), utc(5, 18, 0)},
		{"friday just before, runs into deny", utc(5, 17, 55), false,
			`window closed: reboot of 10m would run into deny "Fri 18:00-Mon 08:00" at Fri 18:00 UTC; next possible start Mon 08:00 UTC`,
			utc(8, 8, 0), time.Time{}},
	})
}

func TestScheduleDenyWins(t *testing.T) {
	s := mustSchedule(t, []string{"* 00:00-24:00"}, []string{"Wed 10:00-11:00", "* 23:00-06:00"}, "UTC", 10*time.Minute)
	runChecks(t, s, []check{
		{"inside deny", utc(3, 10, 30), false, `deny "Wed 10:00-11:00" until Wed 11:00 UTC`, utc(3, 11, 0), time.Time{}},
		{"runs into deny", utc(3, 9, 55), false, `would run into deny "Wed 10:00-11:00" at Wed 10:00 UTC`, utc(3, 11, 0), time.Time{}},
		{"after deny", utc(3, 11, 0), true, "until Wed 23:00", utc(3, 11, 0), utc(3, 23, 0)},
		{"nightly deny, wraps midnight", utc(4, 2, 0), false, `deny "* 23:00-06:00" until Thu 06:00 UTC`, utc(4, 6, 0), time.Time{}},
	})
}

func TestScheduleWrapMidnightAllow(t *testing.T) {
	s := mustSchedule(t, []string{"* 23:00-06:00"}, nil, "UTC", 0)
	runChecks(t, s, []check{
		{"after midnight", utc(3, 2, 0), true, "until Wed 06:00", utc(3, 2, 0), utc(3, 6, 0)},
		{"before midnight", utc(3, 23, 30), true, "until Thu 06:00", utc(3, 23, 30), utc(4, 6, 0)},
		{"daytime", utc(3, 12, 0), false, "outside", utc(3, 23, 0), time.Time{}},
		{"zero duration at last minute", utc(3, 5, 59), true, "", utc(3, 5, 59), utc(3, 6, 0)},
	})
}

func TestScheduleListedDaysEndNextDay(t *testing.T) {
	// "Mon,Wed 22:00-02:00": starts on the listed day, ends the next day.
	s := mustSchedule(t, []string{"Mon,Wed 22:00-02:00"}, nil, "UTC", 0)
	runChecks(t, s, []check{
		{"tuesday 01:00 belongs to monday", utc(2, 1, 0), true, "until Tue 02:00", utc(2, 1, 0), utc(2, 2, 0)},
		{"wednesday 01:00 (tuesday not listed)", utc(3, 1, 0), false, "outside", utc(3, 22, 0), time.Time{}},
		{"thursday 01:00", utc(4, 1, 0), true, "until Thu 02:00", utc(4, 1, 0), utc(4, 2, 0)},
		{"monday 01:00 (sunday not listed)", utc(1, 1, 0), false, "outside", utc(1, 22, 0), time.Time{}},
	})
}

func TestScheduleDayRangeAndWholeDays(t *testing.T) {
	s := mustSchedule(t, []string{"Tue-Thu 01:00-03:00", "Sat-Sun 00:00-24:00"}, nil, "UTC", 10*time.Minute)
	runChecks(t, s, []check{
		{"wednesday", utc(3, 2, 0), true, "until Wed 03:00", utc(3, 2, 0), utc(3, 3, 0)},
		{"friday", utc(5, 2, 0), false, "outside", utc(6, 0, 0), time.Time{}},
		{"saturday late: merges into sunday", utc(6, 23, 55), true, "until Mon 00:00", utc(6, 23, 55), utc(8, 0, 0)},
		{"sunday last fit", utc(7, 23, 50), true, "", utc(7, 23, 50), utc(8, 0, 0)},
		{"sunday too late", utc(7, 23, 51), false, "would run past the allow window end Mon 00:00 UTC", utc(9, 1, 0), time.Time{}},
	})
}

func TestScheduleAdjacentAllowWindowsMerge(t *testing.T) {
	s := mustSchedule(t, []string{"Mon 22:00-23:00", "Mon 23:00-Tue 01:00"}, nil, "UTC", 30*time.Minute)
	runChecks(t, s, []check{
		{"spans both", utc(1, 22, 50), true, "until Tue 01:00", utc(1, 22, 50), utc(2, 1, 0)},
	})
}

func TestScheduleNeverFits(t *testing.T) {
	s := mustSchedule(t, []string{"Mon 10:00-10:05"}, nil, "UTC", 10*time.Minute)
	runChecks(t, s, []check{
		{"too short", utc(1, 10, 0), false, "would run past the allow window end Mon 10:05 UTC; no possible start within 8 days", time.Time{}, time.Time{}},
	})
	all := mustSchedule(t, nil, []string{"* 00:00-24:00"}, "UTC", 0)
	runChecks(t, all, []check{
		{"deny always", utc(3, 12, 0), false, "no possible start within 8 days", time.Time{}, time.Time{}},
	})
}

func TestScheduleOpenBeyondHorizon(t *testing.T) {
	s := mustSchedule(t, []string{"* 00:00-24:00"}, nil, "UTC", time.Hour)
	runChecks(t, s, []check{{"always", utc(3, 12, 0), true, "window open for more than 8 days", utc(3, 12, 0), time.Time{}}})
}

func TestScheduleTimeZone(t *testing.T) {
	ny := mustSchedule(t, []string{"* 22:00-23:00"}, nil, "America/New_York", 0)
	u := mustSchedule(t, []string{"* 22:00-23:00"}, nil, "UTC", 0)
	now := utc(2, 2, 30) // Mon 22:30 EDT
	runChecks(t, ny, []check{{"new york evening", now, true, "until Mon 23:00 EDT", now, utc(2, 3, 0)}})
	runChecks(t, u, []check{{"same instant in UTC", now, false, "outside", utc(2, 22, 0), time.Time{}}})
	if v := ny.Check(now); v.OpenUntil.Location() != ny.Location() {
		t.Errorf("times must be in the schedule's zone, got %v", v.OpenUntil.Location())
	}
	for _, tz := range []string{"", "Local"} {
		if s := mustSchedule(t, nil, nil, tz, 0); s.Location() != time.Local {
			t.Errorf("%q: want time.Local", tz)
		}
	}
}

func TestNewScheduleErrors(t *testing.T) {
	for _, tc := range []struct {
		allow, deny []string
		tz          string
		d           time.Duration
		want        string
	}{
		{nil, nil, "Mars/Olympus_Mons", 0, `time zone "Mars/Olympus_Mons"`},
		{[]string{"Mon 10:00-11:00", "Fry 10:00-11:00"}, nil, "UTC", 0, `allow: gate: bad window "Fry 10:00-11:00": unknown day "Fry"`},
		{nil, []string{"* 10:00-10:00"}, "UTC", 0, `deny: gate: bad window "* 10:00-10:00": start equals end`},
		{nil, nil, "UTC", -time.Second, "out of range"},
		{nil, nil, "UTC", 8 * 24 * time.Hour, "out of range"},
	} {
		_, err := NewSchedule(tc.allow, tc.deny, tc.tz, tc.d)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want error containing %q, got %v", tc.want, err)
		}
	}
}

// DST: a boundary is the first instant the wall clock shows HH:MM or later
// on that date (see doc.go).
func TestScheduleDST(t *testing.T) {
	z := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	type dstCase struct {
		tz, allow string
		d         time.Duration
		checks    []check
	}
	for _, tc := range []dstCase{
		// Berlin spring forward 2026-03-29 01:00Z: 02:00 CET -> 03:00 CEST.
		{"Europe/Berlin", "* 02:30-03:30", 0, []check{
			{"berlin spring: before", z("2026-03-29T00:30:00Z"), false, "next possible start Sun 03:00 CEST", z("2026-03-29T01:00:00Z"), time.Time{}},
			{"berlin spring: shrunk window", z("2026-03-29T01:10:00Z"), true, "until Sun 03:30 CEST", z("2026-03-29T01:10:00Z"), z("2026-03-29T01:30:00Z")},
			{"berlin spring: next day normal", z("2026-03-29T02:00:00Z"), false, "", z("2026-03-30T00:30:00Z"), time.Time{}},
		}},
		{"Europe/Berlin", "* 02:00-02:30", 0, []check{
			{"berlin spring: window inside gap is empty", z("2026-03-29T00:30:00Z"), false, "", z("2026-03-30T00:00:00Z"), time.Time{}},
		}},
		{"Europe/Berlin", "* 01:00-03:00", 0, []check{
			{"berlin spring: covers gap, 1h real", z("2026-03-29T00:59:00Z"), true, "until Sun 03:00 CEST", z("2026-03-29T00:59:00Z"), z("2026-03-29T01:00:00Z")},
		}},
		{"Europe/Berlin", "Sat 22:00-Sun 06:00", 7 * time.Hour, []check{
			{"berlin spring: 8 wall hours are 7 real", z("2026-03-28T21:00:00Z"), true, "until Sun 06:00 CEST", z("2026-03-28T21:00:00Z"), z("2026-03-29T04:00:00Z")},
		}},
		// Berlin fall back 2026-10-25 01:00Z: 03:00 CEST -> 02:00 CET.
		{"Europe/Berlin", "* 02:30-03:30", 0, []check{
			{"berlin fall: before", z("2026-10-25T00:29:00Z"), false, "next possible start Sun 02:30 CEST", z("2026-10-25T00:30:00Z"), time.Time{}},
			{"berlin fall: repeated hour inside", z("2026-10-25T01:15:00Z"), true, "until Sun 03:30 CET", z("2026-10-25T01:15:00Z"), z("2026-10-25T02:30:00Z")},
		}},
		{"Europe/Berlin", "* 01:00-02:30", 0, []check{
			{"berlin fall: ends at first 02:30", z("2026-10-25T00:15:00Z"), true, "until Sun 02:30 CEST", z("2026-10-25T00:15:00Z"), z("2026-10-25T00:30:00Z")},
			{"berlin fall: second 02:15 outside", z("2026-10-25T01:15:00Z"), false, "", z("2026-10-26T00:00:00Z"), time.Time{}},
		}},
		{"Europe/Berlin", "* 02:00-03:00", 90 * time.Minute, []check{
			{"berlin fall: 1 wall hour is 2 real", z("2026-10-25T00:00:00Z"), true, "", z("2026-10-25T00:00:00Z"), z("2026-10-25T02:00:00Z")},
			{"berlin fall: 90m never fits one normal hour", z("2026-10-26T01:00:00Z"), false,
				"would run past the allow window end Mon 03:00 CET; no possible start within 8 days", time.Time{}, time.Time{}},
		}},
		// New York spring forward 2026-03-08 07:00Z: 02:00 EST -> 03:00 EDT.
		{"America/New_York", "* 02:30-03:30", 0, []check{
			{"new york spring: before", z("2026-03-08T06:59:00Z"), false, "next possible start Sun 03:00 EDT", z("2026-03-08T07:00:00Z"), time.Time{}},
			{"new york spring: shrunk", z("2026-03-08T07:29:00Z"), true, "until Sun 03:30 EDT", z("2026-03-08T07:29:00Z"), z("2026-03-08T07:30:00Z")},
		}},
		// New York fall back 2026-11-01 06:00Z: 02:00 EDT -> 01:00 EST.
		{"America/New_York", "* 01:30-02:00", 0, []check{
			{"new york fall: first 01:30 to 02:00 EST", z("2026-11-01T06:15:00Z"), true, "until Sun 02:00 EST", z("2026-11-01T06:15:00Z"), z("2026-11-01T07:00:00Z")},
		}},
		{"America/New_York", "* 01:00-01:30", 0, []check{
			{"new york fall: only the first 01:00-01:30", z("2026-11-01T05:10:00Z"), true, "until Sun 01:30 EDT", z("2026-11-01T05:10:00Z"), z("2026-11-01T05:30:00Z")},
			{"new york fall: second occurrence outside", z("2026-11-01T06:10:00Z"), false, "", z("2026-11-02T06:00:00Z"), time.Time{}},
		}},
	} {
		runChecks(t, mustSchedule(t, []string{tc.allow}, nil, tc.tz, tc.d), tc.checks)
	}
}

func TestWallBoundaryConsistent(t *testing.T) {
	// 24:00 of one day is 00:00 of the next, in every zone tested.
	for _, tz := range []string{"UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata"} {
		loc, err := time.LoadLocation(tz)
		if err != nil {
			t.Fatal(err)
		}
		for d := 0; d < 400; d++ {
			day := time.Date(2026, 1, 1+d, 0, 0, 0, 0, time.UTC)
			a := wallBoundary(day, 1440, loc)
			b := wallBoundary(day.AddDate(0, 0, 1), 0, loc)
			if !a.Equal(b) {
				t.Fatalf("%s %s: 24:00 %v != next 00:00 %v", tz, day.Format("2006-01-02"), a, b)
			}
			for _, m := range []int{0, 90, 150, 630, 1439} {
				w := wallBoundary(day, m, loc)
				got := w.Hour()*60 + w.Minute()
				y, mo, dd := w.Date()
				if y != day.Year() || mo != day.Month() || dd != day.Day() || got < m {
					// only allowed inside a gap: the clock jumped past m
					prev := w.Add(-time.Second)
					ph := prev.Hour()*60 + prev.Minute()
					if !(got > m && ph < m) {
						t.Fatalf("%s %s %d: boundary %v shows an earlier time", tz, day.Format("2006-01-02"), m, w)
					}
				}
			}
		}
	}
}

// bruteForce evaluates windows in UTC minute by minute, independently of
// Schedule's interval arithmetic.
type bruteForce struct {
	allowSet bool
	allow    [7 * minutesPerDay]bool
	deny     [7 * minutesPerDay]bool
}

func (b *bruteForce) mark(set *[7 * minutesPerDay]bool, w Window) {
	const week = 7 * minutesPerDay
	fill := func(from, length int) {
		for i := 0; i < length; i++ {
			set[(from+i)%week] = true
		}
	}
	if w.span {
		from := mondayIndex(w.startDay)*minutesPerDay + w.start
		to := mondayIndex(w.endDay)*minutesPerDay + w.end
		fill(from, ((to-from)%week+week)%week)
		return
	}
	for d := time.Sunday; d <= time.Saturday; d++ {
		if w.days&(1<<d) == 0 {
			continue
		}
		from := mondayIndex(d)*minutesPerDay + w.start
		length := w.end - w.start
		if length < 0 {
			length += minutesPerDay
		}
		fill(from, length)
	}
}

func (b *bruteForce) ok(t time.Time) bool {
	m := mondayIndex(t.Weekday())*minutesPerDay + t.Hour()*60 + t.Minute()
	return (!b.allowSet || b.allow[m]) && !b.deny[m]
}

func FuzzScheduleMatchesBruteForce(f *testing.F) {
	f.Add(uint64(1), uint32(0), uint8(10))
	f.Add(uint64(42), uint32(5000), uint8(0))
	f.Add(uint64(7), uint32(9999), uint8(200))
	f.Fuzz(func(t *testing.T, seed uint64, nowMin uint32, durMin uint8) {
		rng := rand.New(rand.NewPCG(seed, seed>>7))
		var bf bruteForce
		gen := func() string {
			start, end := rng.IntN(minutesPerDay), rng.IntN(minutesPerDay+1)
			if rng.IntN(4) == 0 {
				end = (start + 1 + rng.IntN(90)) % minutesPerDay
			}
			if rng.IntN(3) == 0 {
				return fmt.Sprintf("%s %s-%s %s", dayAbbr(time.Weekday(rng.IntN(7))), clock(start),
					dayAbbr(time.Weekday(rng.IntN(7))), clock(end))
			}
			return daysString(uint8(1+rng.IntN(allDays))) + " " + clock(start) + "-" + clock(end)
		}
		var allow, deny []string
		for range rng.IntN(3) {
			s := gen()
			if w, err := ParseWindow(s); err == nil { // start == end is skipped
				allow = append(allow, s)
				bf.allowSet = true
				bf.mark(&bf.allow, w)
			}
		}
		for range rng.IntN(3) {
			s := gen()
			if w, err := ParseWindow(s); err == nil {
				deny = append(deny, s)
				bf.mark(&bf.deny, w)
			}
		}
		dur := time.Duration(durMin) * time.Minute
		s, err := NewSchedule(allow, deny, "UTC", dur)
		if err != nil {
			t.Fatal(err)
		}
		now := utc(1, 0, 0).Add(time.Duration(nowMin%(14*minutesPerDay)) * time.Minute)
		v := s.Check(now)

		fits := func(t0 time.Time) bool {
			if !bf.ok(t0) {
				return false
			}
			for m := time.Minute; m < dur; m += time.Minute {
				if !bf.ok(t0.Add(m)) {
					return false
				}
			}
			return true
		}
		var want time.Time
		for t0 := now; !t0.After(now.Add(SearchHorizon)); t0 = t0.Add(time.Minute) {
			if fits(t0) {
				want = t0
				break
			}
		}
		if !v.NextOpen.Equal(want) {
			t.Fatalf("allow %q deny %q dur %s now %s: NextOpen %v, brute force %v (%s)", allow, deny, dur, now, v.NextOpen, want, v.Reason)
		}
		if v.Open != want.Equal(now) {
			t.Fatalf("allow %q deny %q dur %s now %s: Open %v (%s)", allow, deny, dur, now, v.Open, v.Reason)
		}
		if v.Open {
			var until time.Time
			for t0 := now; t0.Before(now.Add(SearchHorizon + dur)); t0 = t0.Add(time.Minute) {
				if !bf.ok(t0) {
					until = t0
					break
				}
			}
			if !v.OpenUntil.Equal(until) {
				t.Fatalf("allow %q deny %q now %s: OpenUntil %v, brute force %v", allow, deny, now, v.OpenUntil, until)
			}
		}
	})
}
