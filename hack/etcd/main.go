// Command etcd is the real etcd server, built from the go.etcd.io/etcd/server/v3
// Go module at the version pinned in hack/go.mod. Tests (test/etcdtest) and the
// demo run it so that no prebuilt binary has to be downloaded.
//
//	cd hack && go build -o ../bin/etcd ./etcd
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
