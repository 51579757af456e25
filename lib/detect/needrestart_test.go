package detect

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/proc"
)

const needrestartKSTA3 = `NEEDRESTART-VER: 3.6
NEEDRESTART-KCUR: 6.1.0-18-amd64
NEEDRESTART-KEXP: 6.1.0-21-amd64
NEEDRESTART-KSTA: 3
NEEDRESTART-UCSTA: 1
NEEDRESTART-SVC: systemd-journald.service
NEEDRESTART-SVC: ssh.service
`

func TestParseNeedrestart(t *testing.T) {
	for _, tc := range []struct {
		name    string
		out     string
		want    NeedrestartStatus
		wantErr bool
	}{
		{"ksta 3", needrestartKSTA3, NeedrestartStatus{3, "6.1.0-18-amd64", "6.1.0-21-amd64"}, false},
		{"ksta 1 no kexp", "NEEDRESTART-KCUR: 6.1.0-21-amd64\nNEEDRESTART-KSTA: 1\n", NeedrestartStatus{1, "6.1.0-21-amd64", ""}, false},
		{"spaces tolerated", "  NEEDRESTART-KSTA :  2  \n", NeedrestartStatus{2, "", ""}, false},
		{"same ksta twice", "NEEDRESTART-KSTA: 2\nNEEDRESTART-KSTA: 2\n", NeedrestartStatus{2, "", ""}, false},
		{"missing ksta", "NEEDRESTART-VER: 3.6\nNEEDRESTART-SVC: ssh.service\n", NeedrestartStatus{}, true},
		{"empty", "", NeedrestartStatus{}, true},
		{"bad ksta", "NEEDRESTART-KSTA: three\n", NeedrestartStatus{}, true},
		{"negative ksta", "NEEDRESTART-KSTA: -1\n", NeedrestartStatus{}, true},
		{"conflicting ksta", "NEEDRESTART-KSTA: 1\nNEEDRESTART-KSTA: 3\n", NeedrestartStatus{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseNeedrestart([]byte(tc.out))
			if tc.wantErr {
				if !errors.Is(err, ErrNeedrestart) {
					t.Fatalf("got %+v, %v; want ErrNeedrestart", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestNeedrestartDetector(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name       string
		body       string
		timeout    time.Duration
		want       Outcome
		wantCode   int
		wantReason string
		errIs      error
	}{
		{"ksta 3", "cat <<'X'\n" + needrestartKSTA3 + "X", 0, Needed, 0,
			"kernel version upgrade pending (running 6.1.0-18-amd64, expected 6.1.0-21-amd64)", nil},
		{"ksta 2", "echo 'NEEDRESTART-KSTA: 2'", 0, Needed, 0, "ABI-compatible kernel upgrade pending (running -, expected -)", nil},
		{"ksta 1", "echo 'NEEDRESTART-KCUR: 6.1.0-21-amd64'; echo 'NEEDRESTART-KEXP: 6.1.0-21-amd64'; echo 'NEEDRESTART-KSTA: 1'; echo 'NEEDRESTART-SVC: ssh.service'",
			0, NotNeeded, 0, "kernel is current (running 6.1.0-21-amd64", nil},
		{"ksta 0", "echo 'NEEDRESTART-KSTA: 0'", 0, Unknown, 0, "kernel status 0", ErrNeedrestart},
		{"ksta 4", "echo 'NEEDRESTART-KSTA: 4'", 0, Unknown, 0, "kernel status 4", ErrNeedrestart},
		{"svc lines only", "echo 'NEEDRESTART-VER: 3.6'; echo 'NEEDRESTART-SVC: ssh.service'", 0, Unknown, 0, "no NEEDRESTART-KSTA", ErrNeedrestart},
		{"non-zero exit", "echo 'NEEDRESTART-KSTA: 3'; echo 'Error: not root' >&2; exit 1", 0, Unknown, 1, "exited 1", ErrUnexpectedExit},
		{"timeout", "sleep 60", 300 * time.Millisecond, Unknown, -1, "timed out", proc.ErrTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := script(t, dir, strings.ReplaceAll(tc.name, " ", "-"), tc.body)
			r := checkResult(t, detectOne(t, Options{Specs: []Spec{{Type: "needrestart", Cmd: []string{bin, "-b"}, Timeout: tc.timeout}}}))
			if r.Outcome != tc.want || r.ExitCode != tc.wantCode || !strings.Contains(r.Reason, tc.wantReason) {
				t.Fatalf("got %s exit %d %q; want %s exit %d %q", r.Outcome, r.ExitCode, r.Reason, tc.want, tc.wantCode, tc.wantReason)
			}
			if r.Detector != "needrestart" || r.Source != bin+" -b" {
				t.Fatalf("detector %q source %q", r.Detector, r.Source)
			}
			if tc.errIs != nil && !errors.Is(r.Err, tc.errIs) {
				t.Fatalf("err %v, want %v", r.Err, tc.errIs)
			}
		})
	}
}

func TestNeedrestartDefaultArgv(t *testing.T) {
	if _, err := exec.LookPath("needrestart"); err == nil {
		t.Skip("needrestart is installed on this host")
	}
	r := checkResult(t, detectOne(t, Options{Specs: []Spec{{Type: "needrestart"}}}))
	if r.Outcome != Unknown || r.Source != "needrestart -b" {
		t.Fatalf("got %+v", r)
	}
}
