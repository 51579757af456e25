package config

import (
	"errors"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ErrInvalid is matched (errors.Is) by every error Load returns: syntax
// errors, unknown keys, wrong types, impossible values, unreadable files.
// The command line maps it to exit code 2.
var ErrInvalid = errors.New("config: invalid")

// Problem is one thing wrong with the configuration.
type Problem struct {
	File string // file the problem is attributed to; "" only when no file is known
	Line int    // 1-based line in File; 0 when unknown
	Key  string // full dotted key such as "lock.ttl" or "detector[2].timeout"; "" for file-level problems
	Msg  string // what is wrong; never contains the value of a secret-looking key
}

// String renders the problem as "file:line: key: msg"; the line and the key
// are left out when unknown. A file name with control characters (or that
// is not UTF-8) is quoted like a Go string, so that it cannot forge further
// lines of the message.
func (p Problem) String() string {
	var b strings.Builder
	if p.File != "" {
		b.WriteString(showPath(p.File))
	} else {
		b.WriteString("config")
	}
	if p.Line > 0 {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(p.Line))
	}
	b.WriteString(": ")
	if p.Key != "" {
		b.WriteString(p.Key)
		b.WriteString(": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// maxPathShown bounds how much of a file name a message shows: PATH_MAX, so
// that any path the system can open is shown in full.
const maxPathShown = 4096

// showPath is p as a message shows it: unchanged when it is printable
// UTF-8, else quoted (strconv.Quote) so that a newline in a directory or
// file name cannot start a forged line; shortened beyond maxPathShown bytes.
func showPath(p string) string {
	p = clipTo(p, maxPathShown)
	if !utf8.ValidString(p) {
		return strconv.Quote(p)
	}
	for _, r := range p {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return strconv.Quote(p)
		}
	}
	return p
}

// Error is the error Load returns: every problem found in every file, in
// file order and, within a file, in line order.
type Error struct {
	Problems []Problem
}

// Error prints one problem per line.
func (e *Error) Error() string {
	if e == nil || len(e.Problems) == 0 {
		return ErrInvalid.Error()
	}
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *Error) Is(target error) bool { return target == ErrInvalid }
