package config

import (
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The decoder does not hand the TOML to toml.Decode's reflection: that stops
// at the first type error and drops the element index of [[detector]] keys.
// Instead each file is parsed into a generic tree (toml.Decode into a map)
// and applied onto the Config here, key by key, so that every unknown key
// (the equivalent of toml.MetaData.Undecoded), every wrong type and every bad
// duration of every file is reported with its full key, and so that Load
// knows which file last set each key. Key matching is exact (no case folding).

const (
	// MaxFileSize is the largest configuration file Load reads.
	MaxFileSize = 1 << 20
	// MaxDetectors is the largest number of [[detector]] entries.
	MaxDetectors = 64
	// MaxListLen is the largest number of elements of any other array.
	MaxListLen = 1024
	// maxValueLen bounds how much of a bad value an error message quotes.
	maxValueLen = 64
)

var (
	durationType  = reflect.TypeOf(Duration(0))
	detectorsType = reflect.TypeOf([]Detector(nil))
)

// applyTable applies the TOML table m onto the struct rv.
func (l *loader) applyTable(f *fileCtx, m map[string]any, rv reflect.Value, prefix string) {
	fields := tomlFields(rv.Type())
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		key := joinKey(prefix, formatSeg(name))
		idx, ok := fields[name]
		if !ok {
			l.unknownKey(f, key, name, m[name], fields)
			continue
		}
		l.applyValue(f, key, m[name], rv.Field(idx))
	}
}

// tomlFields maps the toml tag of each field of t to its index.
func tomlFields(t reflect.Type) map[string]int {
	out := make(map[string]int, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		tag := t.Field(i).Tag.Get("toml")
		if tag == "" || tag == "-" {
			continue
		}
		out[tag] = i
	}
	return out
}

func (l *loader) applyValue(f *fileCtx, key string, v any, fv reflect.Value) {
	switch fv.Type() {
	case durationType:
		s, ok := v.(string)
		if !ok {
			l.typeError(f, key, v, `a duration string such as "90s"`)
			return
		}
		var d Duration
		if err := d.UnmarshalText([]byte(s)); err != nil {
			l.fileProblem(f, key, true, "%s", clip(err.Error()))
			return
		}
		fv.Set(reflect.ValueOf(d))
		l.setOrigin(key, f)
		return
	case detectorsType:
		l.applyDetectors(f, key, v, fv)
		return
	}
	switch fv.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			l.typeError(f, key, v, "a table")
			return
		}
		l.applyTable(f, m, fv, key)
	case reflect.String, reflect.Bool, reflect.Int, reflect.Float64:
		x, ok := l.scalar(f, key, v, fv.Type())
		if !ok {
			return
		}
		fv.Set(x)
		l.setOrigin(key, f)
	case reflect.Slice:
		arr, ok := v.([]any)
		if !ok {
			l.typeError(f, key, v, "an array of "+kindName(fv.Type().Elem()))
			return
		}
		if len(arr) > MaxListLen {
			l.fileProblem(f, key, true, "too many elements (%d; at most %d)", len(arr), MaxListLen)
			return
		}
		out := reflect.MakeSlice(fv.Type(), len(arr), len(arr))
		good := true
		for i, e := range arr {
			x, ok := l.scalar(f, key+"["+strconv.Itoa(i)+"]", e, fv.Type().Elem())
			if !ok {
				good = false
				continue
			}
			out.Index(i).Set(x)
		}
		if !good {
			l.bad[key] = true
			return
		}
		fv.Set(out)
		l.clearList(key)
		l.setOrigin(key, f)
	default:
		// Unreachable with the Config types; reported rather than ignored.
		l.fileProblem(f, key, true, "unsupported field type %s", fv.Type())
	}
}

// scalar converts a TOML scalar to a value of type t (string, bool, int,
// float64), reporting a problem for key when it cannot.
func (l *loader) scalar(f *fileCtx, key string, v any, t reflect.Type) (reflect.Value, bool) {
	switch t.Kind() {
	case reflect.String:
		s, ok := v.(string)
		if !ok {
			l.typeError(f, key, v, "a string")
			return reflect.Value{}, false
		}
		if strings.IndexByte(s, 0) >= 0 {
			l.fileProblem(f, key, true, "must not contain NUL characters")
			return reflect.Value{}, false
		}
		return reflect.ValueOf(s).Convert(t), true
	case reflect.Bool:
		b, ok := v.(bool)
		if !ok {
			l.typeError(f, key, v, "a boolean (true or false)")
			return reflect.Value{}, false
		}
		return reflect.ValueOf(b).Convert(t), true
	case reflect.Int:
		n, ok := v.(int64)
		if !ok {
			l.typeError(f, key, v, "an integer")
			return reflect.Value{}, false
		}
		if int64(int(n)) != n {
			l.fileProblem(f, key, true, "%d is out of range", n)
			return reflect.Value{}, false
		}
		return reflect.ValueOf(int(n)).Convert(t), true
	case reflect.Float64:
		switch n := v.(type) {
		case float64:
			return reflect.ValueOf(n).Convert(t), true
		case int64:
			return reflect.ValueOf(float64(n)).Convert(t), true
		}
		l.typeError(f, key, v, "a number")
		return reflect.Value{}, false
	}
	l.fileProblem(f, key, true, "unsupported field type %s", t)
	return reflect.Value{}, false
}

