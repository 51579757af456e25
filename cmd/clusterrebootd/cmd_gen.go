package main

import (
	"fmt"
	"io"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kong"
)

// GenDocsCmd writes the manual page clusterrebootd(8) or a shell completion
// script, generated from the kong model of the command line, so that a new
// command or flag is documented and completed by the next build
// (hack/package/build.sh runs it). Hidden: it is a build step, not an
// operator command.
//
// The output is deterministic: the only date is the one given by
// SOURCE_DATE_EPOCH (none when it is unset), so packages stay reproducible.
type GenDocsCmd struct {
	Format string `arg:"" enum:"man,bash,zsh,fish" help:"What to write: man (troff source of clusterrebootd(8)), bash, zsh or fish (completion script)."`
}

func (g *GenDocsCmd) Run(e *Env, kctx *kong.Context) error {
	date, err := manDate(os.Getenv("SOURCE_DATE_EPOCH"))
	if err != nil {
		return usageError("gen-docs: %v", err)
	}
	m := docModel(kctx.Model)
	var out string
	switch g.Format {
	case "man":
		out = genMan(m, date, version)
	case "bash":
		out = genBash(m)
	case "zsh":
		out = genZsh(m)
	case "fish":
		out = genFish(m)
	default: // kong's enum check makes this unreachable
		return usageError("gen-docs: unknown format %q", g.Format)
	}
	_, err = io.WriteString(e.Stdout, out)
	return err
}

// manDate turns SOURCE_DATE_EPOCH into the man page's date (UTC,
// YYYY-MM-DD); "" when it is unset.
func manDate(epoch string) (string, error) {
	if epoch == "" {
		return "", nil
	}
	sec, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil || sec < 0 {
		return "", fmt.Errorf("SOURCE_DATE_EPOCH=%q is not a Unix time", epoch)
	}
	return time.Unix(sec, 0).UTC().Format("2006-01-02"), nil
}

// docFlag is a flag as the generators see it.
type docFlag struct {
	Long    string   // "log-format"
	Short   rune     // 'h' or 0
	Neg     string   // "no-once" for a negatable flag, else ""
	Value   string   // placeholder of the value ("FILE"); "" for a boolean flag
	Help    string   // full help text
	Default string   // "" when none worth showing
	Enum    []string // allowed values (without the empty one)
	File    bool     // the value is a path: complete file names
	Req     bool     // required
}

// docArg is a positional argument.
type docArg struct {
	Name     string // "N", "NODE"
	Help     string
	Optional bool
}

// docCmd is a visible command (hidden ones are left out everywhere).
type docCmd struct {
	Name  string // "set-max"; nested commands are joined with spaces
	Help  string
	Flags []docFlag
	Args  []docArg
}

// docApp is the whole visible command line.
type docApp struct {
	Name        string
	Description string
	Global      []docFlag
	Commands    []docCmd
}

// docModel extracts the visible commands and flags from the kong model, in
// the model's (declaration) order.
func docModel(app *kong.Application) docApp {
	m := docApp{Name: app.Name, Description: app.Help}
	m.Global = docFlags(app.Flags)
	var walk func(n *kong.Node, prefix string)
	walk = func(n *kong.Node, prefix string) {
		for _, c := range n.Children {
			if c.Hidden || c.Type != kong.CommandNode {
				continue
			}
			name := strings.TrimSpace(prefix + " " + c.Name)
			if len(c.Children) > 0 {
				walk(c, name)
				continue
			}
			dc := docCmd{Name: name, Help: c.Help, Flags: docFlags(c.Flags)}
			for _, p := range c.Positional {
				dc.Args = append(dc.Args, docArg{Name: strings.ToUpper(p.Name), Help: p.Help, Optional: !p.Required})
			}
			m.Commands = append(m.Commands, dc)
		}
	}
	walk(app.Node, "")
	return m
}

