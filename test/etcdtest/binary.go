package etcdtest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// EnvBinary names the environment variable that points at a prebuilt etcd.
const EnvBinary = "CLUSTERREBOOTD_ETCD_BIN"

// rootModule is the module line that identifies the repository root.
const rootModule = "github.com/clusterrebootd/clusterrebootd"

// buildTimeout bounds `go build` of the etcd server (a cold module cache
// downloads the server's dependencies first).
const buildTimeout = 9 * time.Minute

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// Binary returns the path of the etcd binary, building it once when needed.
// It fails the test when the binary can neither be found nor built.
func Binary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() { binPath, binErr = locateBinary() })
	if binErr != nil {
		t.Fatalf("etcdtest: %v", binErr)
	}
	return binPath
}

func locateBinary() (string, error) {
	if p := os.Getenv(EnvBinary); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w", EnvBinary, p, err)
		}
		return p, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	root, err := RepoRoot(wd)
	if err != nil {
		return "", err
	}
	return buildBinary(root)
}

// RepoRoot walks up from dir to the directory whose go.mod declares the
// clusterrebootd root module.
func RepoRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		if isRootModule(filepath.Join(dir, "go.mod")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod with module %s above the working directory", rootModule)
		}
		dir = parent
	}
}

func isRootModule(gomod string) bool {
	data, err := os.ReadFile(gomod)
	if err != nil {
		return false
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`) == rootModule
		}
	}
	return false
}

// buildBinary builds <root>/bin/etcd from <root>/hack unless it exists. A
// flock on <root>/bin/.etcd.lock serialises concurrent test processes, and
// the binary is renamed into place so nobody ever runs a half-written file.
func buildBinary(root string) (string, error) {
	binDir := filepath.Join(root, "bin")
	bin := filepath.Join(binDir, "etcd")
	if isExecutable(bin) {
		return bin, nil
	}
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(binDir, ".etcd.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	// Closing the file (deferred above) releases the lock.
	if isExecutable(bin) {
		return bin, nil // built by another process while we waited
	}
	tmp := fmt.Sprintf("%s.tmp%d", bin, os.Getpid())
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", tmp, "./etcd")
	cmd.Dir = filepath.Join(root, "hack")
	out, err := cmd.CombinedOutput()
	if err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("go build ./etcd in %s: %w\n%s", cmd.Dir, err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return bin, nil
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}
