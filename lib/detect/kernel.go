package detect

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// kernelPrefixes name installed kernel images in the boot directory.
var kernelPrefixes = []string{"vmlinuz-", "vmlinux-", "Image-"}

// ignoredKernelSuffixes and ignoredKernelInfixes mark backups, package
// manager leftovers and rescue images that are not bootable candidates.
var (
	ignoredKernelSuffixes = []string{".old", ".bak", ".sig", ".hmac", ".rpmnew", ".rpmsave", "~"}
	ignoredKernelInfixes  = []string{"rescue", ".dpkg-"}
)

// runKernel compares the running kernel release with the newest installed
// one (see InstalledKernels and NewestKernel).
func (s *Set) runKernel(sp Spec) Result {
	name := detectorName(sp)
	running, err := s.kernelRelease()
	if err == nil && running == "" {
		err = errors.New("empty release")
	}
	if err != nil {
		return unknown(name, s.bootDir, -1, fmt.Errorf("detect: %s: running kernel release: %w", name, err))
	}
	installed, err := InstalledKernels(s.bootDir)
	if err != nil {
		return unknown(name, s.bootDir, -1, fmt.Errorf("detect: %s: %w", name, err))
	}
	if len(installed) == 0 {
		return unknown(name, s.bootDir, -1, fmt.Errorf("%w in %s (running %s)", ErrNoKernel, s.bootDir, running))
	}
	newest := NewestKernel(running, installed)
	reason := fmt.Sprintf("running %s, newest installed %s", running, newest)
	if CompareVersions(newest, running) > 0 {
		return Result{Detector: name, Source: s.bootDir, Outcome: Needed, ExitCode: -1, Reason: reason}
	}
	return Result{Detector: name, Source: s.bootDir, Outcome: NotNeeded, ExitCode: -1, Reason: reason}
}

// InstalledKernels lists the releases of the kernel images in dir: entries
// vmlinuz-<release>, vmlinux-<release> and Image-<release> that are (or
// link to) regular files, except backups (.old, .bak, *.dpkg-*, .rpmnew,
// .rpmsave, ~), signatures and rescue images. The same release is listed
// once.
func InstalledKernels(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	seen := map[string]bool{}
	for _, e := range entries {
		rel, ok := releaseFromImage(e.Name())
		if !ok || seen[rel] {
			continue
		}
		st, err := os.Stat(filepath.Join(dir, e.Name())) // follows symlinks
		if err != nil || !st.Mode().IsRegular() {
			continue
		}
		seen[rel] = true
		out = append(out, rel)
	}
	return out, nil
}

func releaseFromImage(file string) (string, bool) {
	for _, p := range kernelPrefixes {
		rel, ok := strings.CutPrefix(file, p)
		if !ok || rel == "" {
			continue
		}
		for _, s := range ignoredKernelSuffixes {
			if strings.HasSuffix(rel, s) {
				return "", false
			}
		}
		for _, s := range ignoredKernelInfixes {
			if strings.Contains(rel, s) {
				return "", false
			}
		}
		return rel, true
	}
	return "", false
}

// NewestKernel returns the newest of installed (by CompareVersions) among
// those of the same flavour as running (see KernelFlavor), so that an
// installed "-rt-amd64" or "+debug" kernel is not taken for an update of a
// running "-amd64" one. When none has the running kernel's flavour, all are
// considered. installed must not be empty.
func NewestKernel(running string, installed []string) string {
	flavour := KernelFlavor(running)
	var cands []string
	for _, k := range installed {
		if KernelFlavor(k) == flavour {
			cands = append(cands, k)
		}
	}
	if len(cands) == 0 {
		cands = installed
	}
	newest := ""
	for i, k := range cands {
		c := CompareVersions(k, newest)
		if i == 0 || c > 0 || c == 0 && k > newest {
			newest = k
		}
	}
	return newest
}

// KernelFlavor returns the build flavour of a kernel release: the trailing
// dash-separated words that start with a letter (Debian, Ubuntu, SUSE:
// "6.1.0-18-cloud-amd64" → "cloud-amd64", "6.8.0-31-generic" → "generic",
// "6.4.0-150600.23.7-default" → "default"), else a '+' suffix starting with
// a letter (RHEL, Fedora: "5.14.0-427.13.1.el9_4.x86_64+debug" → "+debug"),
// else "".
func KernelFlavor(release string) string {
	parts := strings.Split(release, "-")
	i := len(parts)
	for i > 1 && parts[i-1] != "" && isAlpha(parts[i-1][0]) {
		i--
	}
	if i < len(parts) {
		return strings.Join(parts[i:], "-")
	}
	last := parts[len(parts)-1]
	if j := strings.LastIndexByte(last, '+'); j >= 0 && j+1 < len(last) && isAlpha(last[j+1]) {
		return last[j:]
	}
	return ""
}

// unameRelease returns the running kernel release from uname(2).
func unameRelease() (string, error) {
	var u syscall.Utsname
	if err := syscall.Uname(&u); err != nil {
		return "", fmt.Errorf("uname: %w", err)
	}
	return utsString(u.Release[:]), nil
}

// utsString converts a NUL-terminated utsname field (int8 or uint8,
// depending on the architecture) to a string.
func utsString[T ~int8 | ~uint8](field []T) string {
	b := make([]byte, 0, len(field))
	for _, c := range field {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	return string(b)
}
