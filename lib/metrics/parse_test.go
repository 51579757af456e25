package metrics

import (
	"errors"
	"strings"
	"testing"
)

const goodText = `# a comment
# HELP a_total Things, with a \\ and a\nnewline.
# TYPE a_total counter
a_total{x="1",y="q\"uo\\te\n"} 3
a_total{x="2",} 0

# HELP h Latency.
# TYPE h histogram
h_bucket{le="0.5"} 1
h_bucket{le="1"} 2
h_bucket{le="+Inf"} 2
h_sum 1.25
h_count 2
h_bucket{k="v",le="+Inf"} 0
h_sum{k="v"} 0
h_count{k="v"} 0
# HELP s Summary.
# TYPE s summary
s{quantile="0.5"} NaN
s_sum 1e3
s_count 4
# HELP g:x Gauge.
# TYPE g:x gauge
g:x -Inf
# HELP u
# TYPE u untyped
u 1
`

func TestParseGood(t *testing.T) {
	fs, err := Parse(strings.NewReader(goodText))
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 5 || fs[0].Help != "Things, with a \\ and a\nnewline." || fs[4].Help != "" || fs[1].Type != "histogram" {
		t.Fatalf("families = %+v", fs)
	}
	wantValue(t, fs, 3, "a_total", "y", "q\"uo\\te\n")
	wantValue(t, fs, 1000, "s_sum")
	wantValue(t, fs, 2, "h_bucket", "le", "1")
	if _, ok := fs.Value("a_total"); ok {
		t.Error("Value matched two samples")
	}
	if _, ok := fs.Value("a_total", "x"); ok {
		t.Error("Value matched with an odd label list")
	}
	if _, ok := fs.Value("missing"); ok {
		t.Error("Value found a missing sample")
	}
}

func TestParseBad(t *testing.T) {
	head := "# HELP m M.\n# TYPE m counter\n"
	hist := "# HELP h H.\n# TYPE h histogram\n"
	tests := []struct{ name, text, want string }{
		{"sample without family", "m 1\n", "before the HELP and TYPE"},
		{"sample without help", "# TYPE m counter\nm 1\n", "before the HELP and TYPE"},
		{"family without type", "# HELP m M.\n", "HELP or TYPE missing"},
		{"second help", "# HELP m M.\n" + head + "m 1\n", "second HELP"},
		{"second type", head + "# TYPE m counter\nm 1\n", "second TYPE"},
		{"type after samples", head + "m 1\n# TYPE m counter\n", "after its samples"},
		{"unknown type", "# HELP m M.\n# TYPE m counterx\n", "unknown type"},
		{"bad name in help", "# HELP 1m M.\n", "bad metric name"},
		{"not contiguous", head + "m{a=\"1\"} 1\n# HELP n N.\n# TYPE n gauge\nn 1\nm{a=\"2\"} 1\n", "not contiguous"},
		{"repeated series", head + "m{a=\"1\",b=\"2\"} 1\nm{b=\"2\",a=\"1\"} 2\n", "repeated"},
		{"bad sample start", head + "{a=\"1\"} 1\n", "does not start with a metric name"},
		{"bad label name", head + "m{1a=\"1\"} 1\n", "bad label name"},
		{"reserved label", head + "m{__a=\"1\"} 1\n", "bad label name"},
		{"label repeated", head + "m{a=\"1\",a=\"2\"} 1\n", "repeated"},
		{"label without quote", head + "m{a=1} 1\n", `want ="`},
		{"unterminated", head + "m{a=\"1} 1\n", "unterminated"},
		{"bad escape", head + "m{a=\"\\t\"} 1\n", "unknown escape"},
		{"trailing backslash in help", "# HELP m M\\\n", "trailing backslash"},
		{"escaped quote in help", "# HELP m \\\"M\n", "outside a label value"},
		{"no separator", head + "m{a=\"1\" b=\"2\"} 1\n", "want , or }"},
		{"invalid utf-8", head + "m{a=\"\xff\"} 1\n", "UTF-8"},
		{"no space before value", head + "m{a=\"1\"}1\n", "no space"},
		{"timestamp", head + "m 1 1700000000000\n", "no timestamp"},
		{"bad value", head + "m one\n", "bad value"},
		{"hex value", head + "m 0x1p3\n", "bad value"},
		{"negative counter", head + "m -1\n", "counter"},
		{"NaN counter", head + "m NaN\n", "counter"},
		{"summary bucket", "# HELP s S.\n# TYPE s summary\ns_bucket{le=\"1\"} 1\n", "before the HELP and TYPE"},
		{"bucket without le", hist + "h_bucket 1\nh_sum 1\nh_count 1\n", "without le"},
		{"bad le", hist + "h_bucket{le=\"x\"} 1\nh_sum 1\nh_count 1\n", "bad le"},
		{"le on count", hist + "h_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count{le=\"1\"} 1\n", "le on"},
		{"le not ascending", hist + "h_bucket{le=\"2\"} 0\nh_bucket{le=\"1\"} 0\nh_bucket{le=\"+Inf\"} 0\nh_sum 0\nh_count 0\n", "not above"},
		{"bucket decreasing", hist + "h_bucket{le=\"1\"} 2\nh_bucket{le=\"2\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 0\nh_count 2\n", "below the previous"},
		{"negative bucket", hist + "h_bucket{le=\"1\"} -1\nh_bucket{le=\"+Inf\"} 0\nh_sum 0\nh_count 0\n", "negative bucket"},
		{"no +Inf", hist + "h_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n", "no +Inf"},
		{"+Inf != count", hist + "h_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 2\n", "!= _count"},
		{"negative count", hist + "h_bucket{le=\"+Inf\"} -1\nh_sum 1\nh_count -1\n", "negative"},
		{"no sum", hist + "h_bucket{le=\"+Inf\"} 1\nh_count 1\n", "needs buckets"},
		{"no samples", hist, "without samples"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tc.text))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

type failReader struct{}

func (failReader) Read([]byte) (int, error) { return 0, errors.New("boom") }

func TestParseReadError(t *testing.T) {
	if _, err := Parse(failReader{}); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("Parse of a failing reader = %v", err)
	}
}

func TestMonotonic(t *testing.T) {
	parse := func(counter, gauge, inf string) Families {
		fs, err := Parse(strings.NewReader("# HELP c C.\n# TYPE c counter\nc{a=\"1\"} " + counter +
			"\n# HELP g G.\n# TYPE g gauge\ng " + gauge +
			"\n# HELP h H.\n# TYPE h histogram\nh_bucket{le=\"+Inf\"} " + inf + "\nh_sum 0\nh_count " + inf + "\n"))
		if err != nil {
			t.Fatal(err)
		}
		return fs
	}
	before := parse("2", "5", "1")
	for _, tc := range []struct {
		name  string
		after Families
		want  string
	}{
		{"up, gauge down", parse("3", "1", "2"), ""},
		{"same", parse("2", "5", "1"), ""},
		{"counter down", parse("1", "5", "1"), "went down"},
		{"histogram down", parse("2", "5", "0"), "went down"},
		{"series gone", Families{}, "disappeared"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Monotonic(before, tc.after)
			if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("Monotonic = %v, want %q", err, tc.want)
			}
		})
	}
}
