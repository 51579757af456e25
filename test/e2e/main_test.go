//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/test/etcdtest"
)

// Environment knobs (all optional).
const (
	envBin     = "CLUSTERREBOOTD_BIN" // prebuilt clusterrebootd (make passes bin/clusterrebootd)
	envRootfs  = "E2E_ROOTFS"         // prebuilt node root file system, skips hack/e2e/rootfs.sh
	envKeep    = "E2E_KEEP"           // "1": keep the work directory (logs, node overlays) after the run
	envHolder  = "E2E_HOLDER"         // [systemd] holder for the nodes, default defaultHolder
	envReboot  = "E2E_REBOOT_METHOD"  // [reboot] method for the nodes, default defaultRebootMethod
	envNfdelay = "NFDELAY_BIN"        // prebuilt hack/nfdelay (delay without sch_netem), default: built by the suite
	workPrefix = "clusterrebootd-e2e-"
)

// suite is what all scenarios share: binaries, the node root file system,
// the bridge and the etcd cluster. Built once, by the first test that needs
// it; torn down by TestMain.
type suite struct {
	repo    string // repository root
	work    string // host work directory of this run
	bin     string // clusterrebootd binary installed into the nodes
	nfdelay string // hack/nfdelay: delay and jitter on NFQUEUE (hack/e2e/netem.sh)
	rootfs  string // lower directory of every node's overlay
	etcd    *etcdCluster
	cg      cgroupLayout
	timing  map[string]time.Duration // setup phases, for the report
}

var (
	suiteOnce sync.Once
	theSuite  *suite
	suiteErr  error
	teardowns []func() // run by TestMain in reverse order
	tdMu      sync.Mutex
)

func onTeardown(f func()) {
	tdMu.Lock()
	defer tdMu.Unlock()
	teardowns = append(teardowns, f)
}

func runTeardowns() {
	tdMu.Lock()
	fs := teardowns
	teardowns = nil
	tdMu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}

func TestMain(m *testing.M) {
	// Ctrl-C or a SIGTERM from CI: tear down what exists, then die.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s := <-sigs
		fmt.Fprintf(os.Stderr, "e2e: %v: tearing down\n", s)
		stopAllNodes()
		runTeardowns()
		os.Exit(130)
	}()
	code := m.Run()
	stopAllNodes()
	runTeardowns()
	os.Exit(code)
}

// needSuite returns the shared fixture, building it on first use, or skips
// the test when it cannot run here (not root, no systemd-nspawn possible).
func needSuite(t *testing.T) *suite {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("e2e: needs root (systemd-nspawn, network namespaces, cgroups)")
	}
	if _, err := os.Stat("/sys/fs/cgroup"); err != nil {
		t.Skip("e2e: no /sys/fs/cgroup")
	}
	suiteOnce.Do(func() {
		done := false
		defer func() {
			if !done && suiteErr == nil {
				suiteErr = errors.New("suite setup aborted (see the first test's log)")
			}
		}()
		theSuite, suiteErr = setupSuite(t)
		done = true
	})
	if suiteErr != nil {
		t.Fatalf("e2e setup: %v", suiteErr)
	}
	return theSuite
}

