// Command etcdctl is the real etcdctl, built from the go.etcd.io/etcd/etcdctl/v3
// Go module at the version pinned in hack/go.mod. The tests of the reference
// health gate (test/healthgate) run it against real etcd servers, so that no
// prebuilt binary has to be downloaded.
//
//	cd hack && go build -o ../bin/etcdctl ./etcdctl
package main

import "go.etcd.io/etcd/etcdctl/v3/ctlv3"

func main() {
	ctlv3.MustStart()
}
