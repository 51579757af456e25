package gate

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// ErrBadWindow is wrapped by every window syntax error.
var ErrBadWindow = errors.New("gate: bad window")

const (
	minutesPerDay = 24 * 60
	allDays       = 1<<7 - 1
)

// Window is one parsed allow or deny entry. The zero Window is not valid;
// get one from ParseWindow. Windows are comparable: two specs that mean the
// same thing ("sat-sun 0:00-24:00", "Sat-Sun 00:00-24:00") parse to equal
// values, and String returns the canonical spelling.
type Window struct {
	span     bool         // "DAY HH:MM-DAY HH:MM" form
	days     uint8        // daily form: bit i set = time.Weekday(i) listed
	startDay time.Weekday // span form
	endDay   time.Weekday // span form
	start    int          // minutes after midnight, 0..1439
	end      int          // minutes after midnight, 0..1440
}

var separatorSpace = regexp.MustCompile(`\s*([-,])\s*`)

// ParseWindow parses one window entry:
//
//	"Fri 18:00-Mon 08:00"  from a day and time to the next occurrence of another
//	"* 23:00-06:00"        every day; end < start ends on the next day
//	"Mon,Wed 22:00-23:00"  listed days
//	"Tue-Thu 01:00-03:00"  a range of days, the times apply on each of them
//	"Sat-Sun 00:00-24:00"  whole days (24:00 is only valid as an end)
//
// Day names are Mon..Sun or Monday..Sunday in any case. Spaces around "-"
// and "," are ignored. The error wraps ErrBadWindow and names the offending
// part. See the package documentation for the exact semantics.
func ParseWindow(spec string) (Window, error) {
	bad := func(format string, args ...any) (Window, error) {
		return Window{}, fmt.Errorf("%w %q: %s", ErrBadWindow, spec, fmt.Sprintf(format, args...))
	}
	fields := strings.Fields(separatorSpace.ReplaceAllString(strings.TrimSpace(spec), "$1"))
	switch len(fields) {
	case 2: // DAYS HH:MM-HH:MM
		days, err := parseDays(fields[0])
		if err != nil {
			return bad("%v", err)
		}
		from, to, ok := strings.Cut(fields[1], "-")
		if !ok {
			return bad("time range %q: want HH:MM-HH:MM", fields[1])
		}
		start, err := parseClock(from, false)
		if err != nil {
			return bad("%v", err)
		}
		end, err := parseClock(to, true)
		if err != nil {
			return bad("%v", err)
		}
		if start == end {
			return bad("start equals end (%s-%s): the window would be empty or ambiguous; write \"* 00:00-24:00\" for always", from, to)
		}
		return Window{days: days, start: start, end: end}, nil
	case 3: // DAY HH:MM-DAY HH:MM
		startDay, ok := parseDay(fields[0])
		if !ok {
			return bad("unknown day %q (want one day name, Mon..Sun, in the form DAY HH:MM-DAY HH:MM)", fields[0])
		}
		from, endDayName, ok := strings.Cut(fields[1], "-")
		if !ok {
			return bad("%q: want HH:MM-DAY", fields[1])
		}
		start, err := parseClock(from, false)
		if err != nil {
			return bad("%v", err)
		}
		endDay, ok := parseDay(endDayName)
		if !ok {
			return bad("unknown day %q (want one day name, Mon..Sun)", endDayName)
		}
		end, err := parseClock(fields[2], true)
		if err != nil {
			return bad("%v", err)
		}
		w := Window{span: true, startDay: startDay, endDay: endDay, start: start, end: end}
		if weekMinute(startDay, start) == weekMinute(endDay, end) {
			return bad("start equals end (%s %s-%s %s): the window would be empty or ambiguous; write \"* 00:00-24:00\" for always",
				fields[0], from, endDayName, fields[2])
		}
		return w, nil
	default:
		return bad("want \"DAYS HH:MM-HH:MM\" (DAYS like *, Mon,Wed or Tue-Thu) or \"DAY HH:MM-DAY HH:MM\"")
	}
}

