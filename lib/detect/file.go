package detect

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strings"
)

// maxPkgsBytes bounds how much of a <path>.pkgs file is read.
const maxPkgsBytes = 64 << 10

// maxReasonPackages bounds how many package names a Reason lists; the
// Packages field keeps them all.
const maxReasonPackages = 10

// runFile: the path existing (Lstat) means needed; not existing means not
// needed; any other error is unknown. Debian's convention <path>.pkgs lists
// the packages that asked for the reboot.
func runFile(sp Spec, log *slog.Logger) Result {
	name := detectorName(sp)
	_, err := os.Lstat(sp.Path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return Result{Detector: name, Source: sp.Path, Outcome: NotNeeded, ExitCode: -1,
			Reason: sp.Path + " does not exist"}
	case err != nil:
		return unknown(name, sp.Path, -1, fmt.Errorf("detect: %s: %w", name, err))
	}
	pkgs, perr := readPkgs(sp.Path + ".pkgs")
	if perr != nil {
		// The packages only explain the verdict; the file alone decides.
		log.Warn("cannot read package list", slog.String("detector", name),
			slog.String("path", sp.Path+".pkgs"), slog.Any("error", perr))
	}
	return Result{Detector: name, Source: sp.Path, Outcome: Needed, ExitCode: -1,
		Packages: pkgs, Reason: sp.Path + " exists" + packagesSuffix(pkgs)}
}

// readPkgs reads one package name per line, at most maxPkgsBytes, without
// duplicates, in first-seen order. A missing file gives nil, nil.
func readPkgs(path string) ([]string, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxPkgsBytes))
	if err != nil {
		return nil, err
	}
	if len(data) == maxPkgsBytes {
		// Drop a possibly cut last line.
		if i := strings.LastIndexByte(string(data), '\n'); i >= 0 {
			data = data[:i]
		}
	}
	return uniqueLines(string(data)), nil
}

func uniqueLines(s string) []string {
	var out []string
	seen := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 0, 4096), maxPkgsBytes+1)
	for sc.Scan() {
		p := strings.TrimSpace(sc.Text())
		if p == "" || seen[p] {
			continue
		}
		seen[p] = true
		out = append(out, p)
	}
	return out
}

// packagesSuffix renders " (packages: a, b)" or "" for none.
func packagesSuffix(pkgs []string) string {
	if len(pkgs) == 0 {
		return ""
	}
	shown := pkgs
	more := ""
	if len(shown) > maxReasonPackages {
		shown = shown[:maxReasonPackages]
		more = fmt.Sprintf(", +%d more", len(pkgs)-maxReasonPackages)
	}
	return " (packages: " + strings.Join(shown, ", ") + more + ")"
}