func docFlags(flags []*kong.Flag) []docFlag {
	var out []docFlag
	for _, f := range flags {
		if f.Hidden {
			continue
		}
		d := docFlag{Long: f.Name, Short: f.Short, Help: f.Help, Req: f.Required}
		switch f.Tag.Negatable {
		case "":
		case "_":
			d.Neg = "no-" + f.Name
		default:
			d.Neg = f.Tag.Negatable
		}
		if f.Enum != "" {
			for _, v := range f.EnumSlice() {
				if v != "" {
					d.Enum = append(d.Enum, v)
				}
			}
		}
		if !f.IsBool() && !f.IsCounter() {
			switch {
			case len(d.Enum) > 0:
				d.Value = strings.Join(d.Enum, "|")
			case f.PlaceHolder != "":
				d.Value = f.PlaceHolder
			case f.Target.Type() == reflect.TypeOf(time.Duration(0)):
				d.Value = "DURATION"
			default:
				d.Value = strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
			}
			if f.HasDefault && f.Default != "" {
				d.Default = f.Default
			}
		} else if f.HasDefault && f.Default == "true" {
			d.Default = "true"
		}
		switch f.Tag.Type {
		case "path", "existingfile", "existingdir", "filecontent":
			d.File = true
		}
		out = append(out, d)
	}
	return out
}

// names returns every spelling of the flag: --long, --no-long, -s.
func (f docFlag) names() []string {
	out := []string{"--" + f.Long}
	if f.Neg != "" {
		out = append(out, "--"+f.Neg)
	}
	if f.Short != 0 {
		out = append(out, "-"+string(f.Short))
	}
	return out
}

// summary is the help text's first sentence without its full stop, for the
// one-line descriptions of completion menus.
func summary(help string) string {
	s := strings.Join(strings.Fields(help), " ")
	for i := 0; i+1 < len(s); i++ {
		if s[i] == '.' && s[i+1] == ' ' {
			s = s[:i+1]
			break
		}
	}
	return strings.TrimSuffix(s, ".")
}

// ---------------------------------------------------------------- bash

func genBash(m docApp) string {
	var b strings.Builder
	fn := "_" + shellIdent(m.Name)
	fmt.Fprintf(&b, "# bash completion for %s%s\n", m.Name, "                    -*- shell-script -*-")
	fmt.Fprintf(&b, "# Generated by `%s gen-docs bash` from the command-line model; do not edit.\n\n", m.Name)
	fmt.Fprintf(&b, "%s() {\n", fn)
	b.WriteString("\tlocal cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}\n")
	b.WriteString("\tlocal cmd= flag= i word\n")
	b.WriteString("\t# The command is the first word that is not a flag or a flag's value.\n")
	b.WriteString("\tfor ((i = 1; i < COMP_CWORD; i++)); do\n")
	b.WriteString("\t\tword=${COMP_WORDS[i]}\n")
	b.WriteString("\t\tcase $word in\n")
	b.WriteString("\t\t=) ((i++)) ;;\n")
	if v := valueFlagPattern(m.Global); v != "" {
		fmt.Fprintf(&b, "\t\t%s) [[ ${COMP_WORDS[i+1]-} == = ]] || ((i++)) ;;\n", v)
	}
	b.WriteString("\t\t-*) ;;\n")
	b.WriteString("\t\t*)\n\t\t\tcmd=$word\n\t\t\tbreak\n\t\t\t;;\n")
	b.WriteString("\t\tesac\n\tdone\n\n")
	b.WriteString("\t# The flag whose value is being completed, if any: --flag VALUE or --flag=VALUE.\n")
	b.WriteString("\tif [[ $cur == = ]]; then\n\t\tflag=$prev\n\t\tcur=\n")
	b.WriteString("\telif [[ $prev == = ]] && ((COMP_CWORD >= 2)); then\n\t\tflag=${COMP_WORDS[COMP_CWORD-2]}\n")
	b.WriteString("\telif [[ $prev == -* ]]; then\n\t\tflag=$prev\n\tfi\n")
	b.WriteString("\tcase $cmd,$flag in\n")
	valueCase := func(cmd string, f docFlag) {
		if f.Value == "" {
			return
		}
		switch {
		case len(f.Enum) > 0:
			fmt.Fprintf(&b, "\t%s,--%s)\n\t\tCOMPREPLY=($(compgen -W %s -- \"$cur\"))\n\t\treturn\n\t\t;;\n",
				cmd, f.Long, shQuote(strings.Join(f.Enum, " ")))
		case f.File:
			fmt.Fprintf(&b, "\t%s,--%s)\n\t\tcompopt -o filenames 2>/dev/null\n\t\tCOMPREPLY=($(compgen -f -- \"$cur\"))\n\t\treturn\n\t\t;;\n",
				cmd, f.Long)
		default:
			fmt.Fprintf(&b, "\t%s,--%s)\n\t\treturn # %s: free text\n\t\t;;\n", cmd, f.Long, f.Value)
		}
	}
	for _, f := range m.Global {
		valueCase("*", f)
	}
	for _, c := range m.Commands {
		for _, f := range c.Flags {
			valueCase(shQuote(c.Name), f)
		}
	}
	b.WriteString("\tesac\n\n")
	fmt.Fprintf(&b, "\tlocal global=%s\n", shQuote(strings.Join(flagWords(m.Global), " ")))
	b.WriteString("\tif [[ -z $cmd ]]; then\n")
	b.WriteString("\t\tif [[ $cur == -* ]]; then\n")
	b.WriteString("\t\t\tCOMPREPLY=($(compgen -W \"$global\" -- \"$cur\"))\n")
	b.WriteString("\t\telse\n")
	names := make([]string, len(m.Commands))
	for i, c := range m.Commands {
		names[i] = c.Name
	}
	fmt.Fprintf(&b, "\t\t\tCOMPREPLY=($(compgen -W %s -- \"$cur\"))\n", shQuote(strings.Join(names, " ")))
	b.WriteString("\t\tfi\n\t\treturn\n\tfi\n")
	b.WriteString("\tlocal flags=\n\tcase $cmd in\n")
	for _, c := range m.Commands {
		fmt.Fprintf(&b, "\t%s) flags=%s ;;\n", shQuote(c.Name), shQuote(strings.Join(flagWords(c.Flags), " ")))
	}
	b.WriteString("\tesac\n")
	b.WriteString("\tif [[ $cur == -* ]]; then\n")
	b.WriteString("\t\tCOMPREPLY=($(compgen -W \"$global $flags\" -- \"$cur\"))\n")
	b.WriteString("\tfi\n")
	b.WriteString("}\n\n")
	fmt.Fprintf(&b, "complete -F %s %s\n", fn, m.Name)
	return b.String()
}

