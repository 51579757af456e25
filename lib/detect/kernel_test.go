package detect

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// bootDir creates a boot directory with the given kernel image files.
func bootDir(t *testing.T, files ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range files {
		writeFile(t, filepath.Join(dir, f), "kernel image")
	}
	return dir
}

func release(r string) func() (string, error) { return func() (string, error) { return r, nil } }

func TestKernelDetector(t *testing.T) {
	debian := []string{"vmlinuz-6.1.0-18-amd64", "vmlinuz-6.1.0-21-amd64", "config-6.1.0-99-amd64",
		"initrd.img-6.1.0-99-amd64", "System.map-6.1.0-99-amd64"}
	rhel := []string{"vmlinuz-5.14.0-362.8.1.el9_3.x86_64", "vmlinuz-5.14.0-427.13.1.el9_4.x86_64",
		"vmlinuz-0-rescue-0123456789abcdef0123456789abcdef"}
	for _, tc := range []struct {
		name       string
		files      []string
		running    string
		want       Outcome
		wantReason string
	}{
		{"debian newer installed", debian, "6.1.0-18-amd64", Needed, "running 6.1.0-18-amd64, newest installed 6.1.0-21-amd64"},
		{"debian running newest", debian, "6.1.0-21-amd64", NotNeeded, "running 6.1.0-21-amd64, newest installed 6.1.0-21-amd64"},
		{"debian abi 9 vs 10", []string{"vmlinuz-6.1.0-9-amd64", "vmlinuz-6.1.0-10-amd64"}, "6.1.0-9-amd64", Needed, "newest installed 6.1.0-10-amd64"},
		{"running newer than installed", debian, "6.1.0-25-amd64", NotNeeded, "newest installed 6.1.0-21-amd64"},
		{"rhel newer installed", rhel, "5.14.0-362.8.1.el9_3.x86_64", Needed, "newest installed 5.14.0-427.13.1.el9_4.x86_64"},
		{"rhel running newest", rhel, "5.14.0-427.13.1.el9_4.x86_64", NotNeeded, "newest installed 5.14.0-427.13.1.el9_4.x86_64"},
		{"arm64 Image", []string{"Image-6.1.0-18-arm64", "Image-6.1.0-21-arm64"}, "6.1.0-18-arm64", Needed, "newest installed 6.1.0-21-arm64"},
		{"vmlinux", []string{"vmlinux-6.6.30", "vmlinux-6.6.31"}, "6.6.30", Needed, "newest installed 6.6.31"},
		{"ignored leftovers", []string{"vmlinuz-6.1.0-18-amd64", "vmlinuz-6.1.0-30-amd64.old", "vmlinuz-6.1.0-30-amd64.dpkg-new",
			"vmlinuz-6.1.0-30-amd64.dpkg-tmp", "vmlinuz-6.1.0-30-amd64.bak", "vmlinuz-6.1.0-30-amd64~", "vmlinuz-6.1.0-30-amd64.rpmnew",
			"vmlinuz-", "vmlinuz", "vmlinuz.old", "vmlinuz-9-rescue-abc"}, "6.1.0-18-amd64", NotNeeded, "newest installed 6.1.0-18-amd64"},
		{"flavour: rt kernel is not an update of amd64", []string{"vmlinuz-6.1.0-18-amd64", "vmlinuz-6.1.0-18-rt-amd64"},
			"6.1.0-18-amd64", NotNeeded, "newest installed 6.1.0-18-amd64"},
		{"flavour: newer cloud kernel ignored, newer amd64 found", []string{"vmlinuz-6.1.0-18-amd64", "vmlinuz-6.1.0-21-amd64",
			"vmlinuz-6.1.0-25-cloud-amd64"}, "6.1.0-18-amd64", Needed, "newest installed 6.1.0-21-amd64"},
		{"flavour: rhel debug kernel ignored", []string{"vmlinuz-5.14.0-362.8.1.el9_3.x86_64", "vmlinuz-5.14.0-427.13.1.el9_4.x86_64+debug"},
			"5.14.0-362.8.1.el9_3.x86_64", NotNeeded, "newest installed 5.14.0-362.8.1.el9_3.x86_64"},
		{"flavour: debian 12 to 13 upgrade", []string{"vmlinuz-6.1.0-31-amd64", "vmlinuz-6.12.38+deb13-amd64"},
			"6.1.0-31-amd64", Needed, "newest installed 6.12.38+deb13-amd64"},
		{"flavour: no match falls back to all", []string{"vmlinuz-6.1.0-21-amd64"}, "6.1.0-18-custom", Needed, "newest installed 6.1.0-21-amd64"},
		{"suse", []string{"vmlinuz-6.4.0-150600.21-default", "vmlinuz-6.4.0-150600.23.7-default"},
			"6.4.0-150600.21-default", Needed, "newest installed 6.4.0-150600.23.7-default"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := bootDir(t, tc.files...)
			r := checkResult(t, detectOne(t, Options{BootDir: dir, KernelRelease: release(tc.running),
				Specs: []Spec{{Type: "kernel"}}}))
			if r.Outcome != tc.want || !strings.Contains(r.Reason, tc.wantReason) {
				t.Fatalf("got %s %q, want %s %q", r.Outcome, r.Reason, tc.want, tc.wantReason)
			}
			if r.Detector != "kernel" || r.Source != dir || r.Packages != nil || r.ExitCode != -1 {
				t.Fatalf("result %+v", r)
			}
		})
	}
}

