package gate

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func days(ds ...time.Weekday) uint8 {
	var s uint8
	for _, d := range ds {
		s |= 1 << d
	}
	return s
}

func TestParseWindow(t *testing.T) {
	for _, tc := range []struct {
		spec string
		want Window
		str  string
	}{
		{"Fri 18:00-Mon 08:00", Window{span: true, startDay: time.Friday, endDay: time.Monday, start: 18 * 60, end: 8 * 60}, "Fri 18:00-Mon 08:00"},
		{"fri 18:00 - MONDAY 8:00", Window{span: true, startDay: time.Friday, endDay: time.Monday, start: 18 * 60, end: 8 * 60}, "Fri 18:00-Mon 08:00"},
		{"Mon 08:00-Mon 10:00", Window{span: true, startDay: time.Monday, endDay: time.Monday, start: 8 * 60, end: 10 * 60}, "Mon 08:00-Mon 10:00"},
		{"Mon 10:00-Mon 08:00", Window{span: true, startDay: time.Monday, endDay: time.Monday, start: 10 * 60, end: 8 * 60}, "Mon 10:00-Mon 08:00"},
		{"Fri 18:00-Sun 24:00", Window{span: true, startDay: time.Friday, endDay: time.Sunday, start: 18 * 60, end: 24 * 60}, "Fri 18:00-Sun 24:00"},
		{"* 23:00-06:00", Window{days: allDays, start: 23 * 60, end: 6 * 60}, "* 23:00-06:00"},
		{"  *   23:00-06:00 ", Window{days: allDays, start: 23 * 60, end: 6 * 60}, "* 23:00-06:00"},
		{"Mon,Wed 22:00-23:00", Window{days: days(time.Monday, time.Wednesday), start: 22 * 60, end: 23 * 60}, "Mon,Wed 22:00-23:00"},
		{"wed, mon 22:00-23:00", Window{days: days(time.Monday, time.Wednesday), start: 22 * 60, end: 23 * 60}, "Mon,Wed 22:00-23:00"},
		{"Tue-Thu 01:00-03:00", Window{days: days(time.Tuesday, time.Wednesday, time.Thursday), start: 60, end: 180}, "Tue-Thu 01:00-03:00"},
		{"Sat-Sun 00:00-24:00", Window{days: days(time.Saturday, time.Sunday), start: 0, end: 1440}, "Sat-Sun 00:00-24:00"},
		{"Sat-Mon 00:00-24:00", Window{days: days(time.Saturday, time.Sunday, time.Monday), start: 0, end: 1440}, "Mon,Sat-Sun 00:00-24:00"},
		{"Sun-Sat 09:00-17:00", Window{days: allDays, start: 9 * 60, end: 17 * 60}, "* 09:00-17:00"},
		{"Mon,Tue,Wed,Fri 09:00-17:00", Window{days: days(time.Monday, time.Tuesday, time.Wednesday, time.Friday), start: 9 * 60, end: 17 * 60}, "Mon-Wed,Fri 09:00-17:00"},
		{"Sunday 0:05-23:59", Window{days: days(time.Sunday), start: 5, end: 23*60 + 59}, "Sun 00:05-23:59"},
	} {
		w, err := ParseWindow(tc.spec)
		if err != nil {
			t.Errorf("%q: %v", tc.spec, err)
			continue
		}
		if w != tc.want {
			t.Errorf("%q: got %+v, want %+v", tc.spec, w, tc.want)
		}
		if w.String() != tc.str {
			t.Errorf("%q: String %q, want %q", tc.spec, w.String(), tc.str)
		}
		if again, err := ParseWindow(w.String()); err != nil || again != w {
			t.Errorf("%q: String does not round-trip: %+v %v", tc.spec, again, err)
		}
	}
}

func TestParseWindowErrors(t *testing.T) {
	for _, tc := range []struct {
		spec, part string
	}{
		{"", "want \"DAYS HH:MM-HH:MM\""},
		{"23:00-06:00", "want \"DAYS HH:MM-HH:MM\""},
		{"Fri 18:00-Mon 08:00 extra", "want \"DAYS"},
		{"Fry 18:00-19:00", `unknown day "Fry"`},
		{"Mon,Fry 18:00-19:00", `unknown day "Fry"`},
		{"Mon,,Tue 18:00-19:00", "empty day in list"},
		{"Mon-Fry 18:00-19:00", `unknown day "Fry" in range`},
		{"Mon-Mon 18:00-19:00", `day range "Mon-Mon" starts and ends on the same day`},
		{"*,Mon 18:00-19:00", `unknown day "*"`},
		{"Mon 18:00", `time range "18:00"`},
		{"Mon 18:00-19:00-20:00", `bad time "19:00-20:00"`},
		{"Mon 8:0-09:00", `bad time "8:0"`},
		{"Mon 24:00-09:00", `bad time "24:00"`},
		{"Mon 09:00-24:01", `bad time "24:01"`},
		{"Mon 09:60-10:00", `bad time "09:60"`},
		{"Mon 25:00-10:00", `bad time "25:00"`},
		{"Mon +9:00-10:00", `bad time "+9:00"`},
		{"Mon 009:00-10:00", `bad time "009:00"`},
		{"Mon 12:00-12:00", "start equals end (12:00-12:00)"},
		{"* 00:00-00:00", "start equals end"},
		{"Mon 00:00-Sun 24:00", "start equals end (Mon 00:00-Sun 24:00)"},
		{"Mon 10:00-Mon 10:00", "start equals end"},
		{"* 18:00-Mon 08:00", `unknown day "*"`},
		{"Fri 18:00-Mun 08:00", `unknown day "Mun"`},
		{"Fri 18:00Mon 08:00", `"18:00Mon": want HH:MM-DAY`},
		{"Fri 18:00-Mon 8", `bad time "8"`},
		{"Fri 1800-Mon 08:00", `bad time "1800"`},
	} {
		_, err := ParseWindow(tc.spec)
		if !errors.Is(err, ErrBadWindow) {
			t.Errorf("%q: want ErrBadWindow, got %v", tc.spec, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.part) || !strings.Contains(err.Error(), `"`+tc.spec+`"`) {
			t.Errorf("%q: error %q should name the spec and %q", tc.spec, err, tc.part)
		}
	}
}

func FuzzParseWindow(f *testing.F) {
	for _, s := range []string{
		"Fri 18:00-Mon 08:00", "* 23:00-06:00", "Mon,Wed 22:00-23:00", "Tue-Thu 01:00-03:00",
		"Sat-Sun 00:00-24:00", "sunday 0:00-1:00", "Mon - Tue , Fri 9:00 - 10:00", "Mon 12:00-12:00",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		w, err := ParseWindow(spec)
		if err != nil {
			if !errors.Is(err, ErrBadWindow) {
				t.Fatalf("%q: error without ErrBadWindow: %v", spec, err)
			}
			return
		}
		again, err := ParseWindow(w.String())
		if err != nil || again != w {
			t.Fatalf("%q: String %q re-parses to %+v, %v; want %+v", spec, w.String(), again, err, w)
		}
		if w.start < 0 || w.start >= minutesPerDay || w.end < 0 || w.end > minutesPerDay {
			t.Fatalf("%q: times out of range: %+v", spec, w)
		}
	})
}