// valueFlagPattern is a bash case pattern matching the flags that take a
// value in the next word ("--config|--log-format"), "" if none does.
func valueFlagPattern(flags []docFlag) string {
	var out []string
	for _, f := range flags {
		if f.Value != "" {
			out = append(out, "--"+f.Long)
			if f.Short != 0 {
				out = append(out, "-"+string(f.Short))
			}
		}
	}
	return strings.Join(out, "|")
}

// flagWords lists every spelling of flags.
func flagWords(flags []docFlag) []string {
	var out []string
	for _, f := range flags {
		out = append(out, f.names()...)
	}
	return out
}

// shQuote quotes s for bash and zsh: single quotes, a ' written as '\”.
func shQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// shellIdent makes name usable in a shell function name.
func shellIdent(name string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
			return r
		}
		return '_'
	}, name)
}

// ---------------------------------------------------------------- zsh

func genZsh(m docApp) string {
	var b strings.Builder
	fn := "_" + shellIdent(m.Name)
	fmt.Fprintf(&b, "#compdef %s\n", m.Name)
	fmt.Fprintf(&b, "# zsh completion for %s.\n", m.Name)
	fmt.Fprintf(&b, "# Generated by `%s gen-docs zsh` from the command-line model; do not edit.\n\n", m.Name)
	fmt.Fprintf(&b, "%s() {\n", fn)
	b.WriteString("\tlocal curcontext=$curcontext state state_descr line ret=1\n")
	b.WriteString("\ttypeset -A opt_args\n")
	b.WriteString("\tlocal -a global commands\n")
	b.WriteString("\tglobal=(\n")
	for _, f := range m.Global {
		for _, spec := range zshSpecs(f) {
			fmt.Fprintf(&b, "\t\t%s\n", spec)
		}
	}
	b.WriteString("\t)\n")
	b.WriteString("\tcommands=(\n")
	for _, c := range m.Commands {
		fmt.Fprintf(&b, "\t\t%s\n", shQuote(strings.ReplaceAll(c.Name, ":", `\:`)+":"+summary(c.Help)))
	}
	b.WriteString("\t)\n")
	b.WriteString("\t_arguments -C -s $global ': :->command' '*:: :->args' && ret=0\n")
	b.WriteString("\tcase $state in\n")
	b.WriteString("\tcommand)\n")
	fmt.Fprintf(&b, "\t\t_describe -t commands %s commands && ret=0\n", shQuote(m.Name+" command"))
	b.WriteString("\t\t;;\n")
	b.WriteString("\targs)\n")
	b.WriteString("\t\tcurcontext=${curcontext%:*:*}:" + m.Name + "-$line[1]:\n")
	b.WriteString("\t\tcase $line[1] in\n")
	for _, c := range m.Commands {
		fmt.Fprintf(&b, "\t\t%s)\n\t\t\t_arguments -s $global", shQuote(c.Name))
		for _, f := range c.Flags {
			for _, spec := range zshSpecs(f) {
				fmt.Fprintf(&b, " \\\n\t\t\t\t%s", spec)
			}
		}
		for _, a := range c.Args {
			colon := ":"
			if a.Optional {
				colon = "::"
			}
			fmt.Fprintf(&b, " \\\n\t\t\t\t%s", shQuote(colon+zshMessage(a.Name+": "+summary(a.Help))+": "))
		}
		b.WriteString(" && ret=0\n\t\t\t;;\n")
	}
	b.WriteString("\t\tesac\n\t\t;;\n\tesac\n\treturn ret\n}\n\n")
	fmt.Fprintf(&b, "%s \"$@\"\n", fn)
	return b.String()
}

