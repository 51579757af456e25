package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/alecthomas/kong"
)

// testApp builds the real command-line model, as main does.
func testApp(t *testing.T) *kong.Application {
	t.Helper()
	var cli CLI
	k, err := kong.New(&cli, kong.Name("clusterrebootd"), kong.Vars{"version": "test"})
	if err != nil {
		t.Fatal(err)
	}
	return k.Model
}

// modelItem is one thing the docs must mention: a flag spelling or enum value
// of a command ("" for the global flags), or a command name.
type modelItem struct {
	cmd   string
	kind  string // "command", "flag", "short", "enum"
	value string // "check", "log-format", "h", "json"
}

// walkModel lists every visible command, flag spelling and enum value of
// the kong model directly (not through docModel, which is under test).
func walkModel(app *kong.Application) []modelItem {
	var out []modelItem
	addFlags := func(cmd string, flags []*kong.Flag) {
		for _, f := range flags {
			if f.Hidden {
				continue
			}
			out = append(out, modelItem{cmd, "flag", f.Name})
			if f.Tag.Negatable == "_" {
				out = append(out, modelItem{cmd, "flag", "no-" + f.Name})
			} else if f.Tag.Negatable != "" {
				out = append(out, modelItem{cmd, "flag", f.Tag.Negatable})
			}
			if f.Short != 0 {
				out = append(out, modelItem{cmd, "short", string(f.Short)})
			}
			for _, v := range strings.Split(f.Enum, ",") {
				if v = strings.TrimSpace(v); v != "" {
					out = append(out, modelItem{cmd, "enum", v})
				}
			}
		}
	}
	addFlags("", app.Flags)
	var walk func(n *kong.Node, prefix string)
	walk = func(n *kong.Node, prefix string) {
		for _, c := range n.Children {
			if c.Hidden || c.Type != kong.CommandNode {
				continue
			}
			name := strings.TrimSpace(prefix + " " + c.Name)
			out = append(out, modelItem{name, "command", name})
			addFlags(name, c.Flags)
			walk(c, name)
		}
	}
	walk(app.Node, "")
	return out
}

