package detect

import "strings"

// CompareVersions compares two version or kernel release strings the way
// rpmvercmp does, which also orders Debian and Ubuntu kernel releases
// correctly. It returns -1 if a < b, 0 if they are equal, +1 if a > b.
//
// Both strings are split into runs of digits and runs of ASCII letters;
// everything else separates. Runs are compared pairwise: numbers
// numerically (leading zeros ignored), letters by byte order, a number is
// newer than letters. '~' sorts before anything, even the end of the string
// ("1.0~rc1" < "1.0"); '^' sorts after the end but before any other
// continuation ("1.0" < "1.0^git1" < "1.0.1"). When all runs are equal the
// string with runs left over is newer.
//
// Examples: "6.1.0-9" < "6.1.0-10"; "6.1.0-18-amd64" < "6.1.0-21-amd64";
// "5.14.0-362.8.1.el9_3.x86_64" < "5.14.0-427.13.1.el9_4.x86_64".
func CompareVersions(a, b string) int {
	if a == b {
		return 0
	}
	for {
		a = trimSeparators(a)
		b = trimSeparators(b)
		if strings.HasPrefix(a, "~") || strings.HasPrefix(b, "~") {
			if !strings.HasPrefix(a, "~") {
				return 1
			}
			if !strings.HasPrefix(b, "~") {
				return -1
			}
			a, b = a[1:], b[1:]
			continue
		}
		if strings.HasPrefix(a, "^") || strings.HasPrefix(b, "^") {
			switch {
			case a == "":
				return -1
			case b == "":
				return 1
			case !strings.HasPrefix(a, "^"):
				return 1
			case !strings.HasPrefix(b, "^"):
				return -1
			}
			a, b = a[1:], b[1:]
			continue
		}
		if a == "" || b == "" {
			break
		}
		var sa, sb string
		if isDigit(a[0]) {
			sa, a = span(a, isDigit)
			sb, b = span(b, isDigit)
			if sb == "" {
				return 1 // a number is newer than letters
			}
			if c := compareNumeric(sa, sb); c != 0 {
				return c
			}
			continue
		}
		sa, a = span(a, isAlpha)
		sb, b = span(b, isAlpha)
		if sb == "" {
			return -1 // letters are older than a number
		}
		if c := strings.Compare(sa, sb); c != 0 {
			return c
		}
	}
	switch {
	case a == "" && b == "":
		return 0
	case a == "":
		return -1
	}
	return 1
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
func isAlpha(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

func trimSeparators(s string) string {
	i := 0
	for i < len(s) && !isDigit(s[i]) && !isAlpha(s[i]) && s[i] != '~' && s[i] != '^' {
		i++
	}
	return s[i:]
}

// span splits s after the longest prefix whose bytes satisfy f.
func span(s string, f func(byte) bool) (string, string) {
	i := 0
	for i < len(s) && f(s[i]) {
		i++
	}
	return s[:i], s[i:]
}

func compareNumeric(a, b string) int {
	a = strings.TrimLeft(a, "0")
	b = strings.TrimLeft(b, "0")
	if len(a) != len(b) {
		if len(a) < len(b) {
			return -1
		}
		return 1
	}
	return strings.Compare(a, b)
}
