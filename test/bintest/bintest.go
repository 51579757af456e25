// Package bintest builds the clusterrebootd binary for the process-level
// test suites (test/integration, test/hostile, test/security), which run it
// as a subprocess.
//
// Invariants: the binary is built from the working tree into a directory
// the caller owns; a build with race enabled uses -race (and cgo), so the
// product runs under the race detector when the suite does; every build is
// bounded by BuildTimeout.
package bintest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// ProductPkg is the command under test.
const ProductPkg = "github.com/clusterrebootd/clusterrebootd/cmd/clusterrebootd"

// BuildTimeout bounds `go build` (a cold module cache downloads first).
const BuildTimeout = 5 * time.Minute

// Build compiles the product into dir/clusterrebootd, with -race when race
// is set, and returns its path.
func Build(dir string, race bool) (string, error) {
	out := filepath.Join(dir, "clusterrebootd")
	args := []string{"build", "-o", out}
	env := os.Environ()
	if race {
		args = append(args, "-race")
		env = append(env, "CGO_ENABLED=1")
	}
	args = append(args, ProductPkg)
	ctx, cancel := context.WithTimeout(context.Background(), BuildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Env = env
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %v: %w\n%s", args, err, b)
	}
	return out, nil
}
