package integration

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// binary is the clusterrebootd binary under test, built once by TestMain.
var binary string

const productPkg = "github.com/clusterrebootd/clusterrebootd/cmd/clusterrebootd"

// defaultParallel replaces -test.parallel's default (GOMAXPROCS) unless it is
// given explicitly: the tests spend their time waiting on leases and
// subprocesses, not on CPU.
const defaultParallel = "8"

func TestMain(m *testing.M) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		_ = flag.Set("test.parallel", defaultParallel)
	}
	dir, err := os.MkdirTemp("", "clusterrebootd-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		os.Exit(1)
	}
	code := 1
	if binary, err = build(dir); err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
	} else {
		code = m.Run()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// build compiles the product into dir, with -race when the suite itself runs
// under the race detector.
func build(dir string) (string, error) {
	out := filepath.Join(dir, "clusterrebootd")
	args := []string{"build", "-o", out}
	env := os.Environ()
	if raceEnabled {
		args = append(args, "-race")
		env = append(env, "CGO_ENABLED=1")
	}
	args = append(args, productPkg)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Env = env
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %v: %w\n%s", args, err, b)
	}
	return out, nil
}
