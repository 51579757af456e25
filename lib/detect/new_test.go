package detect

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestNewValidation(t *testing.T) {
	cmd := []string{"/bin/true"}
	for _, tc := range []struct {
		name string
		spec Spec
		ok   bool
	}{
		{"file", Spec{Type: "file", Path: "/run/reboot-required"}, true},
		{"file no path", Spec{Type: "file"}, false},
		{"file relative path", Spec{Type: "file", Path: "run/reboot-required"}, false},
		{"file with cmd", Spec{Type: "file", Path: "/x", Cmd: cmd}, false},
		{"file with codes", Spec{Type: "file", Path: "/x", NeededExitCodes: []int{1}}, false},
		{"command", Spec{Type: "command", Cmd: cmd, NeededExitCodes: []int{1}, NotNeededExitCodes: []int{0}}, true},
		{"command several codes", Spec{Type: "command", Cmd: cmd, NeededExitCodes: []int{1, 2}, NotNeededExitCodes: []int{0, 3}}, true},
		{"command no argv", Spec{Type: "command", NeededExitCodes: []int{1}, NotNeededExitCodes: []int{0}}, false},
		{"command empty argv0", Spec{Type: "command", Cmd: []string{""}, NeededExitCodes: []int{1}, NotNeededExitCodes: []int{0}}, false},
		{"command no needed codes", Spec{Type: "command", Cmd: cmd, NotNeededExitCodes: []int{0}}, false},
		{"command no not-needed codes", Spec{Type: "command", Cmd: cmd, NeededExitCodes: []int{1}}, false},
		{"command overlapping codes", Spec{Type: "command", Cmd: cmd, NeededExitCodes: []int{1}, NotNeededExitCodes: []int{0, 1}}, false},
		{"command code too big", Spec{Type: "command", Cmd: cmd, NeededExitCodes: []int{256}, NotNeededExitCodes: []int{0}}, false},
		{"command negative code", Spec{Type: "command", Cmd: cmd, NeededExitCodes: []int{1}, NotNeededExitCodes: []int{-1}}, false},
		{"command with path", Spec{Type: "command", Cmd: cmd, Path: "/x", NeededExitCodes: []int{1}, NotNeededExitCodes: []int{0}}, false},
		{"kernel", Spec{Type: "kernel"}, true},
		{"kernel with path", Spec{Type: "kernel", Path: "/boot"}, false},
		{"needrestart", Spec{Type: "needrestart"}, true},
		{"needrestart override", Spec{Type: "needrestart", Cmd: []string{"/usr/sbin/needrestart", "-b"}}, true},
		{"needrestart empty override", Spec{Type: "needrestart", Cmd: []string{""}}, false},
		{"needrestart with codes", Spec{Type: "needrestart", NotNeededExitCodes: []int{0}}, false},
		{"auto", Spec{Type: "auto"}, true},
		{"auto with cmd", Spec{Type: "auto", Cmd: cmd}, false},
		{"negative timeout", Spec{Type: "kernel", Timeout: -time.Second}, false},
		{"unknown type", Spec{Type: "magic"}, false},
		{"empty type", Spec{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(Options{Specs: []Spec{tc.spec}})
			if tc.ok {
				if err != nil || s == nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidSpec) {
				t.Fatalf("New error %v, want ErrInvalidSpec", err)
			}
			if s != nil {
				t.Fatal("New returned a Set with an error")
			}
		})
	}
	if _, err := New(Options{DefaultTimeout: -1}); !errors.Is(err, ErrInvalidSpec) {
		t.Fatalf("negative default timeout: %v", err)
	}
}

func TestNewDefaults(t *testing.T) {
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	specs := s.Specs()
	if len(specs) != 1 || specs[0].Type != TypeAuto || specs[0].Timeout != DefaultTimeout {
		t.Fatalf("default specs %+v", specs)
	}
	if s.osRelease != DefaultOSRelease || s.bootDir != DefaultBootDir || s.kernelRelease == nil || s.log == nil {
		t.Fatalf("defaults not applied: %+v", s)
	}

	cmd := []string{"/bin/true"}
	in := []Spec{
		{Type: "command", Cmd: cmd, NeededExitCodes: []int{1}, NotNeededExitCodes: []int{0}},
		{Type: "kernel", Timeout: 5 * time.Second},
	}
	s, err = New(Options{Specs: in, DefaultTimeout: 7 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cmd[0] = "/bin/false" // the Set must not alias the caller's slices
	got := s.Specs()
	if got[0].Timeout != 7*time.Second || got[1].Timeout != 5*time.Second {
		t.Fatalf("timeouts %s %s", got[0].Timeout, got[1].Timeout)
	}
	if got[0].Cmd[0] != "/bin/true" {
		t.Fatalf("Set aliases caller's argv: %q", got[0].Cmd)
	}
	got[0].Cmd[0] = "/changed"
	if s.Specs()[0].Cmd[0] != "/bin/true" {
		t.Fatal("Specs returns aliased slices")
	}
}

func TestNewErrorNamesDetector(t *testing.T) {
	_, err := New(Options{Specs: []Spec{{Type: "kernel"}, {Type: "bogus"}}})
	if err == nil || !strings.Contains(err.Error(), "detector 2") || !strings.Contains(err.Error(), `"bogus"`) {
		t.Fatalf("error %v does not name the detector", err)
	}
}

func TestDetectCancelledContext(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir+"/reboot-required", "")
	specs := []Spec{
		{Type: "file", Path: path},
		{Type: "command", Cmd: []string{"/bin/true", "x"}, NeededExitCodes: []int{1}, NotNeededExitCodes: []int{0}},
		{Type: "kernel"},
		{Type: "needrestart"},
		{Type: "auto"},
	}
	wantSources := []string{path, "/bin/true x", "/srv/boot", "needrestart -b", "/srv/os-release"}
	s, err := New(Options{Specs: specs, BootDir: "/srv/boot", OSRelease: "/srv/os-release"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	sum := s.Detect(ctx)
	if sum.Outcome != Unknown || len(sum.Results) != len(specs) {
		t.Fatalf("cancelled detect: %+v", sum)
	}
	for i, r := range sum.Results {
		if r.Outcome != Unknown || !errors.Is(r.Err, context.Canceled) || r.Source != wantSources[i] || r.Detector != specs[i].Type {
			t.Errorf("result %d: %+v", i, r)
		}
	}
}

func TestRunUnknownTypeFailsClosed(t *testing.T) {
	// A Set built without New (zero value plus a bad spec) still fails closed.
	s := &Set{specs: []Spec{{Type: "bogus"}}, log: slog.New(slog.DiscardHandler)}
	sum := s.Detect(context.Background())
	r := checkResult(t, sum)
	if !errors.Is(r.Err, ErrInvalidSpec) {
		t.Fatalf("got %+v", r)
	}
}

func TestDetectLogs(t *testing.T) {
	dir := t.TempDir()
	present := writeFile(t, dir+"/a", "")
	writeFile(t, dir+"/a.pkgs", "libc6\n")
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	sum := detectOne(t, Options{Logger: log, Specs: []Spec{
		{Type: "file", Path: present},
		{Type: "command", Cmd: []string{script(t, dir, "exit3", "exit 3")}, NeededExitCodes: []int{1}, NotNeededExitCodes: []int{0}},
	}})
	if sum.Outcome != Unknown {
		t.Fatalf("outcome %s", sum.Outcome)
	}
	out := buf.String()
	for _, want := range []string{"detector=file", "outcome=needed", "packages=[libc6]", "exit_code=3", "level=WARN", "msg=\"reboot detection\""} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
}
