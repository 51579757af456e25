package hostile

import (
	"testing"

	"github.com/clusterrebootd/clusterrebootd/test/etcdtest"
)

// TestWithEtcd runs every group that needs a real etcd against one server,
// each case on a cluster (etcd prefix) of its own, in parallel.
func TestWithEtcd(t *testing.T) {
	t.Parallel()
	endpoints := etcdtest.Start(t).Endpoints()
	for _, g := range []struct {
		name string
		run  func(t *testing.T, endpoints []string)
	}{
		{"CorruptValues", testCorruptValues},
		{"CorruptHistory", testCorruptHistory},
		{"CorruptLockWaiter", testCorruptLockWaiter},
		{"NodeArgs", testNodeArgs},
		{"OperatorArgs", testOperatorArgs},
		{"HealthScript", testHealthScript},
		{"OddPaths", testOddPaths},
	} {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			g.run(t, endpoints)
		})
	}
}
