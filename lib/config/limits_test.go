package config

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestNestingLimits(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		line      int
		msg       string
	}{
		{"deep arrays", "cluster = \"a\"\nx = " + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + "\n", 2, "nested too deeply"},
		{"deep inline tables", "\n\ny = " + strings.Repeat("{a=", 10000) + "1" + strings.Repeat("}", 10000) + "\n", 3, "nested too deeply"},
		{"long dotted key", strings.Repeat("a.", 100000) + "b = 1\n", 1, "too many dotted parts"},
		{"long header", "# x\n[" + strings.Repeat("a.", 100000) + "b]\n", 2, "too many dotted parts"},
		{"after multi-line string", "s = \"\"\"\n[[[[\n\"\"\"\nt = '''\n{{{\n'''\n" + strings.Repeat("[", 40), 7, "nested too deeply"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err, path := loadString(t, tc.doc)
			expectProblems(t, filepath.Dir(path), err, []want{{"config.toml", tc.line, "", tc.msg}})
		})
	}
}

func TestCheckNestingIgnoresStringsAndComments(t *testing.T) {
	for _, doc := range []string{
		"a = \"" + strings.Repeat("[{.", 100) + "\"\n",
		"a = '" + strings.Repeat("[{.", 100) + "'\n",
		"# " + strings.Repeat("[{.", 100) + "\n",
		"a = \"\"\"\n" + strings.Repeat("[{.\\\n", 100) + "\"\"\"\n",
		"a = \"esc \\\" " + strings.Repeat("[", 100) + "\"\n",
		"a = [1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5, 8.5, 9.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5, 8.5, 9.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5, 8.5, 9.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5]\n",
		strings.Repeat("[", 32) + strings.Repeat("]", 32) + strings.Repeat("]", 10) + "\n",
		"a = \"unterminated\n" + strings.Repeat("]", 40),
		"a = '''never closed " + strings.Repeat("[", 40),
	} {
		if line, msg := checkNesting([]byte(doc)); msg != "" {
			t.Errorf("%.40q: line %d: %s", doc, line, msg)
		}
	}
	if line, msg := checkNesting([]byte("a = \"x\n" + strings.Repeat("[", 33))); msg == "" || line != 2 {
		t.Errorf("unterminated string hides the next line: %d %q", line, msg)
	}
}

func TestTooManyProblems(t *testing.T) {
	var b strings.Builder
	for i := 0; i < 500; i++ {
		b.WriteString("unknown_" + strings.Repeat("x", i%3) + string(rune('a'+i%26)) + string(rune('a'+i/26)) + " = 1\n")
	}
	_, err, _ := loadString(t, b.String())
	ps := problems(t, err)
	if len(ps) != maxProblems+1 || !strings.Contains(ps[maxProblems].Msg, "400 more problems not shown") {
		t.Errorf("%d problems, last %+v", len(ps), ps[len(ps)-1])
	}
	if ps[0].Line != 1 || ps[maxProblems-1].Line != maxProblems {
		t.Errorf("not the first problems by line: %+v ... %+v", ps[0], ps[maxProblems-1])
	}
}

func TestDottedKeyPrefixLines(t *testing.T) {
	_, err, path := loadString(t, "\nbogus.deeper.key = 1\n[lock]\nnot.here = 2\n")
	expectProblems(t, filepath.Dir(path), err, []want{
		{"config.toml", 2, "bogus", "unknown key"},
		{"config.toml", 4, "lock.not", "unknown key"},
	})
}