func setupSuite(t *testing.T) (*suite, error) {
	t0 := time.Now()
	repo, err := etcdtest.RepoRoot(".")
	if err != nil {
		return nil, err
	}
	s := &suite{repo: repo, timing: map[string]time.Duration{}}
	if s.cg, err = detectCgroups(); err != nil {
		return nil, err
	}
	cleanStale(t)

	if s.work, err = os.MkdirTemp("", workPrefix); err != nil {
		return nil, err
	}
	if err := os.Chmod(s.work, 0o755); err != nil {
		return nil, err
	}
	if err := writeStateFile(s.work); err != nil {
		return nil, err
	}
	onTeardown(func() {
		removeStateFile()
		if os.Getenv(envKeep) == "1" {
			fmt.Fprintf(os.Stderr, "e2e: %s=1: kept %s\n", envKeep, s.work)
			return
		}
		os.RemoveAll(s.work)
	})
	t.Logf("e2e: work directory %s", s.work)

	// The three slow parts run at once: the root file system (network and
	// disk), the two Go builds (CPU).
	// Each goroutine writes only its own variables; s.timing is filled
	// after the Wait.
	var wg sync.WaitGroup
	var rootErr, binErr, nfdErr error
	var rootTook, binTook time.Duration
	var etcdBin string
	wg.Add(3)
	go func() {
		defer wg.Done()
		t1 := time.Now()
		s.rootfs, rootErr = buildRootfs(repo)
		rootTook = time.Since(t1)
	}()
	go func() {
		defer wg.Done()
		t1 := time.Now()
		s.bin, binErr = buildBinary(repo, s.work)
		binTook = time.Since(t1)
	}()
	go func() {
		defer wg.Done()
		s.nfdelay, nfdErr = buildNfdelay(repo, s.work)
	}()
	t1 := time.Now()
	etcdBin = etcdtest.Binary(t) // builds bin/etcd from hack/ unless present
	s.timing["build etcd"] = time.Since(t1)
	wg.Wait()
	s.timing["rootfs"], s.timing["build clusterrebootd"] = rootTook, binTook
	if err := errors.Join(rootErr, binErr, nfdErr); err != nil {
		return nil, err
	}

	t1 = time.Now()
	if err := setupNetwork(); err != nil {
		teardownNetwork()
		return nil, err
	}
	onTeardown(teardownNetwork)
	s.etcd, err = startEtcd(etcdBin, filepath.Join(s.work, "etcd"))
	if s.etcd != nil {
		onTeardown(s.etcd.stop)
	}
	if err != nil {
		return nil, err
	}
	s.timing["etcd cluster ready"] = time.Since(t1)
	s.timing["setup total"] = time.Since(t0)
	for _, k := range []string{"rootfs", "build clusterrebootd", "build etcd", "etcd cluster ready", "setup total"} {
		t.Logf("e2e timing: %-22s %v", k, s.timing[k].Round(time.Millisecond))
	}
	return s, nil
}

// buildRootfs runs hack/e2e/rootfs.sh (cached) unless E2E_ROOTFS names a tree.
func buildRootfs(repo string) (string, error) {
	if p := os.Getenv(envRootfs); p != "" {
		if _, err := os.Stat(filepath.Join(p, "usr/lib/systemd/systemd")); err != nil {
			return "", fmt.Errorf("%s=%s: not a root file system with systemd: %w", envRootfs, p, err)
		}
		return p, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(repo, "hack/e2e/rootfs.sh"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hack/e2e/rootfs.sh: %w\n%s", err, tail(stderr.String(), 4000))
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	p := lines[len(lines)-1]
	if _, err := os.Stat(filepath.Join(p, "usr/lib/systemd/systemd")); err != nil {
		return "", fmt.Errorf("hack/e2e/rootfs.sh printed %q: %w", p, err)
	}
	return p, nil
}

// buildBinary builds the static clusterrebootd for the nodes, unless
// CLUSTERREBOOTD_BIN names one.
func buildBinary(repo, work string) (string, error) {
	return buildStatic(repo, work, envBin, ".", "./cmd/clusterrebootd", "clusterrebootd")
}

// buildNfdelay builds hack/nfdelay (standard library only, a few seconds)
// into the work directory, unless NFDELAY_BIN names one.
func buildNfdelay(repo, work string) (string, error) {
	return buildStatic(repo, work, envNfdelay, "hack", "./nfdelay", "nfdelay")
}

// buildStatic returns the binary the environment variable env names
// (relative to repo), or builds package pkg of the module in repo/module
// without cgo into work/name.
func buildStatic(repo, work, env, module, pkg, name string) (string, error) {
	if p := os.Getenv(env); p != "" {
		if !filepath.IsAbs(p) {
			p = filepath.Join(repo, p)
		}
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s: %w", env, err)
		}
		return p, nil
	}
	out := filepath.Join(work, name)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", out, pkg)
	cmd.Dir = filepath.Join(repo, module)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s in %s: %w\n%s", pkg, cmd.Dir, err, b)
	}
	return out, nil
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
