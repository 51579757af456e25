package integration

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/clusterrebootd/clusterrebootd/test/bintest"
)

// binary is the clusterrebootd binary under test, built once by TestMain.
var binary string

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
	if binary, err = bintest.Build(dir, raceEnabled); err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
	} else {
		code = m.Run()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}