// String returns the canonical spelling, which ParseWindow maps back to an
// equal Window.
func (w Window) String() string {
	if w.span {
		return fmt.Sprintf("%s %s-%s %s", dayAbbr(w.startDay), clock(w.start), dayAbbr(w.endDay), clock(w.end))
	}
	return daysString(w.days) + " " + clock(w.start) + "-" + clock(w.end)
}

// weekMinute is the minute of the week (Monday 00:00 = 0), with 24:00 taken
// as the next day's 00:00.
func weekMinute(d time.Weekday, min int) int {
	return (mondayIndex(d)*minutesPerDay + min) % (7 * minutesPerDay)
}

var dayNames = map[string]time.Weekday{
	"mon": time.Monday, "tue": time.Tuesday, "wed": time.Wednesday, "thu": time.Thursday,
	"fri": time.Friday, "sat": time.Saturday, "sun": time.Sunday,
	"monday": time.Monday, "tuesday": time.Tuesday, "wednesday": time.Wednesday,
	"thursday": time.Thursday, "friday": time.Friday, "saturday": time.Saturday, "sunday": time.Sunday,
}

func parseDay(s string) (time.Weekday, bool) {
	d, ok := dayNames[strings.ToLower(s)]
	return d, ok
}

// parseDays parses "*" or a comma-separated list of days and day ranges
// into a bit set indexed by time.Weekday.
func parseDays(s string) (uint8, error) {
	if s == "*" {
		return allDays, nil
	}
	var set uint8
	for item := range strings.SplitSeq(s, ",") {
		if item == "" {
			return 0, fmt.Errorf("empty day in list %q", s)
		}
		from, to, isRange := strings.Cut(item, "-")
		a, ok := parseDay(from)
		if !ok {
			return 0, fmt.Errorf("unknown day %q (want Mon..Sun, a range like Tue-Thu, or *)", from)
		}
		if !isRange {
			set |= 1 << a
			continue
		}
		b, ok := parseDay(to)
		if !ok {
			return 0, fmt.Errorf("unknown day %q in range %q (want Mon..Sun)", to, item)
		}
		if a == b {
			return 0, fmt.Errorf("day range %q starts and ends on the same day", item)
		}
		for d := a; ; d = (d + 1) % 7 {
			set |= 1 << d
			if d == b {
				break
			}
		}
	}
	return set, nil
}

// parseClock parses H:MM or HH:MM; 24:00 only when asEnd.
func parseClock(s string, asEnd bool) (int, error) {
	bad := fmt.Errorf("bad time %q (want HH:MM from 00:00 to 23:59, or 24:00 as an end)", s)
	h, m, ok := strings.Cut(s, ":")
	if !ok || len(h) < 1 || len(h) > 2 || len(m) != 2 || !digits(h) || !digits(m) {
		return 0, bad
	}
	hh := int(h[0] - '0')
	if len(h) == 2 {
		hh = hh*10 + int(h[1]-'0')
	}
	mm := int(m[0]-'0')*10 + int(m[1]-'0')
	switch {
	case mm > 59:
		return 0, bad
	case hh == 24 && mm == 0 && asEnd:
		return minutesPerDay, nil
	case hh > 23:
		return 0, bad
	}
	return hh*60 + mm, nil
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func clock(min int) string { return fmt.Sprintf("%02d:%02d", min/60, min%60) }

// mondayIndex maps Monday..Sunday to 0..6.
func mondayIndex(d time.Weekday) int { return (int(d) + 6) % 7 }

func dayAbbr(d time.Weekday) string { return d.String()[:3] }

// daysString renders a day set as "*" or contiguous runs in Monday-first
// order: "Mon,Wed-Fri".
func daysString(set uint8) string {
	if set == allDays {
		return "*"
	}
	var parts []string
	for i := 0; i < 7; {
		d := time.Weekday((i + 1) % 7)
		if set&(1<<d) == 0 {
			i++
			continue
		}
		j := i
		for j+1 < 7 && set&(1<<((j+2)%7)) != 0 {
			j++
		}
		if j == i {
			parts = append(parts, dayAbbr(d))
		} else {
			parts = append(parts, dayAbbr(d)+"-"+dayAbbr(time.Weekday((j+1)%7)))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}
