package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	co "github.com/clusterrebootd/clusterrebootd/lib/coordinator"
)

// SIGHUP re-reads the configuration for a running holder: a valid file is
// handed over as a Reload with its new settings, an invalid one is logged
// and nothing is handed over.
func TestReloadOnHangup(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.toml")
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(cfgPath, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	base := `node_name = "n1"
[etcd]
endpoints = ["http://127.0.0.1:1"]
[systemd]
holder = "foreground"
[paths]
state_dir = "` + dir + `/state"
run_dir = "` + dir + `/run"
`
	write(base + "[lock]\nmax_reboot_duration = \"45m\"\n")
	logs := &lockedBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	e := &Env{Ctx: t.Context(), G: &Globals{Config: cfgPath}, Stdout: logs, Stderr: logs, Hostname: "n1"}
	reloads := make(chan co.Reload, 1)
	stop := e.reloadOnHangup(log, reloads)
	defer stop()

	hangup := func() {
		t.Helper()
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	hangup()
	select {
	case r := <-reloads:
		if r.Options.MaxRebootDuration != 45*time.Minute || r.Options.Node != "n1" || r.Deps.Script == nil || r.Deps.Windows == nil {
			t.Fatalf("reload = %+v", r.Options)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no reload after SIGHUP; log:\n%s", logs.String())
	}

	write(base + "[lock]\nmax_concurent = 2\n") // typo: invalid
	hangup()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "configuration not reloaded") {
		if time.Now().After(deadline) {
			t.Fatalf("invalid config not reported; log:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case r := <-reloads:
		t.Fatalf("an invalid configuration was handed over: %+v", r.Options)
	default:
	}
	if !strings.Contains(logs.String(), "max_concurent") {
		t.Errorf("the error does not name the bad key; log:\n%s", logs.String())
	}
}

// lockedBuffer is a bytes.Buffer the reload goroutine writes while the test
// reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
