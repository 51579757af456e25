package detect

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

func TestFileDetector(t *testing.T) {
	many := ""
	var manyWant []string
	for i := range 12 {
		many += fmt.Sprintf("pkg%d\n", i)
		manyWant = append(manyWant, fmt.Sprintf("pkg%d", i))
	}
	for _, tc := range []struct {
		name       string
		setup      func(t *testing.T, dir string) string // returns the path to watch
		want       Outcome
		wantPkgs   []string
		wantReason string
		wantErrIs  error
	}{
		{
			name:       "absent",
			setup:      func(t *testing.T, dir string) string { return filepath.Join(dir, "reboot-required") },
			want:       NotNeeded,
			wantReason: "reboot-required does not exist",
		},
		{
			name: "present without pkgs",
			setup: func(t *testing.T, dir string) string {
				return writeFile(t, filepath.Join(dir, "reboot-required"), "*** System restart required ***\n")
			},
			want:       Needed,
			wantReason: "reboot-required exists",
		},
		{
			name: "present with pkgs deduplicated",
			setup: func(t *testing.T, dir string) string {
				p := writeFile(t, filepath.Join(dir, "reboot-required"), "")
				writeFile(t, p+".pkgs", "linux-image-6.1.0-21-amd64\nlibc6\n\n  libc6  \nlinux-image-6.1.0-21-amd64\n")
				return p
			},
			want:       Needed,
			wantPkgs:   []string{"linux-image-6.1.0-21-amd64", "libc6"},
			wantReason: "reboot-required exists (packages: linux-image-6.1.0-21-amd64, libc6)",
		},
		{
			name: "reason lists at most ten packages",
			setup: func(t *testing.T, dir string) string {
				p := writeFile(t, filepath.Join(dir, "reboot-required"), "")
				writeFile(t, p+".pkgs", many)
				return p
			},
			want:       Needed,
			wantPkgs:   manyWant,
			wantReason: "pkg8, pkg9, +2 more)",
		},
		{
			name: "pkgs is a directory",
			setup: func(t *testing.T, dir string) string {
				p := writeFile(t, filepath.Join(dir, "reboot-required"), "")
				if err := os.Mkdir(p+".pkgs", 0o755); err != nil {
					t.Fatal(err)
				}
				return p
			},
			want:       Needed,
			wantReason: "reboot-required exists",
		},
		{
			name: "dangling symlink counts as present",
			setup: func(t *testing.T, dir string) string {
				p := filepath.Join(dir, "reboot-required")
				if err := os.Symlink(filepath.Join(dir, "nowhere"), p); err != nil {
					t.Fatal(err)
				}
				return p
			},
			want:       Needed,
			wantReason: "reboot-required exists",
		},
		{
			name: "lstat error other than not-exist is unknown",
			setup: func(t *testing.T, dir string) string {
				// A regular file used as a directory: ENOTDIR, also for root.
				f := writeFile(t, filepath.Join(dir, "plain"), "")
				return filepath.Join(f, "reboot-required")
			},
			want:      Unknown,
			wantErrIs: syscall.ENOTDIR,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := tc.setup(t, t.TempDir())
			r := checkResult(t, detectOne(t, Options{Specs: []Spec{{Type: "file", Path: path}}}))
			if r.Outcome != tc.want {
				t.Fatalf("outcome %s, want %s (%+v)", r.Outcome, tc.want, r)
			}
			if r.Detector != "file" || r.Source != path || r.ExitCode != -1 {
				t.Fatalf("detector/source/exit: %+v", r)
			}
			if !slices.Equal(r.Packages, tc.wantPkgs) {
				t.Fatalf("packages %q, want %q", r.Packages, tc.wantPkgs)
			}
			if !strings.HasSuffix(r.Reason, tc.wantReason) {
				t.Fatalf("reason %q, want suffix %q", r.Reason, tc.wantReason)
			}
			if tc.wantErrIs != nil && !errors.Is(r.Err, tc.wantErrIs) {
				t.Fatalf("err %v, want %v", r.Err, tc.wantErrIs)
			}
		})
	}
}

func TestFileDetectorPermissionDenied(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root bypasses directory permissions; ENOTDIR case covers the branch")
	}
	dir := t.TempDir()
	locked := filepath.Join(dir, "locked")
	if err := os.Mkdir(locked, 0o700); err != nil {
		t.Fatal(err)
	}
	path := writeFile(t, filepath.Join(locked, "reboot-required"), "")
	if err := os.Chmod(locked, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(locked, 0o700) })
	r := checkResult(t, detectOne(t, Options{Specs: []Spec{{Type: "file", Path: path}}}))
	if r.Outcome != Unknown || !errors.Is(r.Err, fs.ErrPermission) {
		t.Fatalf("got %+v", r)
	}
}

func TestReadPkgsBounded(t *testing.T) {
	dir := t.TempDir()
	// More than maxPkgsBytes of distinct lines: the cut last line is dropped
	// and nothing beyond the bound is read.
	var b strings.Builder
	n := 0
	for b.Len() <= maxPkgsBytes+100 {
		fmt.Fprintf(&b, "package-number-%06d\n", n)
		n++
	}
	p := writeFile(t, filepath.Join(dir, "x.pkgs"), b.String())
	pkgs, err := readPkgs(p)
	if err != nil {
		t.Fatal(err)
	}
	lineLen := len("package-number-000000\n")
	if want := maxPkgsBytes / lineLen; len(pkgs) != want {
		t.Fatalf("read %d packages, want %d (bounded, whole lines only)", len(pkgs), want)
	}
	if last := pkgs[len(pkgs)-1]; len(last) != lineLen-1 {
		t.Fatalf("last package %q is cut", last)
	}
	if got, err := readPkgs(filepath.Join(dir, "missing.pkgs")); got != nil || err != nil {
		t.Fatalf("missing file: %v %v", got, err)
	}
}