// applyDetectors replaces the detector list with the array of tables v.
func (l *loader) applyDetectors(f *fileCtx, key string, v any, fv reflect.Value) {
	var tables []map[string]any
	switch a := v.(type) {
	case []map[string]any:
		tables = a
	case []any:
		for i, e := range a {
			m, ok := e.(map[string]any)
			if !ok {
				l.typeError(f, key+"["+strconv.Itoa(i)+"]", e, "a table")
				l.bad[key] = true
				return
			}
			tables = append(tables, m)
		}
	default:
		l.typeError(f, key, v, "an array of tables ([[detector]])")
		return
	}
	if len(tables) > MaxDetectors {
		l.fileProblem(f, key, true, "too many detectors (%d; at most %d)", len(tables), MaxDetectors)
		return
	}
	list := make([]Detector, len(tables))
	l.clearList(key)
	for i, m := range tables {
		list[i] = newDetector()
		l.applyTable(f, m, reflect.ValueOf(&list[i]).Elem(), key+"["+strconv.Itoa(i)+"]")
	}
	fv.Set(reflect.ValueOf(list))
	l.setOrigin(key, f)
}

// unknownKey reports a key the schema does not have. The value is never
// quoted: it may be a secret.
func (l *loader) unknownKey(f *fileCtx, key, name string, v any, fields map[string]int) {
	msg := "unknown key"
	if secretish(name) || containsSecret(v, 0) {
		msg += ": inline secrets are not allowed; use password_file"
		if strings.Contains(strings.ToLower(name), "key") {
			msg += " (or etcd.tls.key_file for a TLS key)"
		}
	} else if s := suggest(name, fields); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	l.fileProblem(f, key, false, "%s", msg)
}

var secretWords = []string{"password", "passwd", "passphrase", "secret", "token", "credential", "apikey", "api_key", "private_key", "privatekey"}

// secretish reports whether a key name looks like it holds a secret.
func secretish(name string) bool {
	n := strings.ToLower(name)
	switch n {
	case "key", "pass", "pw", "pwd", "auth":
		return true
	}
	for _, w := range secretWords {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

func containsSecret(v any, depth int) bool {
	if depth > maxScanDepth {
		return false
	}
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			if secretish(k) || containsSecret(e, depth+1) {
				return true
			}
		}
	case []map[string]any:
		for _, e := range t {
			if containsSecret(e, depth+1) {
				return true
			}
		}
	case []any:
		for _, e := range t {
			if containsSecret(e, depth+1) {
				return true
			}
		}
	}
	return false
}

// suggest returns the known key closest to name, or "".
func suggest(name string, fields map[string]int) string {
	best, bestD := "", 3
	for k := range fields {
		if strings.EqualFold(k, name) {
			return k
		}
		if d := editDistance(strings.ToLower(name), k); d < bestD || d == bestD && d < 3 && k < best {
			best, bestD = k, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 64
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func (l *loader) typeError(f *fileCtx, key string, v any, want string) {
	l.fileProblem(f, key, true, "must be %s, not %s", want, tomlTypeName(v))
}

// tomlTypeName names the TOML type of a decoded value.
func tomlTypeName(v any) string {
	switch t := v.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case time.Time:
		return "a datetime"
	case []map[string]any:
		return "an array of tables"
	case []any:
		return "an array"
	case map[string]any:
		return "a table"
	case nil:
		return "nothing"
	default:
		return fmt.Sprintf("a %T", t)
	}
}

func kindName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "strings"
	case reflect.Int:
		return "integers"
	}
	return t.String()
}

// clip shortens s for an error message, keeping it valid UTF-8.
func clip(s string) string { return clipTo(s, maxValueLen*2) }

// clipTo shortens s to at most n bytes plus "…", keeping it valid UTF-8.
func clipTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
