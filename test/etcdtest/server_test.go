package etcdtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestRepoRoot(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := RepoRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	if !isRootModule(filepath.Join(root, "go.mod")) {
		t.Fatalf("RepoRoot(%s) = %s: not the root module", wd, root)
	}
	// hack/ has its own go.mod with another module line: it must be skipped.
	if got, err := RepoRoot(filepath.Join(root, "hack", "etcd")); err != nil || got != root {
		t.Fatalf("RepoRoot(hack/etcd) = %q, %v; want %q", got, err, root)
	}
	if _, err := RepoRoot(t.TempDir()); err == nil {
		t.Fatal("RepoRoot outside the repository: want an error")
	}
}

func TestIsRootModule(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		content string
		want    bool
	}{
		{"module github.com/clusterrebootd/clusterrebootd\n\ngo 1.26\n", true},
		{"// comment\nmodule \"github.com/clusterrebootd/clusterrebootd\"\n", true},
		{"module github.com/clusterrebootd/clusterrebootd/hack\n", false},
		{"go 1.26\n", false},
	} {
		p := filepath.Join(dir, "go.mod")
		if err := os.WriteFile(p, []byte(tc.content), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := isRootModule(p); got != tc.want {
			t.Errorf("isRootModule(%q) = %v, want %v", tc.content, got, tc.want)
		}
	}
}

func put(t *testing.T, s *Server, key, val string) {
	t.Helper()
	cli := newClient(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, key, val); err != nil {
		t.Fatalf("put: %v", err)
	}
}

func get(t *testing.T, s *Server, key string) string {
	t.Helper()
	cli := newClient(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, key)
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if len(resp.Kvs) == 0 {
		return ""
	}
	return string(resp.Kvs[0].Value)
}

func newClient(t *testing.T, s *Server) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: s.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func TestServerLifecycle(t *testing.T) {
	s := Start(t)
	if !s.Running() {
		t.Fatal("not running after Start")
	}
	put(t, s, "k", "v1")

	s.Stop()
	if s.Running() {
		t.Fatal("running after Stop")
	}
	s.Stop() // idempotent
	s.Restart(t)
	if got := get(t, s, "k"); got != "v1" {
		t.Fatalf("after Stop+Restart: k = %q, want v1", got)
	}

	put(t, s, "k", "v2")
	s.Kill()
	s.Restart(t)
	if got := get(t, s, "k"); got != "v2" {
		t.Fatalf("after Kill+Restart: k = %q, want v2", got)
	}

	// Restart of a running server stops it first.
	s.Restart(t)
	if got := get(t, s, "k"); got != "v2" {
		t.Fatalf("after Restart while running: k = %q, want v2", got)
	}
	if _, err := os.Stat(s.LogPath()); err != nil {
		t.Fatalf("log file: %v", err)
	}
}

func TestTwoServersAreIndependent(t *testing.T) {
	a, b := Start(t), Start(t)
	if a.ClientURL() == b.ClientURL() || a.DataDir() == b.DataDir() {
		t.Fatalf("servers share endpoint or data: %s %s", a.ClientURL(), b.ClientURL())
	}
	put(t, a, "only-a", "x")
	if got := get(t, b, "only-a"); got != "" {
		t.Fatalf("key leaked to the other server: %q", got)
	}
}

func TestBinaryFromEnv(t *testing.T) {
	bin := Binary(t)
	t.Setenv(EnvBinary, bin)
	if got, err := (&hackBinary{env: EnvBinary, pkg: "etcd"}).locate(); err != nil || got != bin {
		t.Fatalf("locate with %s set = %q, %v", EnvBinary, got, err)
	}
	t.Setenv(EnvBinary, filepath.Join(t.TempDir(), "missing"))
	if _, err := (&hackBinary{env: EnvBinary, pkg: "etcd"}).locate(); err == nil {
		t.Fatal("missing binary from env: want an error")
	}
}

// fakeRepo lays out a repository root whose hack module builds a trivial
// "etcd" (or a broken one).
func fakeRepo(t *testing.T, mainSrc string) string {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		"go.mod":            "module " + rootModule + "\n\ngo 1.26\n",
		"hack/go.mod":       "module example.com/hack\n\ngo 1.26\n",
		"hack/etcd/main.go": mainSrc,
	}
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestBuildBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go build")
	}
	root := fakeRepo(t, "package main\n\nfunc main() {}\n")
	bin, err := etcdBinary.build(root)
	if err != nil {
		t.Fatal(err)
	}
	if bin != filepath.Join(root, "bin", "etcd") || !isExecutable(bin) {
		t.Fatalf("build = %s, not an executable at <root>/bin/etcd", bin)
	}
	before, _ := os.Stat(bin)
	// Present: not rebuilt.
	if again, err := etcdBinary.build(root); err != nil || again != bin {
		t.Fatalf("second build = %s, %v", again, err)
	}
	after, _ := os.Stat(bin)
	if !after.ModTime().Equal(before.ModTime()) {
		t.Fatal("existing binary was rebuilt")
	}
	if _, err := os.Stat(filepath.Join(root, "bin", ".etcd.lock")); err != nil {
		t.Fatalf("lock file: %v", err)
	}

	broken := fakeRepo(t, "package main\n\nfunc main() { undefined() }\n")
	if _, err := etcdBinary.build(broken); err == nil || !strings.Contains(err.Error(), "undefined") {
		t.Fatalf("broken build: %v, want the compiler's message", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(broken, "bin")); len(entries) != 1 {
		t.Fatalf("broken build left files behind: %v", entries)
	}
}

// fatalTB records Fatalf instead of stopping the test.
type fatalTB struct {
	testing.TB
	fatal string
}

func (f *fatalTB) Fatalf(format string, args ...any) { f.fatal = fmt.Sprintf(format, args...) }

func TestStartFailureShowsLog(t *testing.T) {
	ftb := &fatalTB{TB: t}
	if s := StartWith(ftb, Options{Args: []string{"--no-such-flag"}}); s != nil {
		t.Fatal("StartWith with a bad flag returned a server")
	}
	if !strings.Contains(ftb.fatal, "etcd exited") || !strings.Contains(ftb.fatal, "no-such-flag") {
		t.Fatalf("failure report %q lacks the cause or the log", ftb.fatal)
	}
}
