package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"syscall"

	"github.com/BurntSushi/toml"
)

// Source names the files Load reads.
type Source struct {
	// MainFile must exist.
	MainFile string
	// DropInDirs are searched for *.toml drop-ins; missing directories are
	// fine. A file name in a later directory masks the same name in an
	// earlier one.
	DropInDirs []string
}

// Default locations (DESIGN §5).
const (
	DefaultMainFile = "/etc/clusterrebootd/config.toml"
)

// DefaultDropInDirs are the drop-in directories of DefaultSource, lowest
// precedence first.
var DefaultDropInDirs = []string{
	"/usr/lib/clusterrebootd/config.d",
	"/etc/clusterrebootd/config.d",
	"/run/clusterrebootd/config.d",
}

// DefaultSource is /etc/clusterrebootd/config.toml with the drop-ins of
// /usr/lib, /etc and /run (in that order of precedence, lowest first).
func DefaultSource() Source {
	return Source{
		MainFile:   DefaultMainFile,
		DropInDirs: append([]string(nil), DefaultDropInDirs...),
	}
}

// SourceFor is what --config path means: that file plus only the config.d
// directory next to it, so that tests and sandboxes never read the host's
// drop-ins.
func SourceFor(path string) Source {
	return Source{
		MainFile:   path,
		DropInDirs: []string{filepath.Join(filepath.Dir(path), "config.d")},
	}
}

// Options carries what Load needs from its caller.
type Options struct {
	// Hostname gives the default node_name: its short form, up to the first '.'.
	Hostname string
	// ValidateWindow, when not nil, checks the syntax of every entry of
	// windows.allow and windows.deny (the parser lives in lib/gate, which
	// config must not import).
	ValidateWindow func(spec string) error
}

// Load reads src.MainFile and then every drop-in, overlays them onto
// Default() and validates the result.
//
// Merge rules: drop-ins are the *.toml files (names starting with '.' are
// ignored) of all of src.DropInDirs; a name in a later directory masks the
// same name in an earlier one (a symlink to /dev/null or an empty file masks
// without setting anything); the survivors are applied in lexical order of
// their file names, after the main file. A later file wins per key. Arrays,
// including [[detector]], are values like any other: a later file that sets
// one replaces the earlier list entirely.
//
// Validation: syntax errors, unknown keys, wrong types and bad durations are
// reported for every file; value ranges and combinations are checked once
// on the merged result and attributed to the file (and line) that last set
// one of the keys involved (skipped when a file could not be read or
// parsed at all). Load reports every problem it finds, not only the first
// (at most 100), as an *Error; errors.Is(err, ErrInvalid) holds for every error Load
// returns. Load only reads files; it never creates or changes any.
func Load(src Source, opts Options) (*Config, error) {
	l := &loader{
		opts:   opts,
		main:   src.MainFile,
		origin: map[string]int{},
		bad:    map[string]bool{},
	}
	cfg := Default()
	cfg.Detectors = nil
	if src.MainFile == "" {
		l.add(Problem{Msg: "no configuration file given"})
		return nil, l.err()
	}
	l.loadFile(src.MainFile, &cfg)
	for _, p := range l.dropIns(src.DropInDirs) {
		l.loadFile(p, &cfg)
	}
	if l.fatal {
		// A file could not be read or parsed: its keys are missing, so a
		// check of the merged result would only add noise.
		return nil, l.err()
	}
	l.finish(&cfg)
	l.validate(&cfg)
	if len(l.probs) > 0 {
		return nil, l.err()
	}
	for _, f := range l.files {
		cfg.Files = append(cfg.Files, f.name)
	}
	return &cfg, nil
}

// fileCtx is one file that was read.
type fileCtx struct {
	idx   int
	name  string
	lines map[string]int
}

type loader struct {
	opts   Options
	main   string
	files  []*fileCtx
	probs  []Problem
	origin map[string]int  // key → index in files of the file that last set it
	bad    map[string]bool // keys whose value in some file was rejected
	fatal  bool            // a file could not be read or parsed

	nodeFromHost bool // node_name was taken from Options.Hostname
}

// add records a problem. A key is shortened like a value (a hostile file
// may use a megabyte-long key name).
func (l *loader) add(p Problem) {
	p.Key = clip(p.Key)
	l.probs = append(l.probs, p)
}