// manPlain undoes the troff escapes the generator uses, so that the
// checks below can look for plain "--log-format".
func manPlain(page string) string {
	return strings.NewReplacer(`\-`, "-", `\fB`, "", `\fR`, "", `\fI`, "", `\fP`, "", `\e`, `\`, `\&`, "", `\(dq`, `"`).Replace(page)
}

// manSections splits a plain man page into its .SH and .SS sections, keyed
// by the title without quotes ("GLOBAL OPTIONS", "check").
func manSections(plain string) map[string]string {
	out := map[string]string{}
	title := ""
	for _, line := range strings.Split(plain, "\n") {
		if strings.HasPrefix(line, ".SH ") || strings.HasPrefix(line, ".SS ") {
			title = strings.Trim(line[4:], `"`)
			out[title] += ""
			continue
		}
		out[title] += line + "\n"
	}
	return out
}

// missingFromMan returns what the man page does not document: every command
// needs its own .SS section, every flag of a command must be in that
// section, every global flag in GLOBAL OPTIONS.
func missingFromMan(items []modelItem, page string) []string {
	sec := manSections(manPlain(page))
	var miss []string
	for _, it := range items {
		where := it.cmd
		if where == "" {
			where = "GLOBAL OPTIONS"
		}
		body, ok := sec[where]
		switch {
		case it.kind == "command":
			if !ok {
				miss = append(miss, "command "+it.value)
			}
		case it.kind == "flag":
			// --[no-]once documents --once and --no-once.
			neg := "--" + regexp.QuoteMeta(it.value)
			if base, ok := strings.CutPrefix(it.value, "no-"); ok {
				neg = `--\[no-\]` + regexp.QuoteMeta(base)
			} else {
				neg = `--(\[no-\])?` + regexp.QuoteMeta(it.value)
			}
			if !regexp.MustCompile(`(^|[^-\w])(--` + regexp.QuoteMeta(it.value) + `|` + neg + `)($|[^-\w])`).MatchString(body) {
				miss = append(miss, where+": --"+it.value)
			}
		case it.kind == "short":
			if !strings.Contains(body, "-"+it.value+",") {
				miss = append(miss, where+": -"+it.value)
			}
		case it.kind == "enum":
			if !regexp.MustCompile(`\b` + regexp.QuoteMeta(it.value) + `\b`).MatchString(body) {
				miss = append(miss, where+": value "+it.value)
			}
		}
	}
	return miss
}

// missingFromScript returns the items a completion script does not
// contain, each in the shell's own spelling.
func missingFromScript(items []modelItem, script, shell string) []string {
	var miss []string
	for _, it := range items {
		var want string
		switch {
		case it.kind == "command" && shell == "fish":
			want = "-a '" + it.value + "'"
		case it.kind == "command":
			want = it.value
		case it.kind == "flag" && shell == "fish":
			want = "-l " + it.value
		case it.kind == "flag":
			want = "--" + it.value
		case it.kind == "short" && shell == "fish":
			want = "-s " + it.value
		case it.kind == "short":
			want = "-" + it.value
		case it.kind == "enum":
			want = it.value
		}
		if !regexp.MustCompile(`(^|[^-\w])` + regexp.QuoteMeta(want) + `($|[^-\w])`).MatchString(script) {
			miss = append(miss, it.cmd+": "+want)
		}
		// A command's flags must be offered in that command's context.
		if it.cmd != "" && it.kind == "flag" && shell == "fish" &&
			!strings.Contains(script, "-n '__fish_seen_subcommand_from "+it.cmd+"'"+" -l "+it.value+" ") &&
			!strings.Contains(script, "-n '__fish_seen_subcommand_from "+it.cmd+"'"+" -s ") {
			miss = append(miss, it.cmd+": context of -l "+it.value)
		}
	}
	return miss
}

func TestGenDocsCoverage(t *testing.T) {
	app := testApp(t)
	items := walkModel(app)
	if len(items) < 20 {
		t.Fatalf("model walk found only %d items", len(items))
	}
	m := docModel(app)
	outputs := map[string]string{
		"man":  genMan(m, "2026-01-02", "1.2.3"),
		"bash": genBash(m),
		"zsh":  genZsh(m),
		"fish": genFish(m),
	}
	for name, out := range outputs {
		var miss []string
		if name == "man" {
			miss = missingFromMan(items, out)
		} else {
			miss = missingFromScript(items, out, name)
		}
		for _, x := range miss {
			t.Errorf("%s does not document %s", name, x)
		}
		if strings.Contains(out, "gen-docs ") && !strings.Contains(out, "Generated by") {
			t.Errorf("%s mentions the hidden command gen-docs", name)
		}
		if strings.Contains(strings.ReplaceAll(out, `\-`, "-"), "'gen-docs'") || regexp.MustCompile(`\.SS "gen`).MatchString(out) {
			t.Errorf("%s lists the hidden command gen-docs", name)
		}
	}
}

// The checks above must notice a missing flag, command or value.
func TestGenDocsCoverageCanFail(t *testing.T) {
	app := testApp(t)
	items := walkModel(app)
	m := docModel(app)
	page := genMan(m, "", "x")
	cases := []struct{ name, drop, want string }{
		{"global flag", `\-\-log\-format`, "GLOBAL OPTIONS: --log-format"},
		{"command flag", `\-\-history`, "status: --history"},
		{"command", `.SS "forget"`, "command forget"},
		{"enum value", `journal`, "GLOBAL OPTIONS: value journal"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !strings.Contains(page, c.drop) {
				t.Fatalf("page has no %q", c.drop)
			}
			miss := missingFromMan(items, strings.ReplaceAll(page, c.drop, "XX"))
			if !strings.Contains(strings.Join(miss, "\n"), c.want) {
				t.Errorf("dropping %q: missing %v, want %q among them", c.drop, miss, c.want)
			}
		})
	}
	bash := genBash(m)
	miss := missingFromScript(items, strings.ReplaceAll(bash, "--no-once", "--x"), "bash")
	if !strings.Contains(strings.Join(miss, "\n"), "check: --no-once") {
		t.Errorf("bash without --no-once: missing %v", miss)
	}
	fish := genFish(m)
	miss = missingFromScript(items, strings.ReplaceAll(fish, "-l json", "-l jsn"), "fish")
	if !strings.Contains(strings.Join(miss, "\n"), "status: context of -l json") {
		t.Errorf("fish without status --json: missing %v", miss)
	}
}

func TestGenManTools(t *testing.T) {
	page := genMan(docModel(testApp(t)), "2026-01-02", "1.2.3")
	file := filepath.Join(t.TempDir(), "clusterrebootd.8")
	if err := os.WriteFile(file, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	ran := 0
	if _, err := exec.LookPath("groff"); err == nil {
		ran++
		out, err := exec.Command("groff", "-man", "-ww", "-z", file).CombinedOutput()
		if err != nil || len(out) > 0 {
			t.Errorf("groff -man -ww -z: %v\n%s", err, out)
		}
	}
	if _, err := exec.LookPath("man"); err == nil {
		ran++
		// As lintian runs it (manpage-has-errors-from-man).
		cmd := exec.Command("man", "--warnings", "-E", "UTF-8", "-l", "-Tutf8", "-Z", file)
		cmd.Env = append(os.Environ(), "MANWIDTH=80", "LC_ALL=C.UTF-8")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil || stderr.Len() > 0 {
			t.Errorf("man --warnings: %v\n%s", err, stderr.String())
		}
		cmd = exec.Command("man", "-l", file)
		cmd.Env = append(os.Environ(), "MANWIDTH=100", "MANPAGER=cat", "PAGER=cat")
		text, err := cmd.Output()
		if err != nil {
			t.Fatalf("man -l: %v", err)
		}
		for _, want := range []string{"clusterrebootd - coordinated", "--log-format=journal|json|text", "2026-01-02", "clusterrebootd 1.2.3", "EXIT STATUS", "systemctl(1)"} {
			if !strings.Contains(string(text), want) {
				t.Errorf("rendered page lacks %q", want)
			}
		}
	}
	if ran == 0 {
		t.Skip("neither groff nor man installed")
	}
}

func TestGenManStructure(t *testing.T) {
	page := genMan(docModel(testApp(t)), "2026-01-02", "1.2.3")
	sec := manSections(manPlain(page))
	for _, s := range []string{"NAME", "SYNOPSIS", "DESCRIPTION", "COMMANDS", "GLOBAL OPTIONS", "EXIT STATUS", "ENVIRONMENT", "FILES", "SEE ALSO"} {
		if _, ok := sec[s]; !ok {
			t.Errorf("no section %s", s)
		}
	}
	for code := 0; code <= 7; code++ {
		if !strings.Contains(sec["EXIT STATUS"], ".B "+string(rune('0'+code))+"\n") {
			t.Errorf("EXIT STATUS lacks %d", code)
		}
	}
	if !strings.Contains(sec["SYNOPSIS"], "pause --reason=REASON") || strings.Contains(sec["SYNOPSIS"], "[--reason") {
		t.Errorf("pause's required --reason is not shown as required:\n%s", sec["SYNOPSIS"])
	}
	if !strings.HasPrefix(page, `.\" Generated`) || !strings.Contains(page, `.TH CLUSTERREBOOTD 8 "2026\-01\-02" "clusterrebootd 1.2.3"`) {
		t.Errorf("title: %.200s", page)
	}
	for i, line := range strings.Split(page, "\n") {
		if strings.HasPrefix(line, "'") || (strings.HasPrefix(line, ".") && !regexp.MustCompile(`^\.(\\"|[A-Za-z]{1,2}\b)`).MatchString(line)) {
			t.Errorf("line %d would be taken for a request: %q", i+1, line)
		}
	}
}

func TestManDate(t *testing.T) {
	for _, c := range []struct {
		in, want string
		bad      bool
	}{
		{"", "", false},
		{"0", "1970-01-01", false},
		{"1764000000", "2025-11-24", false},
		{"-1", "", true},
		{"yesterday", "", true},
	} {
		got, err := manDate(c.in)
		if got != c.want || (err != nil) != c.bad {
			t.Errorf("manDate(%q) = %q, %v", c.in, got, err)
		}
	}
}

func TestGenScriptsSyntax(t *testing.T) {
	m := docModel(testApp(t))
	dir := t.TempDir()
	ran := 0
	for _, c := range []struct {
		shell, file, out string
		args             []string
	}{
		{"bash", "clusterrebootd.bash", genBash(m), []string{"-n"}},
		{"zsh", "_clusterrebootd", genZsh(m), []string{"-n"}},
		{"fish", "clusterrebootd.fish", genFish(m), []string{"--no-execute"}},
	} {
		path := filepath.Join(dir, c.file)
		if err := os.WriteFile(path, []byte(c.out), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := exec.LookPath(c.shell); err != nil {
			t.Logf("%s not installed: syntax not checked", c.shell)
			continue
		}
		ran++
		out, err := exec.Command(c.shell, append(c.args, path)...).CombinedOutput()
		if err != nil || len(out) > 0 {
			t.Errorf("%s %v: %v\n%s", c.shell, c.args, err, out)
		}
	}
	if ran == 0 {
		t.Skip("no shell to check with")
	}
}

// The bash script must actually complete: source it and ask.
func TestGenBashCompletes(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not installed")
	}
	script := filepath.Join(t.TempDir(), "c.bash")
	if err := os.WriteFile(script, []byte(genBash(docModel(testApp(t)))), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		words []string // COMP_WORDS; the last one is being completed
		want  []string
		not   []string
	}{
		{[]string{"clusterrebootd", "st"}, []string{"status"}, []string{"simulate"}},
		{[]string{"clusterrebootd", ""}, []string{"check", "set-max", "validate-config", "forget"}, []string{"gen-docs"}},
		{[]string{"clusterrebootd", "--log-format", "="}, []string{"journal", "json", "text"}, nil},
		{[]string{"clusterrebootd", "--log-format", "=", "j"}, []string{"journal", "json"}, []string{"text"}},
		{[]string{"clusterrebootd", "--log-level", "w"}, []string{"warn"}, []string{"info"}},
		{[]string{"clusterrebootd", "--config", "/etc/x.toml", "check", "--"}, []string{"--once", "--no-once", "--dry-run", "--help"}, []string{"--json"}},
		{[]string{"clusterrebootd", "--log-level", "=", "debug", "status", "--j"}, []string{"--json"}, nil},
		{[]string{"clusterrebootd", "-"}, []string{"-h", "--help", "--version"}, []string{"--once"}},
		{[]string{"clusterrebootd", "pause", "--reason", ""}, nil, []string{"--reason", "check"}},
	}
	for _, c := range cases {
		quoted := make([]string, len(c.words))
		for i, w := range c.words {
			quoted[i] = shQuote(w)
		}
		prog := ". " + shQuote(script) + "\nCOMP_WORDS=(" + strings.Join(quoted, " ") + ")\nCOMP_CWORD=" +
			string(rune('0'+len(c.words)-1)) + "\n_clusterrebootd\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n"
		out, err := exec.Command("bash", "-c", prog).CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", c.words, err, out)
		}
		got := map[string]bool{}
		for _, w := range strings.Fields(string(out)) {
			got[w] = true
		}
		for _, w := range c.want {
			if !got[w] {
				t.Errorf("%v: no %q in %q", c.words, w, out)
			}
		}
		for _, w := range c.not {
			if got[w] {
				t.Errorf("%v: unexpected %q in %q", c.words, w, out)
			}
		}
	}
}

// gen-docs through the real command line: deterministic, dated by
// SOURCE_DATE_EPOCH, hidden from --help, and a bad epoch is exit 2.
func TestGenDocsCommand(t *testing.T) {
	runOut := func(args ...string) (string, int) {
		t.Helper()
		f, err := os.CreateTemp(t.TempDir(), "out")
		if err != nil {
			t.Fatal(err)
		}
		saved, savedErr := os.Stdout, os.Stderr
		os.Stdout, os.Stderr = f, f
		code := run(args)
		os.Stdout, os.Stderr = saved, savedErr
		b, err := os.ReadFile(f.Name())
		if err != nil {
			t.Fatal(err)
		}
		return string(b), code
	}
	t.Setenv("SOURCE_DATE_EPOCH", "1764000000")
	for _, format := range []string{"man", "bash", "zsh", "fish"} {
		a, code := runOut("gen-docs", format)
		b, _ := runOut("gen-docs", format)
		if code != 0 || a == "" || a != b {
			t.Errorf("gen-docs %s: exit %d, %d bytes, deterministic %v", format, code, len(a), a == b)
		}
	}
	page, _ := runOut("gen-docs", "man")
	if !strings.Contains(page, `"2025\-11\-24"`) {
		t.Errorf("man page not dated by SOURCE_DATE_EPOCH: %.300s", page)
	}
	help, _ := runOut("--help")
	if strings.Contains(help, "gen-docs") || !strings.Contains(help, "validate-config") {
		t.Errorf("--help shows the hidden command or misses a real one:\n%s", help)
	}
	t.Setenv("SOURCE_DATE_EPOCH", "soon")
	if _, code := runOut("gen-docs", "man"); code != 2 {
		t.Errorf("bad SOURCE_DATE_EPOCH: exit %d, want 2", code)
	}
	if _, code := runOut("gen-docs", "pdf"); code != 2 {
		t.Errorf("unknown format: exit %d, want 2", code)
	}
}

// The fish script must complete too (when fish is installed).
func TestGenFishCompletes(t *testing.T) {
	if _, err := exec.LookPath("fish"); err != nil {
		t.Skip("fish not installed")
	}
	script := filepath.Join(t.TempDir(), "c.fish")
	if err := os.WriteFile(script, []byte(genFish(docModel(testApp(t)))), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		line string
		want []string
		not  []string
	}{
		{"clusterrebootd st", []string{"status"}, []string{"simulate"}},
		{"clusterrebootd --log-format=", []string{"--log-format=journal", "--log-format=text"}, nil},
		{"clusterrebootd check --", []string{"--once", "--no-once", "--dry-run"}, []string{"--json"}},
		{"clusterrebootd status --", []string{"--json", "--history", "--config"}, []string{"--once"}},
	}
	for _, c := range cases {
		out, err := exec.Command("fish", "--no-config", "-c", "source "+fishQuote(script)+"; complete -C "+fishQuote(c.line)).CombinedOutput()
		if err != nil {
			t.Fatalf("%q: %v\n%s", c.line, err, out)
		}
		got := map[string]bool{}
		for _, l := range strings.Split(string(out), "\n") {
			w, _, _ := strings.Cut(l, "\t")
			got[w] = true
		}
		for _, w := range c.want {
			if !got[w] {
				t.Errorf("%q: no %q in\n%s", c.line, w, out)
			}
		}
		for _, w := range c.not {
			if got[w] {
				t.Errorf("%q: unexpected %q", c.line, w)
			}
		}
	}
}
