package cluster

import (
	"bytes"
	"strconv"
	"time"
	"unicode/utf8"
)

// A fast path for the records every member has (alive, member) and the
// mutex queue's annotations: a snapshot of a large cluster decodes one of
// each per node, and encoding/json's reflection was most of the CPU of such
// a read (≈ 8 µs per alive record; docs/performance.md, handover).
//
// The fast path accepts only the form json.Marshal writes: one object, no
// whitespace, each key spelt exactly as the field's tag and at most once,
// strings without escapes or control characters and valid UTF-8, integers
// without sign tricks, fraction or exponent, true or false. Anything else —
// including every malformed or hostile value — makes it decline, and the
// strict decoder (strictUnmarshal) decides, with its own error messages. So
// the fast path can only ever accept a subset of what the strict decoder
// accepts, with the same result; FuzzFastDecode checks exactly that.

// flatValue is one member's value: a string's bytes (without the quotes;
// quoted keeps them), or a literal's.
type flatValue struct {
	str    bool
	raw    []byte // string content, or the literal
	quoted []byte // the string with its quotes, for time.Time.UnmarshalJSON
}

// scanFlat calls set for each member of the flat object data and reports
// whether data had the simple form and set accepted every member. set gets
// the key and must return false for a key it does not know or a value of
// the wrong kind.
func scanFlat(data []byte, set func(key string, v flatValue) bool) bool {
	if len(data) < 2 || data[0] != '{' || data[len(data)-1] != '}' {
		return false
	}
	i := 1
	if data[i] == '}' {
		return i == len(data)-1
	}
	for {
		key, n, ok := scanString(data, i)
		if !ok || n >= len(data) || data[n] != ':' {
			return false
		}
		i = n + 1
		var v flatValue
		if i < len(data) && data[i] == '"' {
			s, n, ok := scanString(data, i)
			if !ok {
				return false
			}
			v = flatValue{str: true, raw: s, quoted: data[i:n]}
			i = n
		} else {
			j := i
			for j < len(data) && data[j] != ',' && data[j] != '}' {
				j++
			}
			if j == i {
				return false
			}
			v = flatValue{raw: data[i:j]}
			i = j
		}
		if !set(string(key), v) {
			return false
		}
		if i >= len(data) {
			return false
		}
		switch data[i] {
		case '}':
			return i == len(data)-1
		case ',':
			i++
		default:
			return false
		}
	}
}

// scanString reads the JSON string starting at data[i] (a quote) and
// returns its content and the index after its closing quote. It declines
// escapes, control characters and invalid UTF-8.
func scanString(data []byte, i int) ([]byte, int, bool) {
	if i >= len(data) || data[i] != '"' {
		return nil, 0, false
	}
	end := bytes.IndexByte(data[i+1:], '"')
	if end < 0 {
		return nil, 0, false
	}
	s := data[i+1 : i+1+end]
	for _, b := range s {
		if b < 0x20 || b == '\\' {
			return nil, 0, false
		}
	}
	if !utf8.Valid(s) {
		return nil, 0, false
	}
	return s, i + 2 + end, true
}

// fields tracks which keys were seen: a key twice declines.
type fields uint32

func (f *fields) once(bit int) bool {
	if *f&(1<<bit) != 0 {
		return false
	}
	*f |= 1 << bit
	return true
}

func flatString(v flatValue, dst *string) bool {
	if !v.str {
		return false
	}
	*dst = string(v.raw)
	return true
}

func flatBool(v flatValue, dst *bool) bool {
	switch {
	case v.str:
		return false
	case string(v.raw) == "true":
		*dst = true
	case string(v.raw) == "false":
		*dst = false
	default:
		return false
	}
	return true
}

// flatInt accepts -?(0|[1-9][0-9]*) that fits an int.
func flatInt(v flatValue, dst *int) bool {
	if v.str || !canonicalInt(v.raw) {
		return false
	}
	n, err := strconv.Atoi(string(v.raw))
	if err != nil {
		return false
	}
	*dst = n
	return true
}

func canonicalInt(b []byte) bool {
	if len(b) > 0 && b[0] == '-' {
		b = b[1:]
	}
	if len(b) == 0 || (b[0] == '0' && len(b) > 1) {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// flatTime decodes exactly as encoding/json does: time.Time.UnmarshalJSON
// of the quoted string.
func flatTime(v flatValue, dst *time.Time) bool {
	if !v.str {
		return false
	}
	return dst.UnmarshalJSON(v.quoted) == nil
}

// fastAlive decodes an Alive in json.Marshal's form; ok is false when the
// strict decoder must decide.
func fastAlive(data []byte) (a Alive, ok bool) {
	var seen fields
	ok = scanFlat(data, func(k string, v flatValue) bool {
		switch k {
		case "node":
			return seen.once(0) && flatString(v, &a.Node)
		case "boot_id":
			return seen.once(1) && flatString(v, &a.BootID)
		case "kernel":
			return seen.once(2) && flatString(v, &a.Kernel)
		case "version":
			return seen.once(3) && flatString(v, &a.Version)
		case "state":
			return seen.once(4) && flatString(v, &a.State)
		case "detector":
			return seen.once(5) && flatString(v, &a.Detector)
		case "reason":
			return seen.once(6) && flatString(v, &a.Reason)
		case "blocked":
			return seen.once(7) && flatString(v, &a.Blocked)
		case "healthy":
			return seen.once(8) && flatBool(v, &a.Healthy)
		case "reboot_required":
			return seen.once(9) && flatBool(v, &a.RebootRequired)
		case "max_concurrent":
			return seen.once(10) && flatInt(v, &a.MaxConcurrent)
		case "updated_at":
			return seen.once(11) && flatTime(v, &a.UpdatedAt)
		}
		return false
	})
	return a, ok
}

// fastMember decodes a Member in json.Marshal's form.
func fastMember(data []byte) (m Member, ok bool) {
	var seen fields
	ok = scanFlat(data, func(k string, v flatValue) bool {
		switch k {
		case "node":
			return seen.once(0) && flatString(v, &m.Node)
		case "registered_at":
			return seen.once(1) && flatTime(v, &m.RegisteredAt)
		}
		return false
	})
	return m, ok
}

// fastAnnotation decodes a lockAnnotation in json.Marshal's form.
func fastAnnotation(data []byte) (a lockAnnotation, ok bool) {
	var seen fields
	ok = scanFlat(data, func(k string, v flatValue) bool {
		switch k {
		case "node":
			return seen.once(0) && flatString(v, &a.Node)
		case "pid":
			return seen.once(1) && flatInt(v, &a.PID)
		case "boot_id":
			return seen.once(2) && flatString(v, &a.BootID)
		case "queued_at":
			return seen.once(3) && flatTime(v, &a.QueuedAt)
		}
		return false
	})
	return a, ok
}
