package healthgate

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clusterrebootd/clusterrebootd/lib/gate"
	"github.com/clusterrebootd/clusterrebootd/lib/proc"
)

func phaseOf(s string) gate.Phase { return gate.Phase(s) }

// TestScriptLint: the script is valid POSIX sh and shellcheck-clean.
func TestScriptLint(t *testing.T) {
	src := scriptSource(t)
	for _, sh := range []string{"sh", "dash", "bash"} {
		if _, err := exec.LookPath(sh); err != nil {
			continue
		}
		if out, err := exec.Command(sh, "-n", src).CombinedOutput(); err != nil {
			t.Errorf("%s -n: %v\n%s", sh, err, out)
		}
	}
	if _, err := exec.LookPath("shellcheck"); err != nil {
		t.Log("shellcheck not installed: lint skipped")
		return
	}
	if out, err := exec.Command("shellcheck", "-s", "sh", src).CombinedOutput(); err != nil {
		t.Errorf("shellcheck: %v\n%s", err, out)
	}
	env := filepath.Join(filepath.Dir(src), "cluster-gate.env")
	if out, err := exec.Command("sh", "-n", env).CombinedOutput(); err != nil {
		t.Errorf("sh -n %s: %v\n%s", env, err, out)
	}
}

// TestExampleEnvFile: the shipped example env file is accepted as is.
func TestExampleEnvFile(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(filepath.Dir(scriptSource(t)), "cluster-gate.env"))
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t)
	writeFile(t, r.env, string(data)+"\nGATE_ETCD=no\n", 0o600)
	r.expect(gate.PhasePreLock, exitOK, "no check enabled for this phase")
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		env   []string
		code  int
		wants []string
	}{
		{"no checks", []string{"GATE_ETCD=no"}, exitOK, []string{"ok: pre-lock on node-1: no check enabled for this phase"}},
		{"bad timeout", []string{"GATE_ETCD_TIMEOUT=10s"}, exitConfig, []string{"GATE_ETCD_TIMEOUT must be a whole number > 0, not '10s'"}},
		{"zero min", []string{"GATE_FALLBACK_MIN=0"}, exitConfig, []string{"GATE_FALLBACK_MIN must be a whole number > 0"}},
		{"bad phase list", []string{"GATE_PROM_PHASES=prelock"}, exitConfig, []string{"GATE_PROM_PHASES: unknown phase 'prelock'"}},
		{"bad yes/no", []string{"GATE_ETCD=true"}, exitConfig, []string{"GATE_ETCD must be yes or no"}},
		{"syntax error", []string{"GATE_ETCD=(yes"}, exitConfig, []string{"is not valid sh"}},
		{"no endpoints", []string{"GATE_ETCD_LOCAL_MEMBER=none"}, exitConfig, []string{"refused: etcd: no endpoints: set GATE_ETCD_ENDPOINTS"}},
		{"etcdctl missing", []string{"GATE_ETCDCTL=/nonexistent/etcdctl"}, exitMissing,
			[]string{"refused: missing tool: /nonexistent/etcdctl (needed by the etcd check"}},
		{"curl missing", []string{"GATE_ETCD=no", "GATE_CURL=/nonexistent/curl", "GATE_PROM_URL=http://127.0.0.1:1"}, exitMissing,
			[]string{"refused: missing tool: /nonexistent/curl (needed by the alerts check"}},
		{"probe command missing", []string{"GATE_ETCD=no", "GATE_FALLBACK_COMMAND='/nonexistent/probe --fast'", "GATE_FALLBACK_TARGETS=lb-2=x:1"}, exitMissing,
			[]string{"missing tool: /nonexistent/probe"}},
		{"systemctl via units", []string{"GATE_ETCD=no", "GATE_REQUIRED_UNITS=clusterrebootd-healthgate-test-nonexistent.service"}, -1,
			[]string{"refused: "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, tc.env...)
			res := r.run(gate.PhasePreLock)
			code := tc.code
			if code == -1 { // units: 1 where systemctl exists, 3 where it does not
				code = exitFailed
				if _, err := exec.LookPath("systemctl"); err != nil {
					code = exitMissing
				}
			}
			r.check(res, code, tc.wants...)
		})
	}
}

func TestEnvFileSafety(t *testing.T) {
	r := newRig(t, "GATE_ETCD=no")
	r.expect(gate.PhasePreLock, exitOK)

	for _, mode := range []os.FileMode{0o620, 0o602, 0o666} {
		if err := os.Chmod(r.env, mode); err != nil {
			t.Fatal(err)
		}
		r.expect(gate.PhasePreLock, exitConfig, "must be owned by root and not group- or world-writable")
	}
	if err := os.Chmod(r.env, 0o644); err != nil { // readable by all is fine
		t.Fatal(err)
	}
	r.expect(gate.PhasePreLock, exitOK)

	if err := os.Chmod(r.dir, 0o770); err != nil {
		t.Fatal(err)
	}
	r.expect(gate.PhasePreLock, exitConfig, "the directory of")
	if err := os.Chmod(r.dir, 0o700); err != nil {
		t.Fatal(err)
	}

	if os.Getuid() == 0 {
		if err := os.Chown(r.env, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		r.expect(gate.PhasePreLock, exitConfig, "must be owned by root")
		if err := os.Chown(r.env, 0, 0); err != nil {
			t.Fatal(err)
		}
	}

	if err := os.Remove(r.env); err != nil {
		t.Fatal(err)
	}
	r.expect(gate.PhasePreLock, exitConfig, "does not exist")
}

func TestPhaseArgument(t *testing.T) {
	r := newRig(t, "GATE_ETCD=no")
	run := func(argv []string, env ...string) result {
		t.Helper()
		res, err := proc.Run(t.Context(), proc.Cmd{
			Argv: argv, Timeout: runTimeout,
			Env: append([]string{proc.SafePath, "NODE_NAME=node-1", "CLUSTER_GATE_ENV=" + r.env}, env...),
		})
		if err != nil {
			t.Fatal(err)
		}
		return result{code: res.ExitCode, first: res.FirstLine(), out: string(res.Output)}
	}
	// By hand: the argument alone is enough.
	r.check(run([]string{r.script, "post-boot"}), exitOK, "ok: post-boot on node-1")
	// Only the environment: fine too.
	r.check(run([]string{r.script}, "CLUSTERREBOOTD_PHASE=under-lock"), exitOK, "ok: under-lock")
	r.check(run([]string{r.script}), exitConfig, "unknown phase ''")
	r.check(run([]string{r.script, "reboot"}), exitConfig, "unknown phase 'reboot'")
	r.check(run([]string{r.script, "pre-lock"}, "CLUSTERREBOOTD_PHASE=post-boot"), exitConfig, "differs from CLUSTERREBOOTD_PHASE")
	// Not executable (as shipped under /usr/share/doc): sh runs it all the same.
	res := run([]string{"sh", scriptSource(t), "pre-lock"})
	r.check(res, exitOK, "ok: pre-lock")
	if strings.Count(res.out, "\n") != 1 {
		t.Fatalf("want a single line without checks: %q", res.out)
	}
}
