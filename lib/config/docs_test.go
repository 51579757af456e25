package config

import (
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
)

// configDoc is the configuration reference every key must be in.
const configDoc = "../../docs/configuration.md"

// schemaKey is one leaf key of the schema with its default.
type schemaKey struct {
	key string // dotted: "lock.max_concurrent", "detector.type"
	def reflect.Value
}

// docSchemaKeys walks the toml tags of Config: every leaf key, dotted, with its
// default (Default(); the [[detector]] keys with a configured entry's
// defaults).
func docSchemaKeys() []schemaKey {
	var out []schemaKey
	var walk func(rv reflect.Value, prefix string)
	walk = func(rv reflect.Value, prefix string) {
		t := rv.Type()
		for i := 0; i < t.NumField(); i++ {
			tag := t.Field(i).Tag.Get("toml")
			if tag == "" || tag == "-" {
				continue
			}
			key := joinKey(prefix, tag)
			fv := rv.Field(i)
			switch {
			case fv.Type() == detectorsType:
				walk(reflect.ValueOf(newDetector()), key)
			case fv.Kind() == reflect.Struct && fv.Type() != durationType:
				walk(fv, key)
			default:
				out = append(out, schemaKey{key, fv})
			}
		}
	}
	walk(reflect.ValueOf(Default()), "")
	return out
}

// docRow is a row of a reference table: | `key` | type | default | ... |.
type docRow struct {
	line  int
	cells []string
}

var rowKey = regexp.MustCompile("^\\|\\s*`([a-z_.]+)`\\s*\\|")

var keyHeader = regexp.MustCompile(`^\|\s*key\s*\|`)

// docRows returns the rows of the document's key tables (tables whose
// header starts with "| key |") by key.
func docRows(doc string) map[string]docRow {
	rows := map[string]docRow{}
	inTable := false
	for i, line := range strings.Split(doc, "\n") {
		switch {
		case keyHeader.MatchString(line):
			inTable = true
			continue
		case !strings.HasPrefix(strings.TrimSpace(line), "|"):
			inTable = false
			continue
		}
		m := rowKey.FindStringSubmatch(line)
		if !inTable || m == nil {
			continue
		}
		var cells []string
		for _, c := range strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|") {
			cells = append(cells, strings.TrimSpace(c))
		}
		rows[m[1]] = docRow{line: i + 1, cells: cells}
	}
	return rows
}

// checkDoc returns every disagreement between the schema and the document:
// a key without a row, a row for a key the schema does not have, a default
// written as a TOML value that is not the real default.
func checkDoc(keys []schemaKey, doc string) []string {
	rows := docRows(doc)
	var probs []string
	known := map[string]bool{}
	for _, k := range keys {
		known[k.key] = true
		r, ok := rows[k.key]
		if !ok {
			probs = append(probs, fmt.Sprintf("key %s is not documented (want a table row starting with | `%s` |)", k.key, k.key))
			continue
		}
		if len(r.cells) < 4 {
			probs = append(probs, fmt.Sprintf("line %d: %s: want | key | type | default | meaning |", r.line, k.key))
			continue
		}
		if p := checkDefault(k, r.cells[2]); p != "" {
			probs = append(probs, fmt.Sprintf("line %d: %s: %s", r.line, k.key, p))
		}
	}
	for key, r := range rows {
		if !known[key] {
			probs = append(probs, fmt.Sprintf("line %d: %s is documented but is no key of the schema", r.line, key))
		}
	}
	slices.Sort(probs)
	return probs
}

var literal = regexp.MustCompile("^`([^`]*)`")

// checkDefault compares a documented default with the real one when the
// cell starts with a TOML value in backticks (`"90s"`, `1`, `[]`); cells
// in words ("short host name") are not checked.
func checkDefault(k schemaKey, cell string) string {
	m := literal.FindStringSubmatch(cell)
	if m == nil {
		return ""
	}
	var v struct{ V any }
	if _, err := toml.Decode("V = "+m[1], &v); err != nil {
		return fmt.Sprintf("default %s is not a TOML value: %v", m[1], err)
	}
	want := k.def.Interface()
	ok := false
	switch d := want.(type) {
	case Duration:
		s, isStr := v.V.(string)
		got, err := time.ParseDuration(s)
		ok = isStr && err == nil && Duration(got) == d
	case string:
		ok = v.V == d
	case bool:
		ok = v.V == d
	case int:
		ok = v.V == int64(d)
	case float64:
		switch n := v.V.(type) {
		case float64:
			ok = n == d
		case int64:
			ok = float64(n) == d
		}
	default:
		got := reflect.ValueOf(v.V)
		wv := reflect.ValueOf(want)
		if got.Kind() == reflect.Slice && wv.Kind() == reflect.Slice && got.Len() == wv.Len() {
			ok = true
			for i := 0; i < wv.Len(); i++ {
				ok = ok && fmt.Sprint(got.Index(i).Interface()) == fmt.Sprint(wv.Index(i).Interface())
			}
		}
	}
	if !ok {
		return fmt.Sprintf("documented default %s, real default %#v", m[1], want)
	}
	return ""
}

func TestConfigurationDocumented(t *testing.T) {
	b, err := os.ReadFile(configDoc)
	if err != nil {
		t.Fatal(err)
	}
	keys := docSchemaKeys()
	if len(keys) < 50 {
		t.Fatalf("schema walk found only %d keys", len(keys))
	}
	// The same keys as the package's own key list (config_test.go).
	var names []string
	for _, k := range keys {
		names = append(names, k.key)
	}
	if want := schemaKeys(reflect.TypeOf(Config{}), ""); !slices.Equal(names, want) {
		t.Fatalf("key walk disagrees with schemaKeys:\n got %v\nwant %v", names, want)
	}
	for _, p := range checkDoc(keys, string(b)) {
		t.Errorf("%s: %s", configDoc, p)
	}
}

// The check must fail on a missing key, an unknown key and a wrong default.
func TestConfigurationDocumentedCanFail(t *testing.T) {
	b, err := os.ReadFile(configDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	keys := docSchemaKeys()
	cases := []struct{ name, old, new, want string }{
		{"missing key", "| `lock.max_concurrent` |", "| max concurrent |", "key lock.max_concurrent is not documented"},
		{"missing detector key", "| `detector.timeout` |", "| timeout |", "key detector.timeout is not documented"},
		{"unknown key", "| `lock.ttl` |", "| `lock.ttl` | x | y | z |\n| `lock.bogus` |", "lock.bogus is documented but is no key"},
		{"wrong default", "| `lock.backoff_max` | duration | `\"60s\"`", "| `lock.backoff_max` | duration | `\"61s\"`", "lock.backoff_max: documented default \"61s\""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !strings.Contains(doc, c.old) {
				t.Fatalf("%s has no %q", configDoc, c.old)
			}
			probs := checkDoc(keys, strings.Replace(doc, c.old, c.new, 1))
			if !strings.Contains(strings.Join(probs, "\n"), c.want) {
				t.Errorf("got %q, want one containing %q", probs, c.want)
			}
		})
	}
}
