package config

import (
	"reflect"
	"testing"
)

func TestKeyLines(t *testing.T) {
	const doc = `# comment with [brackets] and key = "value"
top = 1 # trailing
"quoted key" = 'lit'
dotted.sub = "x"

[table]
a = """
multi
line "quoted" ""
"""
b = '''
literal ''
'''
c = [
  "one",  # comment ] ,
  'two',
  [3, 4],
]
"esc\"aped" = "a\\b\"c"

[[arr]]
x = 1

[[arr]]
x = { p = 1, q = [ {r = 2} ] }
[arr.sub]
y = 2

[[arr.nested]]
z = 3
inline = [
  { k = 1 },
  { k = 2 },
]
date = 1979-05-27 07:32:00Z
`
	got := keyLines(doc)
	want := map[string]int{
		"top":                          2,
		`"quoted key"`:                 3,
		"dotted.sub":                   4,
		"table":                        6,
		"table.a":                      7,
		"table.b":                      11,
		"table.c":                      14,
		"table.c[0]":                   15,
		"table.c[1]":                   16,
		"table.c[2]":                   17,
		"table.c[2][1]":                17,
		`table."esc\"aped"`:            19,
		"arr":                          21,
		"arr[0]":                       21,
		"arr[0].x":                     22,
		"arr[1]":                       24,
		"arr[1].x":                     25,
		"arr[1].x.p":                   25,
		"arr[1].x.q[0].r":              25,
		"arr[1].sub":                   26,
		"arr[1].sub.y":                 27,
		"arr[1].nested[0]":             29,
		"arr[1].nested[0].z":           30,
		"arr[1].nested[0].inline[1].k": 33,
		"arr[1].nested[0].date":        35,
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("line of %s = %d, want %d", k, got[k], n)
		}
	}
}

// TestKeyLinesGivesUp: on input it does not understand the scanner stops
// and keeps only what it found before.
func TestKeyLinesGivesUp(t *testing.T) {
	for _, doc := range []string{
		"a = 1\n[b\nc = 2\n",
		"a = 1\n[[b]\nc = 2\n",
		"a = 1\n= 2\nc = 3\n",
		"a = 1\nb = \"open\nc = 3\n",
		"a = 1\nb = [1 2]\nc = 3\n",
		"a = 1\nb = {x = 1 y = 2}\nc = 3\n",
		"a = 1\nb = {= 1}\nc = 3\n",
		"a = 1\nb = \"\"\"never closed\nc = 3\n",
		"a = 1\nb = [" + deep(40) + "]\nc = 3\n",
		"a = 1\nb = ,\nc = 3\n",
		"a = 1\nb.\"c\nc = 3\n",
	} {
		got := keyLines(doc)
		if got["a"] != 1 {
			t.Errorf("%q: line of a = %d, want 1", doc, got["a"])
		}
		if _, ok := got["c"]; ok {
			t.Errorf("%q: found c after input it cannot read: %v", doc, got)
		}
	}
}

func deep(n int) string {
	s := ""
	for i := 0; i < n; i++ {
		s += "["
	}
	for i := 0; i < n; i++ {
		s += "]"
	}
	return s
}

func TestLineOf(t *testing.T) {
	lines := map[string]int{"detector": 3, "detector[1]": 7, "windows.allow": 12, "lock.ttl": 20}
	for key, want := range map[string]int{
		"detector[1].cmd":    7,
		"detector[1].cmd[0]": 7,
		"detector[0].cmd":    3,
		"windows.allow[4]":   12,
		"lock.ttl":           20,
		"lock.max":           0,
		"windows.deny[0]":    0,
		"other[1]":           0,
		"[1]":                0,
	} {
		if got := lineOf(lines, key); got != want {
			t.Errorf("lineOf(%q) = %d, want %d", key, got, want)
		}
	}
}

func TestSuggest(t *testing.T) {
	fields := tomlFields(durationOwner())
	for name, want := range map[string]string{
		"TTL":             "ttl",
		"max_concurent":   "max_concurrent",
		"backof_min":      "backoff_min",
		"completely_else": "",
	} {
		if got := suggest(name, fields); got != want {
			t.Errorf("suggest(%q) = %q, want %q", name, got, want)
		}
	}
	if editDistance(string(make([]byte, 100)), "x") != 64 {
		t.Error("editDistance does not bound long input")
	}
}

func durationOwner() reflect.Type { return reflect.TypeOf(Lock{}) }

func TestClip(t *testing.T) {
	long := ""
	for i := 0; i < 100; i++ {
		long += "äb"
	}
	c := clip(long)
	if len(c) > 2*maxValueLen+len("…") || c[len(c)-len("…"):] != "…" {
		t.Errorf("clip(%d bytes) = %d bytes %q", len(long), len(c), c)
	}
	if clip("short") != "short" {
		t.Error("clip changed a short string")
	}
}

func TestTomlTypeName(t *testing.T) {
	for v, want := range map[any]string{"s": "a string", int64(1): "an integer", 1.5: "a float", true: "a boolean"} {
		if got := tomlTypeName(v); got != want {
			t.Errorf("tomlTypeName(%v) = %q", v, got)
		}
	}
	if got := tomlTypeName(nil); got != "nothing" {
		t.Errorf("nil: %q", got)
	}
	if got := tomlTypeName([]map[string]any{}); got != "an array of tables" {
		t.Errorf("aot: %q", got)
	}
	if got := tomlTypeName(struct{}{}); got != "a struct {}" {
		t.Errorf("struct: %q", got)
	}
}