func TestKernelDetectorEntriesNotFiles(t *testing.T) {
	dir := bootDir(t, "vmlinuz-6.1.0-18-amd64", "target")
	if err := os.Mkdir(filepath.Join(dir, "vmlinuz-6.1.0-40-amd64"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "gone"), filepath.Join(dir, "vmlinuz-6.1.0-41-amd64")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("target", filepath.Join(dir, "vmlinuz-6.1.0-21-amd64")); err != nil {
		t.Fatal(err)
	}
	got, err := InstalledKernels(dir)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if want := []string{"6.1.0-18-amd64", "6.1.0-21-amd64"}; !slices.Equal(got, want) {
		t.Fatalf("InstalledKernels = %q, want %q", got, want)
	}
}

func TestKernelDetectorUnknown(t *testing.T) {
	empty := bootDir(t, "config-6.1.0-21-amd64", "vmlinuz-0-rescue-abc")
	ok := bootDir(t, "vmlinuz-6.1.0-21-amd64")
	for _, tc := range []struct {
		name    string
		dir     string
		release func() (string, error)
		errIs   error
	}{
		{"no kernel installed", empty, release("6.1.0-21-amd64"), ErrNoKernel},
		{"boot dir missing", filepath.Join(empty, "nope"), release("6.1.0-21-amd64"), os.ErrNotExist},
		{"release error", ok, func() (string, error) { return "", errors.New("uname broke") }, nil},
		{"empty release", ok, release(""), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := checkResult(t, detectOne(t, Options{BootDir: tc.dir, KernelRelease: tc.release, Specs: []Spec{{Type: "kernel"}}}))
			if r.Outcome != Unknown || r.Source != tc.dir {
				t.Fatalf("got %+v", r)
			}
			if tc.errIs != nil && !errors.Is(r.Err, tc.errIs) {
				t.Fatalf("err %v, want %v", r.Err, tc.errIs)
			}
		})
	}
}

func TestUnameRelease(t *testing.T) {
	got, err := unameRelease()
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		t.Skipf("cannot cross-check: %v", err)
	}
	if got != strings.TrimSpace(string(want)) {
		t.Fatalf("unameRelease = %q, /proc says %q", got, want)
	}
	if utsString([]int8{'a', 'b', 0, 'c'}) != "ab" || utsString([]uint8{'x', 'y'}) != "xy" {
		t.Fatal("utsString does not stop at NUL or end")
	}
}

func TestKernelFlavor(t *testing.T) {
	for in, want := range map[string]string{
		"6.1.0-18-amd64":                     "amd64",
		"6.1.0-18-cloud-amd64":               "cloud-amd64",
		"6.1.0-18-rt-amd64":                  "rt-amd64",
		"6.12.38+deb13-amd64":                "amd64",
		"6.8.0-31-generic":                   "generic",
		"6.8.0-1009-aws":                     "aws",
		"6.4.0-150600.23.7-default":          "default",
		"5.14.0-427.13.1.el9_4.x86_64":       "",
		"5.14.0-427.13.1.el9_4.x86_64+debug": "+debug",
		"6.8.9-300.fc40.x86_64":              "",
		"6.9.1-arch1-1":                      "",
		"linux":                              "",
		"6.6.31":                             "",
		"6.6.31+":                            "",
		"-":                                  "",
	} {
		if got := KernelFlavor(in); got != want {
			t.Errorf("KernelFlavor(%q) = %q, want %q", in, got, want)
		}
	}
}
