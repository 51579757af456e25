package config

import (
	"strconv"
	"strings"
)

// BurntSushi/toml v1.6.0 records the position of every key while parsing
// (MetaData.keyInfo) but exports none of it: positions only surface inside a
// ParseError, and for keys of an array of tables they lack the element
// index. keyLines therefore finds the line of each key with a small scanner
// that understands [table] and [[array]] headers, dotted and quoted keys,
// inline tables, (multi-line) arrays and (multi-line) strings. It only runs
// on text the TOML parser accepted (for keyAtLine: the text before the line
// of a syntax error), and it gives up (keeping what it found) at anything it
// does not understand: no line is better than a wrong line.

const maxScanDepth = 32

type lineScanner struct {
	s        string
	i        int
	line     int
	lines    map[string]int
	arrCount map[string]int // resolved path of an array of tables → elements so far
	table    string         // the table the last header opened ("" at the top)
	failed   bool
}

// keyLines maps full keys ("lock.ttl", "detector[1].timeout",
// "windows.allow[0]", "detector[1]" for the header) to 1-based lines.
func keyLines(data string) map[string]int {
	sc := &lineScanner{
		s:        data,
		line:     1,
		lines:    map[string]int{},
		arrCount: map[string]int{},
	}
	sc.document()
	return sc.lines
}

// keyAtLine names the key that line n (1-based) of data defines, for a
// syntax error reported on that line: the table opened by the last header
// before the line joined with the key path the line starts with, or the
// table of a header on that line. It returns "" when the text before the
// line cannot be scanned (the line is then inside a multi-line value, or the
// scanner does not understand the file) or the line starts with no key.
func keyAtLine(data string, n int) string {
	if n < 1 {
		return ""
	}
	start := 0
	for k := 1; k < n; k++ {
		i := strings.IndexByte(data[start:], '\n')
		if i < 0 {
			return ""
		}
		start += i + 1
	}
	sc := &lineScanner{s: data[:start], line: 1, lines: map[string]int{}, arrCount: map[string]int{}}
	sc.document()
	if sc.failed {
		return ""
	}
	line := data[start:]
	if i := strings.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	ls := &lineScanner{s: line, line: n, lines: map[string]int{}, arrCount: sc.arrCount}
	ls.skipBlank()
	if ls.peek() == '[' {
		if t := ls.header(); !ls.failed {
			return t
		}
		return ""
	}
	segs := ls.keyPath()
	ls.skipBlank()
	if ls.failed || len(segs) == 0 || ls.peek() != '=' {
		return ""
	}
	return joinKey(sc.table, joinSegs(segs))
}

func (sc *lineScanner) set(key string) {
	if _, ok := sc.lines[key]; !ok {
		sc.lines[key] = sc.line
	}
}

func (sc *lineScanner) peek() byte {
	if sc.i < len(sc.s) {
		return sc.s[sc.i]
	}
	return 0
}

func (sc *lineScanner) skipBlank() {
	for sc.i < len(sc.s) && (sc.s[sc.i] == ' ' || sc.s[sc.i] == '\t') {
		sc.i++
	}
}

// skipSpace skips blanks, newlines and comments.
func (sc *lineScanner) skipSpace() {
	for sc.i < len(sc.s) {
		switch sc.s[sc.i] {
		case ' ', '\t', '\r':
			sc.i++
		case '\n':
			sc.i++
			sc.line++
		case '#':
			for sc.i < len(sc.s) && sc.s[sc.i] != '\n' {
				sc.i++
			}
		default:
			return
		}
	}
}

func (sc *lineScanner) document() {
	for !sc.failed {
		sc.skipSpace()
		if sc.i >= len(sc.s) {
			return
		}
		if sc.peek() == '[' {
			sc.table = sc.header()
			continue
		}
		segs := sc.keyPath()
		sc.skipBlank()
		if sc.failed || len(segs) == 0 || sc.peek() != '=' {
			return
		}
		sc.i++
		// Every prefix of a dotted key is (implicitly) defined here too.
		key := sc.table
		for _, seg := range segs {
			key = joinKey(key, formatSeg(seg))
			sc.set(key)
		}
		sc.value(key, 0)
		sc.skipBlank()
		if c := sc.peek(); c != 0 && c != '#' && c != '\n' && c != '\r' {
			sc.failed = true
		}
	}
}

// header parses "[a.b]" or "[[a.b]]" and returns the resolved table path.
func (sc *lineScanner) header() string {
	sc.i++ // '['
	array := sc.peek() == '['
	if array {
		sc.i++
	}
	segs := sc.keyPath()
	sc.skipBlank()
	if sc.failed || len(segs) == 0 || sc.peek() != ']' {
		sc.failed = true
		return ""
	}
	sc.i++
	if array {
		if sc.peek() != ']' {
			sc.failed = true
			return ""
		}
		sc.i++
		full := joinKey(sc.resolve(segs[:len(segs)-1]), formatSeg(segs[len(segs)-1]))
		n := sc.arrCount[full]
		sc.arrCount[full] = n + 1
		sc.set(full)
		elem := full + "[" + strconv.Itoa(n) + "]"
		sc.set(elem)
		return elem
	}
	t := sc.resolve(segs)
	sc.set(t)
	return t
}

