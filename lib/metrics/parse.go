package metrics

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Parse reads a text file in the Prometheus text exposition format 0.0.4
// and checks it strictly, as the textfile collector's input should be:
//
//   - every family has exactly one HELP and one TYPE line, both before its
//     first sample, and its samples are contiguous;
//   - metric and label names follow the format's grammar, label values use
//     only its escapes, no label name repeats in a sample and no series
//     (name and label set) repeats in the file;
//   - no sample carries a timestamp (the textfile collector refuses them);
//   - counters are non-negative; a histogram has, per label set, buckets
//     with strictly increasing le, non-decreasing cumulative counts, a
//     +Inf bucket equal to its _count, and a _sum.
//
// It exists to check clusterrebootd's own output (tests, operators) without a
// dependency on the Prometheus libraries.
func Parse(r io.Reader) (Families, error) {
	p := &parser{byName: map[string]*Family{}, series: map[string]bool{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		p.line++
		if err := p.parseLine(sc.Text()); err != nil {
			return nil, fmt.Errorf("metrics: line %d: %w", p.line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	for _, f := range p.fams {
		if err := f.check(); err != nil {
			return nil, fmt.Errorf("metrics: family %s: %w", f.Name, err)
		}
	}
	out := make(Families, len(p.fams))
	for i, f := range p.fams {
		out[i] = *f
	}
	return out, nil
}

// Families are the parsed families in file order.
type Families []Family

// Family is one metric family of a parsed file.
type Family struct {
	Name, Help, Type string
	Samples          []Sample
	hasHelp, hasType bool
}

// Sample is one line of values.
type Sample struct {
	Name   string // the family name, or with _bucket, _sum, _count
	Labels map[string]string
	Value  float64
}

// Value returns the value of the only sample named name whose labels include
// every given pair (kv is label, value, label, value, ...). ok is false when
// none or several match.
func (fs Families) Value(name string, kv ...string) (v float64, ok bool) {
	n := 0
	for _, f := range fs {
		for _, s := range f.Samples {
			if s.Name != name || !hasLabels(s.Labels, kv) {
				continue
			}
			v, n = s.Value, n+1
		}
	}
	return v, n == 1
}

func hasLabels(l map[string]string, kv []string) bool {
	for i := 0; i+1 < len(kv); i += 2 {
		if got, ok := l[kv[i]]; !ok || got != kv[i+1] {
			return false
		}
	}
	return len(kv)%2 == 0
}

// Monotonic checks that no counter or histogram series of before is missing
// from after or smaller there: what a scraper sees across two runs without
// a counter reset.
func Monotonic(before, after Families) error {
	now := map[string]float64{}
	for _, f := range after {
		for _, s := range f.Samples {
			now[seriesKey(s.Name, s.Labels)] = s.Value
		}
	}
	for _, f := range before {
		if f.Type != "counter" && f.Type != "histogram" {
			continue
		}
		for _, s := range f.Samples {
			k := seriesKey(s.Name, s.Labels)
			v, ok := now[k]
			switch {
			case !ok:
				return fmt.Errorf("metrics: series %s disappeared", k)
			case v < s.Value:
				return fmt.Errorf("metrics: counter %s went down from %s to %s", k, formatFloat(s.Value), formatFloat(v))
			}
		}
	}
	return nil
}

type parser struct {
	line   int
	fams   []*Family
	byName map[string]*Family
	cur    *Family // the family whose samples are being read
	series map[string]bool
}

func (p *parser) parseLine(l string) error {
	switch {
	case l == "":
		return nil
	case strings.HasPrefix(l, "#"):
		return p.parseComment(l)
	}
	return p.parseSample(l)
}

func (p *parser) parseComment(l string) error {
	f := strings.Fields(l)
	if len(f) < 2 || f[0] != "#" || (f[1] != "HELP" && f[1] != "TYPE") {
		return nil // a plain comment
	}
	rest := strings.TrimLeft(strings.TrimPrefix(strings.TrimLeft(l[1:], " \t"), f[1]), " \t")
	name, text, _ := strings.Cut(rest, " ")
	if !validMetricName(name) {
		return fmt.Errorf("%s: bad metric name %q", f[1], name)
	}
	fam := p.byName[name]
	if fam == nil {
		fam = &Family{Name: name}
		p.byName[name] = fam
		p.fams = append(p.fams, fam)
	}
	if len(fam.Samples) > 0 {
		return fmt.Errorf("%s of %s after its samples", f[1], name)
	}
	if f[1] == "HELP" {
		if fam.hasHelp {
			return fmt.Errorf("second HELP for %s", name)
		}
		h, err := unescape(text, false)
		if err != nil {
			return fmt.Errorf("HELP of %s: %w", name, err)
		}
		fam.Help, fam.hasHelp = h, true
		return nil
	}
	if fam.hasType {
		return fmt.Errorf("second TYPE for %s", name)
	}
	switch text {
	case "counter", "gauge", "histogram", "summary", "untyped":
	default:
		return fmt.Errorf("TYPE of %s: unknown type %q", name, text)
	}
	fam.Type, fam.hasType = text, true
	return nil
}

func (p *parser) parseSample(l string) error {
	i := 0
	for i < len(l) && isNameChar(l[i], i == 0, true) {
		i++
	}
	name := l[:i]
	if name == "" {
		return fmt.Errorf("sample does not start with a metric name: %q", l)
	}
	labels := map[string]string{}
	rest := l[i:]
	if strings.HasPrefix(rest, "{") {
		var err error
		if labels, rest, err = parseLabels(rest[1:]); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	if !strings.HasPrefix(rest, " ") {
		return fmt.Errorf("%s: no space before the value", name)
	}
	fields := strings.Split(strings.TrimLeft(rest, " "), " ")
	if len(fields) != 1 {
		return fmt.Errorf("%s: want exactly one value and no timestamp, got %q", name, strings.TrimLeft(rest, " "))
	}
	v, err := parseValue(fields[0])
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	fam := p.familyOf(name)
	if fam == nil || !fam.hasType || !fam.hasHelp {
		return fmt.Errorf("sample %s before the HELP and TYPE of its family", name)
	}
	if p.cur != fam && len(fam.Samples) > 0 {
		return fmt.Errorf("samples of %s are not contiguous", fam.Name)
	}
	p.cur = fam
	key := seriesKey(name, labels)
	if p.series[key] {
		return fmt.Errorf("series %s repeated", key)
	}
	p.series[key] = true
	fam.Samples = append(fam.Samples, Sample{Name: name, Labels: labels, Value: v})
	return nil
}

// familyOf finds the declared family a sample name belongs to.
func (p *parser) familyOf(name string) *Family {
	if f := p.byName[name]; f != nil && f.Type != "histogram" {
		return f
	}
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suf)
		if !ok {
			continue
		}
		if f := p.byName[base]; f != nil && (f.Type == "histogram" || (f.Type == "summary" && suf != "_bucket")) {
			return f
		}
	}
	return nil
}

// parseLabels reads label pairs up to and including the closing brace and
// returns the rest of the line.
func parseLabels(s string) (map[string]string, string, error) {
	labels := map[string]string{}
	for {
		if strings.HasPrefix(s, "}") {
			return labels, s[1:], nil
		}
		i := 0
		for i < len(s) && isNameChar(s[i], i == 0, false) {
			i++
		}
		ln := s[:i]
		if ln == "" || strings.HasPrefix(ln, "__") {
			return nil, "", fmt.Errorf("bad label name at %q", s)
		}
		if _, dup := labels[ln]; dup {
			return nil, "", fmt.Errorf("label %s repeated", ln)
		}
		s = s[i:]
		if !strings.HasPrefix(s, `="`) {
			return nil, "", fmt.Errorf(`label %s: want ="`, ln)
		}
		s = s[2:]
		end := -1
		for j := 0; j < len(s); j++ {
			if s[j] == '\\' {
				j++
				continue
			}
			if s[j] == '"' {
				end = j
				break
			}
		}
		if end < 0 {
			return nil, "", fmt.Errorf("label %s: unterminated value", ln)
		}
		v, err := unescape(s[:end], true)
		if err != nil {
			return nil, "", fmt.Errorf("label %s: %w", ln, err)
		}
		labels[ln] = v
		s = s[end+1:]
		switch {
		case strings.HasPrefix(s, ","):
			s = s[1:]
		case strings.HasPrefix(s, "}"):
		default:
			return nil, "", fmt.Errorf("label %s: want , or } after the value", ln)
		}
	}
}

// unescape resolves \\ and \n (and \" in label values); any other escape is
// an error, as is invalid UTF-8.
func unescape(s string, label bool) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '"' && label {
			return "", fmt.Errorf("unescaped quote")
		}
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		if i+1 >= len(s) {
			return "", fmt.Errorf("trailing backslash")
		}
		i++
		switch s[i] {
		case '\\':
			b.WriteByte('\\')
		case 'n':
			b.WriteByte('\n')
		case '"':
			if !label {
				return "", fmt.Errorf(`escaped quote outside a label value`)
			}
			b.WriteByte('"')
		default:
			return "", fmt.Errorf("unknown escape \\%c", s[i])
		}
	}
	out := b.String()
	if !utf8.ValidString(out) {
		return "", fmt.Errorf("invalid UTF-8")
	}
	return out, nil
}

func parseValue(s string) (float64, error) {
	switch s {
	case "+Inf":
		return math.Inf(1), nil
	case "-Inf":
		return math.Inf(-1), nil
	case "NaN":
		return math.NaN(), nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || strings.ContainsAny(s, "_xXpP") || strings.EqualFold(s, "inf") || strings.EqualFold(s, "infinity") {
		return 0, fmt.Errorf("bad value %q", s)
	}
	return v, nil
}

func validMetricName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isNameChar(s[i], i == 0, true) {
			return false
		}
	}
	return true
}

