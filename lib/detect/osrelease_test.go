package detect

import (
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const (
	osDebian12 = `PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"
NAME="Debian GNU/Linux"
VERSION_ID="12"
VERSION="12 (bookworm)"
VERSION_CODENAME=bookworm
ID=debian
HOME_URL="https://www.debian.org/"
SUPPORT_URL="https://www.debian.org/support"
BUG_REPORT_URL="https://bugs.debian.org/"
`
	osUbuntu2404 = `PRETTY_NAME="Ubuntu 24.04 LTS"
NAME="Ubuntu"
VERSION_ID="24.04"
VERSION="24.04 LTS (Noble Numbat)"
VERSION_CODENAME=noble
ID=ubuntu
ID_LIKE=debian
HOME_URL="https://www.ubuntu.com/"
UBUNTU_CODENAME=noble
LOGO=ubuntu-logo
`
	osRHEL9 = `NAME="Red Hat Enterprise Linux"
VERSION="9.4 (Plow)"
ID="rhel"
ID_LIKE="fedora"
VERSION_ID="9.4"
PLATFORM_ID="platform:el9"
PRETTY_NAME="Red Hat Enterprise Linux 9.4 (Plow)"
ANSI_COLOR="0;31"
CPE_NAME="cpe:/o:redhat:enterprise_linux:9::baseos"
`
	osRocky9 = `NAME="Rocky Linux"
VERSION="9.4 (Blue Onyx)"
ID="rocky"
ID_LIKE="rhel centos fedora"
VERSION_ID="9.4"
`
	osAlma9 = `NAME="AlmaLinux"
VERSION="9.4 (Seafoam Ocelot)"
ID="almalinux"
ID_LIKE="rhel centos fedora"
VERSION_ID="9.4"
`
	osFedora40 = `NAME="Fedora Linux"
VERSION="40 (Server Edition)"
ID=fedora
VERSION_ID=40
`
	osOracle9 = `NAME="Oracle Linux Server"
ID="ol"
ID_LIKE="fedora"
`
	osLeap156 = `NAME="openSUSE Leap"
VERSION="15.6"
ID="opensuse-leap"
ID_LIKE="suse opensuse"
VERSION_ID="15.6"
`
	osTumbleweed = `NAME="openSUSE Tumbleweed"
ID="opensuse-tumbleweed"
ID_LIKE="opensuse suse"
`
	osSLES15 = `NAME="SLES"
VERSION="15-SP6"
VERSION_ID="15.6"
PRETTY_NAME="SUSE Linux Enterprise Server 15 SP6"
ID="sles"
ID_LIKE="suse"
`
	osArch = `NAME="Arch Linux"
ID=arch
BUILD_ID=rolling
`
	osMint = `NAME="Linux Mint"
ID=linuxmint
ID_LIKE="ubuntu debian"
`
	osAmazon = `NAME="Amazon Linux"
ID="amzn"
ID_LIKE="centos rhel fedora"
`
)

func TestParseOSRelease(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want map[string]string
	}{
		{"empty", "", map[string]string{}},
		{"plain", "ID=debian\nVERSION_ID=12\n", map[string]string{"ID": "debian", "VERSION_ID": "12"}},
		{"double quoted with escapes", `NAME="a \"b\" \\ \$x \` + "`" + `y\n"`,
			map[string]string{"NAME": "a \"b\" \\ $x `y\\n"}},
		{"single quoted", "NAME='Foo $bar \"x\"'", map[string]string{"NAME": `Foo $bar "x"`}},
		{"comments and blanks", "# comment\n\n   # indented comment\nID=fedora\n", map[string]string{"ID": "fedora"}},
		{"trailing comment after unquoted", "ID=arch # rolling\n", map[string]string{"ID": "arch"}},
		{"text after closing quote ignored", `ID="rhel" junk`, map[string]string{"ID": "rhel"}},
		{"crlf and blanks around", "  ID = \"rocky\" \r\nID_LIKE=rhel\r\n", map[string]string{"ID": "rocky", "ID_LIKE": "rhel"}},
		{"later wins", "ID=debian\nID=ubuntu\n", map[string]string{"ID": "ubuntu"}},
		{"empty value", "ID=\nID_LIKE=\"\"\n", map[string]string{"ID": "", "ID_LIKE": ""}},
		{"unterminated quotes skipped", "ID=\"debian\nNAME='x\nVERSION=1\n", map[string]string{"VERSION": "1"}},
		{"bad keys skipped", "1ID=x\nI-D=y\n=z\nnoequals\nID_2=ok\n", map[string]string{"ID_2": "ok"}},
		{"value with equals", `CPE_NAME="cpe:/o:a=b"`, map[string]string{"CPE_NAME": "cpe:/o:a=b"}},
		{"backslash not escaping", `X="a\b"`, map[string]string{"X": `a\b`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ParseOSRelease([]byte(tc.in))
			if !maps.Equal(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestResolve(t *testing.T) {
	debian := Spec{Type: "file", Name: "auto:debian", Path: "/run/reboot-required"}
	rhel := Spec{Type: "command", Name: "auto:rhel", Cmd: []string{"needs-restarting", "-r"},
		NeededExitCodes: []int{1}, NotNeededExitCodes: []int{0}}
	suse := Spec{Type: "command", Name: "auto:suse", Cmd: []string{"zypper", "needs-rebooting"},
		NeededExitCodes: []int{102}, NotNeededExitCodes: []int{0}}
	for _, tc := range []struct {
		name string
		in   string
		want *Spec // nil: unsupported
	}{
		{"debian 12", osDebian12, &debian},
		{"ubuntu 24.04", osUbuntu2404, &debian},
		{"rhel 9", osRHEL9, &rhel},
		{"rocky 9", osRocky9, &rhel},
		{"alma 9", osAlma9, &rhel},
		{"fedora 40", osFedora40, &rhel},
		{"oracle 9", osOracle9, &rhel},
		{"centos stream", "ID=\"centos\"\nID_LIKE=\"rhel fedora\"\n", &rhel},
		{"opensuse leap", osLeap156, &suse},
		{"opensuse tumbleweed", osTumbleweed, &suse},
		{"sles 15", osSLES15, &suse},
		{"sled without ID_LIKE", "ID=sled\n", &suse},
		{"linux mint by ID_LIKE", osMint, &debian},
		{"amazon by ID_LIKE", osAmazon, &rhel},
		{"ID_LIKE only", "ID_LIKE=debian\n", &debian},
		{"ID_LIKE suse only", "ID=mysuse\nID_LIKE=\"suse\"\n", &suse},
		{"upper case tolerated", "ID=Debian\n", &debian},
		{"ID wins over ID_LIKE", "ID=ubuntu\nID_LIKE=fedora\n", &debian},
		{"unknown ID_LIKE words skipped", "ID=x\nID_LIKE=\"foo rhel\"\n", &rhel},
		{"ID_LIKE first known word wins", "ID=x\nID_LIKE=\"rocky sles\"\n", &rhel},
		{"ID_LIKE unknown words only", "ID=x\nID_LIKE=\"gentoo arch\"\n", nil},
		{"arch", osArch, nil},
		{"alpine", "ID=alpine\n", nil},
		{"empty", "", nil},
		{"opensuse as prefix only in ID", "ID=opensusex\n", &suse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Resolve([]byte(tc.in))
			if tc.want == nil {
				if !errors.Is(err, ErrUnsupportedOS) {
					t.Fatalf("Resolve = %+v, %v; want ErrUnsupportedOS", got, err)
				}
				id := ParseOSRelease([]byte(tc.in))["ID"]
				if !strings.Contains(err.Error(), `ID="`+id+`"`) {
					t.Fatalf("error %q does not name ID %q", err, id)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Type != tc.want.Type || got.Name != tc.want.Name || got.Path != tc.want.Path ||
				!slices.Equal(got.Cmd, tc.want.Cmd) || !slices.Equal(got.NeededExitCodes, tc.want.NeededExitCodes) ||
				!slices.Equal(got.NotNeededExitCodes, tc.want.NotNeededExitCodes) || got.Timeout != 0 {
				t.Fatalf("Resolve = %+v, want %+v", got, *tc.want)
			}
			if _, err := New(Options{Specs: []Spec{got}}); err != nil {
				t.Fatalf("resolved spec does not validate: %v", err)
			}
		})
	}
}

func TestAutoUnreadableAndUnsupported(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing-os-release")
	arch := writeFile(t, filepath.Join(dir, "arch"), osArch)
	for _, tc := range []struct {
		name, path string
		errIs      error
		mention    []string
	}{
		{"missing", missing, os.ErrNotExist, []string{missing, "os-release"}},
		{"directory", dir, nil, []string{dir}},
		{"unsupported", arch, ErrUnsupportedOS, []string{arch, `ID="arch"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// No Specs: the default is one auto detector.
			r := checkResult(t, detectOne(t, Options{OSRelease: tc.path}))
			if r.Outcome != Unknown || r.Detector != "auto" || r.Source != tc.path {
				t.Fatalf("got %+v", r)
			}
			if tc.errIs != nil && !errors.Is(r.Err, tc.errIs) {
				t.Fatalf("err %v, want %v", r.Err, tc.errIs)
			}
			for _, m := range tc.mention {
				if !strings.Contains(r.Err.Error(), m) {
					t.Fatalf("error %q does not mention %q", r.Err, m)
				}
			}
		})
	}
}

// TestAutoDebianThroughDetect runs the real auto path; the verdict depends
// on the host's /run/reboot-required, so it is compared with that.
func TestAutoDebianThroughDetect(t *testing.T) {
	osr := writeFile(t, filepath.Join(t.TempDir(), "os-release"), osUbuntu2404)
	r := checkResult(t, detectOne(t, Options{OSRelease: osr}))
	if r.Detector != "auto:debian" || r.Source != "/run/reboot-required" {
		t.Fatalf("got %+v", r)
	}
	want := NotNeeded
	if _, err := os.Lstat("/run/reboot-required"); err == nil {
		want = Needed
	} else if !os.IsNotExist(err) {
		want = Unknown
	}
	if r.Outcome != want {
		t.Fatalf("outcome %s, host says %s", r.Outcome, want)
	}
}

// TestAutoRHELThroughDetect: without needs-restarting installed the auto
// detector cannot decide and must say so (fail closed).
func TestAutoRHELThroughDetect(t *testing.T) {
	if _, err := exec.LookPath("needs-restarting"); err == nil {
		t.Skip("needs-restarting is installed on this host")
	}
	osr := writeFile(t, filepath.Join(t.TempDir(), "os-release"), osRocky9)
	r := checkResult(t, detectOne(t, Options{OSRelease: osr, Specs: []Spec{{Type: "auto"}}}))
	if r.Outcome != Unknown || r.Detector != "auto:rhel" || r.Source != "needs-restarting -r" {
		t.Fatalf("got %+v", r)
	}
}

// TestAutoResolvedWithFakeBinaries is the seam for the auto detectors that
// run programs: resolve the os-release, point argv[0] at a fake program,
// run the resolved spec.
func TestAutoResolvedWithFakeBinaries(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name       string
		osRelease  string
		body       string
		want       Outcome
		wantName   string
		wantArgs   string
		wantPkgs   []string
		wantReason string
	}{
		{"rhel needed", osRHEL9, "echo \"$@\" > " + dir + "/args-rhel-needed\ncat <<'X'\n" + needsRestartingNeeded + "X\nexit 1",
			Needed, "auto:rhel", "-r", []string{"kernel", "systemd"}, "(packages: kernel, systemd)"},
		{"rocky not needed", osRocky9, "echo \"$@\" > " + dir + "/args-rocky-not-needed\necho 'No core libraries or services have been updated since boot-up.'\nexit 0",
			NotNeeded, "auto:rhel", "-r", nil, "exited 0"},
		{"alma error", osAlma9, "echo \"$@\" > " + dir + "/args-alma-error\necho 'Error: cache broken' >&2\nexit 2",
			Unknown, "auto:rhel", "-r", nil, "cache broken"},
		{"sles needed", osSLES15, "echo \"$@\" > " + dir + "/args-sles-needed\necho 'Since the last system boot core libraries or services have been updated.'\nexit 102",
			Needed, "auto:suse", "needs-rebooting", nil, "exited 102"},
		{"leap not needed", osLeap156, "echo \"$@\" > " + dir + "/args-leap-not-needed\nexit 0",
			NotNeeded, "auto:suse", "needs-rebooting", nil, "exited 0"},
		{"leap zypper locked", osLeap156, "echo \"$@\" > " + dir + "/args-leap-zypper-locked\necho 'System management is locked'\nexit 7",
			Unknown, "auto:suse", "needs-rebooting", nil, "locked"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := Resolve([]byte(tc.osRelease))
			if err != nil {
				t.Fatal(err)
			}
			fake := script(t, dir, strings.ReplaceAll(tc.name, " ", "-"), tc.body)
			spec.Cmd[0] = fake
			r := checkResult(t, detectOne(t, Options{Specs: []Spec{spec}}))
			if r.Outcome != tc.want || r.Detector != tc.wantName {
				t.Fatalf("got %+v", r)
			}
			if !slices.Equal(r.Packages, tc.wantPkgs) || !strings.Contains(r.Reason, tc.wantReason) {
				t.Fatalf("packages %q reason %q", r.Packages, r.Reason)
			}
			args, err := os.ReadFile(filepath.Join(dir, "args-"+strings.ReplaceAll(tc.name, " ", "-")))
			if err != nil || strings.TrimSpace(string(args)) != tc.wantArgs {
				t.Fatalf("fake got args %q (%v), want %q", args, err, tc.wantArgs)
			}
		})
	}
}
