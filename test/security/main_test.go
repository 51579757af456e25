package security

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// binary is the clusterrebootd binary under test: $CLUSTERREBOOTD_BIN when
// set (a prebuilt binary, as hack/e2e/verify-units.sh takes it), otherwise
// built once by TestMain.
var binary string

const envBinary = "CLUSTERREBOOTD_BIN"

const productPkg = "github.com/clusterrebootd/clusterrebootd/cmd/clusterrebootd"

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "clusterrebootd-security-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "security:", err)
		os.Exit(1)
	}
	code := 1
	if binary = os.Getenv(envBinary); binary != "" {
		code = m.Run()
	} else if binary, err = build(dir); err != nil {
		fmt.Fprintln(os.Stderr, "security:", err)
	} else {
		code = m.Run()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// build compiles the product into dir.
func build(dir string) (string, error) {
	out := filepath.Join(dir, "clusterrebootd")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, productPkg)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, b)
	}
	return out, nil
}