// resolve joins segments, descending into the last element of every array
// of tables on the way.
func (sc *lineScanner) resolve(segs []string) string {
	p := ""
	for _, s := range segs {
		p = joinKey(p, formatSeg(s))
		if n, ok := sc.arrCount[p]; ok {
			p += "[" + strconv.Itoa(n-1) + "]"
		}
	}
	return p
}

// keyPath parses a dotted key; segments are unquoted.
func (sc *lineScanner) keyPath() []string {
	var segs []string
	for {
		sc.skipBlank()
		var seg string
		switch c := sc.peek(); c {
		case '"', '\'':
			start := sc.i
			sc.str()
			if sc.failed {
				return nil
			}
			raw := sc.s[start:sc.i]
			seg = raw[1 : len(raw)-1]
			if c == '"' {
				if u, err := strconv.Unquote(raw); err == nil {
					seg = u
				}
			}
		default:
			start := sc.i
			for sc.i < len(sc.s) && !strings.ContainsRune(" \t\r\n.=[]\"'#,{}", rune(sc.s[sc.i])) {
				sc.i++
			}
			if sc.i == start {
				sc.failed = true
				return nil
			}
			seg = sc.s[start:sc.i]
		}
		segs = append(segs, seg)
		sc.skipBlank()
		if sc.peek() != '.' {
			return segs
		}
		sc.i++
	}
}

// str skips a basic, literal or multi-line string starting at sc.i.
func (sc *lineScanner) str() {
	q := sc.s[sc.i]
	multi := strings.HasPrefix(sc.s[sc.i:], strings.Repeat(string(q), 3))
	if multi {
		sc.i += 3
	} else {
		sc.i++
	}
	for sc.i < len(sc.s) {
		c := sc.s[sc.i]
		switch {
		case c == '\\' && q == '"':
			sc.i++
			if sc.i < len(sc.s) && sc.s[sc.i] == '\n' {
				sc.line++
			}
		case c == '\n':
			if !multi {
				sc.failed = true
				return
			}
			sc.line++
		case c == q && !multi:
			sc.i++
			return
		case c == q && strings.HasPrefix(sc.s[sc.i:], strings.Repeat(string(q), 3)):
			// Up to two extra quotes may belong to the content: """a""""".
			sc.i += 3
			for k := 0; k < 2 && sc.peek() == q; k++ {
				sc.i++
			}
			return
		}
		sc.i++
	}
	sc.failed = true
}

// value skips one value, recording the lines of array elements and of the
// keys of inline tables.
func (sc *lineScanner) value(key string, depth int) {
	if depth > maxScanDepth {
		sc.failed = true
		return
	}
	sc.skipBlank()
	switch sc.peek() {
	case '"', '\'':
		sc.str()
	case '[':
		sc.i++
		for n := 0; !sc.failed; n++ {
			sc.skipSpace()
			if sc.peek() == ']' {
				sc.i++
				return
			}
			elem := key + "[" + strconv.Itoa(n) + "]"
			sc.set(elem)
			before := sc.i
			sc.value(elem, depth+1)
			sc.skipSpace()
			if sc.peek() == ',' {
				sc.i++
			} else if sc.peek() != ']' || sc.i == before {
				sc.failed = true
			}
		}
	case '{':
		sc.i++
		for !sc.failed {
			sc.skipSpace()
			if sc.peek() == '}' {
				sc.i++
				return
			}
			segs := sc.keyPath()
			sc.skipBlank()
			if sc.failed || len(segs) == 0 || sc.peek() != '=' {
				sc.failed = true
				return
			}
			sc.i++
			sub := joinKey(key, joinSegs(segs))
			sc.set(sub)
			sc.value(sub, depth+1)
			sc.skipSpace()
			if sc.peek() == ',' {
				sc.i++
			} else if sc.peek() != '}' {
				sc.failed = true
			}
		}
	default:
		start := sc.i
		for sc.i < len(sc.s) && !strings.ContainsRune(",]}#\r\n \t", rune(sc.s[sc.i])) {
			sc.i++
		}
		// A date and a time may be separated by one space.
		if sc.i-start == 10 && sc.s[start+4] == '-' && sc.i+1 < len(sc.s) && sc.s[sc.i] == ' ' && isDigit(sc.s[sc.i+1]) {
			sc.i++
			for sc.i < len(sc.s) && !strings.ContainsRune(",]}#\r\n \t", rune(sc.s[sc.i])) {
				sc.i++
			}
		}
		if sc.i == start {
			sc.failed = true
		}
	}
}

// formatSeg renders one key segment the way TOML would need it written:
// bare when possible, else quoted.
func formatSeg(s string) string {
	if s == "" {
		return `""`
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return strconv.Quote(s)
		}
	}
	return s
}

func joinSegs(segs []string) string {
	out := ""
	for _, s := range segs {
		out = joinKey(out, formatSeg(s))
	}
	return out
}

// joinKey appends an already formatted segment (or dotted path) to prefix.
func joinKey(prefix, seg string) string {
	if prefix == "" {
		return seg
	}
	return prefix + "." + seg
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