// zshSpecs returns the _arguments specs of one flag, already quoted.
func zshSpecs(f docFlag) []string {
	desc := "[" + zshDesc(summary(f.Help)) + "]"
	action := ""
	if f.Value != "" {
		switch {
		case len(f.Enum) > 0:
			action = ":" + zshMessage(f.Value) + ":(" + strings.Join(f.Enum, " ") + ")"
		case f.File:
			action = ":" + zshMessage(f.Value) + ":_files"
		default:
			action = ":" + zshMessage(f.Value) + ": "
		}
	}
	eq := ""
	if f.Value != "" {
		eq = "="
	}
	var out []string
	excl := ""
	if f.Neg != "" {
		excl = "(--" + f.Long + " --" + f.Neg + ")"
	}
	if f.Short != 0 {
		excl = "(-" + string(f.Short) + " --" + f.Long + ")"
		out = append(out, shQuote(excl+"-"+string(f.Short)+desc+action))
	}
	out = append(out, shQuote(excl+"--"+f.Long+eq+desc+action))
	if f.Neg != "" {
		out = append(out, shQuote(excl+"--"+f.Neg+desc))
	}
	return out
}

// zshDesc escapes the characters _arguments treats specially inside [...].
func zshDesc(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `[`, `\[`, `]`, `\]`, `:`, `\:`)
	return r.Replace(s)
}

// zshMessage escapes a message of an _arguments action (between colons).
func zshMessage(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `:`, `\:`, `|`, ` or `)
	return r.Replace(s)
}

// ---------------------------------------------------------------- fish

func genFish(m docApp) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# fish completion for %s.\n", m.Name)
	fmt.Fprintf(&b, "# Generated by `%s gen-docs fish` from the command-line model; do not edit.\n\n", m.Name)
	names := make([]string, len(m.Commands))
	for i, c := range m.Commands {
		names[i] = c.Name
	}
	all := strings.Join(names, " ")
	c := "complete -c " + m.Name
	fmt.Fprintf(&b, "%s -f\n\n# Commands\n", c)
	for _, cmd := range m.Commands {
		fmt.Fprintf(&b, "%s -n %s -a %s -d %s\n", c, fishQuote("not __fish_seen_subcommand_from "+all),
			fishQuote(cmd.Name), fishQuote(summary(cmd.Help)))
	}
	b.WriteString("\n# Global flags\n")
	for _, f := range m.Global {
		b.WriteString(fishFlag(c, "", f))
	}
	for _, cmd := range m.Commands {
		if len(cmd.Flags) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n# %s\n", cmd.Name)
		for _, f := range cmd.Flags {
			b.WriteString(fishFlag(c, "__fish_seen_subcommand_from "+cmd.Name, f))
		}
	}
	return b.String()
}

func fishFlag(c, cond string, f docFlag) string {
	var b strings.Builder
	line := func(long string, value bool) {
		b.WriteString(c)
		if cond != "" {
			b.WriteString(" -n " + fishQuote(cond))
		}
		if f.Short != 0 && long == f.Long {
			b.WriteString(" -s " + string(f.Short))
		}
		b.WriteString(" -l " + long)
		if value {
			switch {
			case len(f.Enum) > 0:
				b.WriteString(" -x -a " + fishQuote(strings.Join(f.Enum, " ")))
			case f.File:
				b.WriteString(" -r -F")
			default:
				b.WriteString(" -x")
			}
		}
		b.WriteString(" -d " + fishQuote(summary(f.Help)) + "\n")
	}
	line(f.Long, f.Value != "")
	if f.Neg != "" {
		line(f.Neg, false)
	}
	return b.String()
}

// fishQuote quotes s for fish: single quotes with \ and ' escaped.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
