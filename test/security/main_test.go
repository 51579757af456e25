package security

import (
	"fmt"
	"os"
	"testing"

	"github.com/clusterrebootd/clusterrebootd/test/bintest"
)

// binary is the clusterrebootd binary under test: $CLUSTERREBOOTD_BIN when
// set (a prebuilt binary, as hack/e2e/verify-units.sh takes it), otherwise
// built once by TestMain.
var binary string

const envBinary = "CLUSTERREBOOTD_BIN"

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "clusterrebootd-security-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "security:", err)
		os.Exit(1)
	}
	code := 1
	if binary = os.Getenv(envBinary); binary != "" {
		code = m.Run()
	} else if binary, err = bintest.Build(dir, false); err != nil {
		fmt.Fprintln(os.Stderr, "security:", err)
	} else {
		code = m.Run()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}