// setOrigin records that file f set key (successfully): problems of the
// merged result involving key are reported there, and a rejected value of
// key in an earlier file no longer stops key from being checked.
func (l *loader) setOrigin(key string, f *fileCtx) {
	l.origin[key] = f.idx
	delete(l.bad, key)
}

// clearList forgets what earlier files set inside the list key (elements,
// keys of detectors): a later file replaced the whole list.
func (l *loader) clearList(key string) {
	for k := range l.origin {
		if strings.HasPrefix(k, key+"[") {
			delete(l.origin, k)
		}
	}
	for k := range l.bad {
		if strings.HasPrefix(k, key+"[") {
			delete(l.bad, k)
		}
	}
}

// fileProblem reports a problem with key as written in file f.
func (l *loader) fileProblem(f *fileCtx, key string, markBad bool, format string, args ...any) {
	if markBad {
		l.bad[key] = true
	}
	l.add(Problem{File: f.name, Line: lineOf(f.lines, key), Key: key, Msg: fmt.Sprintf(format, args...)})
}

// lineOf finds the line of key; for an array element or a key of one that
// was not written itself, it falls back to the element or the array.
func lineOf(lines map[string]int, key string) int {
	for {
		if n, ok := lines[key]; ok {
			return n
		}
		var parent string
		if strings.HasSuffix(key, "]") {
			i := strings.LastIndexByte(key, '[')
			if i <= 0 {
				return 0
			}
			parent = key[:i]
		} else {
			i := strings.LastIndexByte(key, '.')
			if i <= 0 || key[i-1] != ']' {
				return 0
			}
			parent = key[:i]
		}
		key = parent
	}
}

func (l *loader) err() error {
	idx := map[string]int{}
	for _, f := range l.files {
		idx[f.name] = f.idx
	}
	rank := func(p Problem) int {
		if i, ok := idx[p.File]; ok {
			return i
		}
		if p.File == "" {
			return len(l.files) + 1
		}
		return len(l.files)
	}
	sort.SliceStable(l.probs, func(i, j int) bool {
		a, b := l.probs[i], l.probs[j]
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra < rb
		}
		return a.Line < b.Line
	})
	out := l.probs[:0]
	seen := map[Problem]bool{}
	for _, p := range l.probs {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	if n := len(out); n > maxProblems {
		last := out[maxProblems-1]
		out = append(out[:maxProblems], Problem{File: last.File, Msg: fmt.Sprintf("%d more problems not shown", n-maxProblems)})
	}
	return &Error{Problems: out}
}

// dropIns lists the drop-in files of dirs after masking, in lexical order of
// their names.
func (l *loader) dropIns(dirs []string) []string {
	chosen := map[string]string{}
	for _, dir := range dirs {
		entries, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			l.fatal = true
			l.add(Problem{File: dir, Msg: "cannot read drop-in directory: " + errText(err)})
			continue
		}
		for _, e := range entries {
			name := e.Name()
			if strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".toml") {
				continue
			}
			chosen[name] = filepath.Join(dir, name)
		}
	}
	names := make([]string, 0, len(chosen))
	for n := range chosen {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = chosen[n]
	}
	return out
}

// loadFile reads, parses and applies one file onto cfg.
func (l *loader) loadFile(path string, cfg *Config) {
	data, err := readFile(path)
	if err != nil {
		l.fatal = true
		l.add(Problem{File: path, Msg: err.Error()})
		return
	}
	data = stripBOM(data)
	f := &fileCtx{idx: len(l.files), name: path}
	l.files = append(l.files, f)
	if line, msg := checkNesting(data); msg != "" {
		l.fatal = true
		l.add(Problem{File: path, Line: line, Msg: msg})
		return
	}
	tree, perr := parseTOML(data)
	if perr != nil {
		l.fatal = true
		p := Problem{File: path, Msg: "syntax error: " + clip(perr.Error())}
		var pe toml.ParseError
		if errors.As(perr, &pe) {
			p.Line = errorLine(data, pe.Position)
			p.Key = keyAtLine(string(data), p.Line)
			p.Msg = "syntax error: " + clip(pe.Message)
		}
		l.add(p)
		return
	}
	f.lines = keyLines(string(data))
	l.applyTable(f, tree, reflect.ValueOf(cfg).Elem(), "")
}