// isNameChar: [a-zA-Z_] (and ':' in metric names) anywhere, digits after
// the first character.
func isNameChar(c byte, first, colon bool) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_':
		return true
	case c == ':':
		return colon
	case c >= '0' && c <= '9':
		return !first
	}
	return false
}

func seriesKey(name string, labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	b.WriteString(name)
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", k, labels[k])
	}
	b.WriteByte('}')
	return b.String()
}

// check applies the per-type rules once the family is complete.
func (f *Family) check() error {
	if !f.hasHelp || !f.hasType {
		return fmt.Errorf("HELP or TYPE missing")
	}
	switch f.Type {
	case "counter":
		for _, s := range f.Samples {
			if !(s.Value >= 0) {
				return fmt.Errorf("counter %s is %s", seriesKey(s.Name, s.Labels), formatFloat(s.Value))
			}
		}
	case "histogram":
		return f.checkHistogram()
	}
	return nil
}

func (f *Family) checkHistogram() error {
	type hist struct {
		les, counts    []float64
		sum, count     float64
		hasSum, hasCnt bool
	}
	groups := map[string]*hist{}
	var order []string
	for _, s := range f.Samples {
		rest := map[string]string{}
		for k, v := range s.Labels {
			if k != "le" {
				rest[k] = v
			}
		}
		key := seriesKey(f.Name, rest)
		h := groups[key]
		if h == nil {
			h = &hist{}
			groups[key] = h
			order = append(order, key)
		}
		switch s.Name {
		case f.Name + "_bucket":
			le, ok := s.Labels["le"]
			if !ok {
				return fmt.Errorf("%s: bucket without le", key)
			}
			b, err := parseValue(le)
			if err != nil || math.IsNaN(b) {
				return fmt.Errorf("%s: bad le %q", key, le)
			}
			h.les, h.counts = append(h.les, b), append(h.counts, s.Value)
		case f.Name + "_sum":
			h.sum, h.hasSum = s.Value, true
		case f.Name + "_count":
			h.count, h.hasCnt = s.Value, true
		}
		if _, ok := s.Labels["le"]; ok && s.Name != f.Name+"_bucket" {
			return fmt.Errorf("%s: le on %s", key, s.Name)
		}
	}
	if len(order) == 0 {
		return fmt.Errorf("histogram without samples")
	}
	for _, key := range order {
		h := groups[key]
		if !h.hasSum || !h.hasCnt || len(h.les) == 0 {
			return fmt.Errorf("%s: needs buckets, _sum and _count", key)
		}
		for i := range h.les {
			if i > 0 && !(h.les[i] > h.les[i-1]) {
				return fmt.Errorf("%s: le %s not above %s", key, formatFloat(h.les[i]), formatFloat(h.les[i-1]))
			}
			if i > 0 && h.counts[i] < h.counts[i-1] {
				return fmt.Errorf("%s: bucket le=%s count %s below the previous bucket's %s", key,
					formatFloat(h.les[i]), formatFloat(h.counts[i]), formatFloat(h.counts[i-1]))
			}
			if !(h.counts[i] >= 0) {
				return fmt.Errorf("%s: negative bucket count", key)
			}
		}
		last := len(h.les) - 1
		if !math.IsInf(h.les[last], 1) {
			return fmt.Errorf("%s: no +Inf bucket", key)
		}
		if h.counts[last] != h.count {
			return fmt.Errorf("%s: +Inf bucket %s != _count %s", key, formatFloat(h.counts[last]), formatFloat(h.count))
		}
		if !(h.count >= 0) {
			return fmt.Errorf("%s: negative _count", key)
		}
	}
	return nil
}
