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

// EnvEtcdctl names the environment variable that points at a prebuilt
// etcdctl (the reference health gate's tests run it).
const EnvEtcdctl = "CLUSTERREBOOTD_ETCDCTL_BIN"

// hackBinary is a program of the hack/ module a test runs: taken from its
// environment variable, else <root>/bin/<pkg>, built once when missing.
type hackBinary struct {
	env, pkg string
	once     sync.Once
	path     string
	err      error
}

var (
	etcdBinary    = &hackBinary{env: EnvBinary, pkg: "etcd"}
	etcdctlBinary = &hackBinary{env: EnvEtcdctl, pkg: "etcdctl"}
)

// Binary returns the path of the etcd binary, building it once when needed.
// It fails the test when the binary can neither be found nor built.
func Binary(t testing.TB) string {
	t.Helper()
	return etcdBinary.get(t)
}

// Etcdctl returns the path of an etcdctl binary, like Binary.
func Etcdctl(t testing.TB) string {
	t.Helper()
	return etcdctlBinary.get(t)
}

func (b *hackBinary) get(t testing.TB) string {
	t.Helper()
	b.once.Do(func() { b.path, b.err = b.locate() })
	if b.err != nil {
		t.Fatalf("etcdtest: %v", b.err)
	}
	return b.path
}

func (b *hackBinary) locate() (string, error) {
	if p := os.Getenv(b.env); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w", b.env, p, err)
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
	return b.build(root)
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

// build builds <root>/bin/<pkg> from <root>/hack unless it exists. A flock
// on <root>/bin/.<pkg>.lock serialises concurrent test processes, and the
// binary is renamed into place so nobody ever runs a half-written file.
func (b *hackBinary) build(root string) (string, error) {
	binDir := filepath.Join(root, "bin")
	bin := filepath.Join(binDir, b.pkg)
	if isExecutable(bin) {
		return bin, nil
	}
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(binDir, "."+b.pkg+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
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
	cmd := exec.CommandContext(ctx, "go", "build", "-o", tmp, "./"+b.pkg)
	cmd.Dir = filepath.Join(root, "hack")
	out, err := cmd.CombinedOutput()
	if err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("go build ./%s in %s: %w\n%s", b.pkg, cmd.Dir, err, out)
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
