package config

import "fmt"

// maxNesting bounds how deeply a file may nest arrays, inline tables and
// dotted keys. The schema needs 4 levels; the TOML parser needs memory
// quadratic in the depth (a 10000-level inline table exhausts gigabytes),
// so files deeper than this are refused before they reach it.
const maxNesting = 32

// maxProblems bounds the problems reported by one Load.
const maxProblems = 100

// checkNesting scans data lexically (strings and comments are understood,
// nothing else needs to be) and reports the first line where brackets or
// the dots of a key path nest deeper than maxNesting. Being lexical it
// cannot be confused by input the TOML grammar rejects.
func checkNesting(data []byte) (line int, msg string) {
	line = 1
	depth, dots := 0, 0
	for i := 0; i < len(data); i++ {
		switch c := data[i]; c {
		case '\n':
			line++
			dots = 0
		case '#':
			for i+1 < len(data) && data[i+1] != '\n' {
				i++
			}
		case '"', '\'':
			i, line = skipString(data, i, line)
		case '[', '{':
			depth++
			dots = 0
			if depth > maxNesting {
				return line, fmt.Sprintf("arrays and tables nested too deeply (at most %d levels)", maxNesting)
			}
		case ']', '}':
			if depth > 0 {
				depth--
			}
			dots = 0
		case '=', ',':
			dots = 0
		case '.':
			dots++
			if dots > maxNesting {
				return line, fmt.Sprintf("key has too many dotted parts (at most %d)", maxNesting)
			}
		}
	}
	return 0, ""
}

// skipString returns the index of the last byte of the string starting at
// data[i] (or of the input, if it is unterminated) and the line count after
// it. A single-line string ends at its quote or, unterminated, before the
// newline.
func skipString(data []byte, i, line int) (int, int) {
	q := data[i]
	multi := i+2 < len(data) && data[i+1] == q && data[i+2] == q
	if multi {
		i += 2
	}
	for i++; i < len(data); i++ {
		switch c := data[i]; {
		case c == '\\' && q == '"':
			if i+1 < len(data) && data[i+1] == '\n' {
				line++
			}
			i++
		case c == '\n':
			if !multi {
				return i - 1, line
			}
			line++
		case c == q && !multi:
			return i, line
		case c == q && i+2 < len(data) && data[i+1] == q && data[i+2] == q:
			return i + 2, line
		}
	}
	return len(data) - 1, line
}
