// Package healthgate tests the reference health gate, the shell script
// packaging/examples/cluster-gate, against real etcd clusters (test/etcdtest),
// a real etcdctl built from the Go module (hack/etcdctl), real TCP and HTTP
// listeners for fallback probes and an httptest server that answers like
// Prometheus' query API.
//
// The script runs as clusterrebootd runs it: argv [script, phase], the exact
// environment of lib/gate.ScriptEnv.Environ (plus CLUSTER_GATE_ENV naming the
// test's env file), in its own process group through lib/proc, and the verdict
// is read the way clusterrebootd reads it: exit status and first output line.
//
// etcdctl is $CLUSTERREBOOTD_ETCDCTL_BIN when set, otherwise <repo>/bin/etcdctl,
// built once under a file lock from the hack module when missing.
package healthgate