// errorLine is the line of a syntax error. The parser counts a newline that
// ends a line as the start of the next one (an unterminated "[lock" on line
// 3 is reported on line 4), so the line is derived from the byte offset
// where possible: the line that contains it, or for an error at the end of
// the input the last line with content.
func errorLine(data []byte, pos toml.Position) int {
	if pos.Start < 0 || pos.Start > len(data) {
		return pos.Line
	}
	n := 1 + bytes.Count(data[:pos.Start], []byte("\n"))
	if pos.Start == len(data) && len(data) > 0 && data[len(data)-1] == '\n' {
		n--
	}
	return n
}

// stripBOM removes the byte order marks the TOML parser skips, so that its
// byte offsets match data.
func stripBOM(data []byte) []byte {
	for _, bom := range []string{"\xef\xbb\xbf", "\xff\xfe", "\xfe\xff"} {
		if bytes.HasPrefix(data, []byte(bom)) {
			return data[len(bom):]
		}
	}
	return data
}

// parseTOML parses data into a generic tree. A panic inside the parser is
// turned into an error: bad input must never crash the caller.
func parseTOML(data []byte) (tree map[string]any, err error) {
	defer func() {
		if r := recover(); r != nil {
			tree, err = nil, fmt.Errorf("TOML parser failed: %v", r)
		}
	}()
	tree = map[string]any{}
	if _, err := toml.Decode(string(data), &tree); err != nil {
		return nil, err
	}
	return tree, nil
}

// readFile reads a configuration file of at most MaxFileSize bytes. A
// symlink to /dev/null reads as an empty file. Anything else that is not a
// regular file is refused before it is opened (opening a device can have
// effects of its own), and again after: the file is opened non-blocking and
// checked through its descriptor, so a FIFO swapped in between can neither
// hang nor be read.
func readFile(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, errors.New("cannot read: " + errText(err))
	}
	if !fi.Mode().IsRegular() {
		if real, err := filepath.EvalSymlinks(path); err == nil && real == os.DevNull {
			return nil, nil
		}
		return nil, notRegular(fi.Mode())
	}
	fh, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, errors.New("cannot read: " + errText(err))
	}
	defer fh.Close()
	if fi, err = fh.Stat(); err != nil {
		return nil, errors.New("cannot read: " + errText(err))
	}
	if !fi.Mode().IsRegular() {
		return nil, notRegular(fi.Mode())
	}
	if fi.Size() > MaxFileSize {
		return nil, fmt.Errorf("file too large (%d bytes; at most %d)", fi.Size(), MaxFileSize)
	}
	data, err := io.ReadAll(io.LimitReader(fh, MaxFileSize+1))
	if err != nil {
		return nil, errors.New("cannot read: " + errText(err))
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("file too large (more than %d bytes)", MaxFileSize)
	}
	return data, nil
}

// notRegular describes a file that is not a regular file.
func notRegular(m fs.FileMode) error {
	kind := "mode " + m.Type().String()
	switch {
	case m.IsDir():
		kind = "a directory"
	case m&fs.ModeNamedPipe != 0:
		kind = "a FIFO"
	case m&fs.ModeSocket != 0:
		kind = "a socket"
	case m&fs.ModeCharDevice != 0:
		kind = "a character device"
	case m&fs.ModeDevice != 0:
		kind = "a block device"
	}
	return fmt.Errorf("not a regular file (%s)", kind)
}

// errText is err without the path, which the Problem already names.
func errText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// locate returns the file (index and name) and line that set key in the
// merged result. A key inside a list that was not written itself (a
// detector's missing cmd) is attributed to the file that set the list and
// to the line of its element. Keys nobody set are attributed to the main
// file, without a line.
func (l *loader) locate(key string) (idx int, file string, line int) {
	if i, ok := l.origin[key]; ok {
		f := l.files[i]
		return i, f.name, lineOf(f.lines, key)
	}
	if b := strings.IndexByte(key, '['); b > 0 {
		if i, ok := l.origin[key[:b]]; ok {
			f := l.files[i]
			return i, f.name, lineOf(f.lines, key)
		}
	}
	return -1, l.main, 0
}

// place picks, among keys, the one set by the latest file and returns
// where that was; problems of the merged result are reported there.
func (l *loader) place(keys ...string) (file string, line int, key string) {
	best := -2
	for _, k := range keys {
		if i, f, n := l.locate(k); i > best || i == best && n > line {
			best, file, line, key = i, f, n, k
		}
	}
	return file, line, key
}
