package etcdtest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Cluster is a multi-member etcd cluster: one Server per member, all on
// 127.0.0.1 with their own ports and data directories.
//
// Each member is an ordinary Server, so Stop, Kill, Restart and Running work
// per member. A member's Restart waits for /health, which needs a leader:
// restart members while a quorum of the others is up, or use StartMembers.
type Cluster struct {
	Members []*Server
	names   []string
}

// StartCluster starts a cluster with one member per name (member names are
// etcd's --name, so they show up in `etcdctl member list`) and waits until
// every member is healthy. The members are stopped when the test ends. o
// applies to every member; its Args come before the cluster's own flags, so
// they cannot change names or the initial cluster.
func StartCluster(t testing.TB, names []string, o Options) *Cluster {
	t.Helper()
	if len(names) == 0 {
		t.Fatal("etcdtest: StartCluster needs at least one member name")
	}
	seen := map[string]bool{}
	for _, n := range names {
		if n == "" || seen[n] || strings.ContainsAny(n, ",= ") {
			t.Fatalf("etcdtest: bad or duplicate member name %q", n)
		}
		seen[n] = true
	}
	bin := Binary(t)
	c := &Cluster{names: append([]string(nil), names...)}
	for range names {
		s := &Server{bin: bin, dir: t.TempDir()}
		t.Cleanup(s.Stop)
		c.Members = append(c.Members, s)
	}
	var err error
	for attempt := 0; attempt < startAttempts; attempt++ {
		if err = c.start(o); err == nil {
			return c
		}
		for _, s := range c.Members {
			s.Kill()
		}
		if !c.portClash() {
			break
		}
		for _, s := range c.Members {
			if rerr := os.RemoveAll(s.DataDir()); rerr != nil {
				t.Fatalf("etcdtest: %v", rerr)
			}
		}
	}
	var logs strings.Builder
	for i, s := range c.Members {
		fmt.Fprintf(&logs, "--- etcd log of %s (tail) ---\n%s\n", names[i], s.logTail())
	}
	t.Fatalf("etcdtest: start cluster: %v\n%s", err, logs.String())
	return nil
}

// start picks ports for every member, launches all of them (a member only
// becomes healthy once a quorum has started) and waits for each.
func (c *Cluster) start(o Options) error {
	for _, s := range c.Members {
		if err := s.pickPorts(); err != nil {
			return err
		}
	}
	initial := make([]string, len(c.Members))
	for i, s := range c.Members {
		initial[i] = c.names[i] + "=" + s.peerURL()
	}
	token := "etcdtest-" + filepath.Base(c.Members[0].dir)
	for i, s := range c.Members {
		so := o
		so.Args = append(append([]string(nil), o.Args...),
			"--name="+c.names[i],
			"--initial-cluster="+strings.Join(initial, ","),
			"--initial-cluster-token="+token,
		)
		s.opts = so
		if err := s.launch(); err != nil {
			return err
		}
	}
	for i, s := range c.Members {
		if err := s.waitHealthy(); err != nil {
			return fmt.Errorf("member %s: %w", c.names[i], err)
		}
	}
	return nil
}

func (c *Cluster) portClash() bool {
	for _, s := range c.Members {
		if strings.Contains(s.logTail(), "address already in use") {
			return true
		}
	}
	return false
}

// Names returns the member names in the order given to StartCluster.
func (c *Cluster) Names() []string { return append([]string(nil), c.names...) }

// Member returns the member called name; the test fails when there is none.
func (c *Cluster) Member(t testing.TB, name string) *Server {
	t.Helper()
	for i, n := range c.names {
		if n == name {
			return c.Members[i]
		}
	}
	t.Fatalf("etcdtest: no member %q in %v", name, c.names)
	return nil
}

// Endpoints returns the client URLs of all members, running or not.
func (c *Cluster) Endpoints() []string {
	eps := make([]string, len(c.Members))
	for i, s := range c.Members {
		eps[i] = s.ClientURL()
	}
	return eps
}

// StartMembers relaunches the given stopped members together and waits until
// each is healthy: use it to bring back members that cannot form a quorum
// one at a time. Running members are left alone.
func (c *Cluster) StartMembers(t testing.TB, names ...string) {
	t.Helper()
	var started []*Server
	for _, n := range names {
		s := c.Member(t, n)
		if s.Running() {
			continue
		}
		if err := s.launch(); err != nil {
			t.Fatalf("etcdtest: relaunch %s: %v", n, err)
		}
		started = append(started, s)
	}
	for _, s := range started {
		if err := s.waitHealthy(); err != nil {
			t.Fatalf("etcdtest: relaunch: %v\n--- etcd log (tail) ---\n%s", err, s.logTail())
		}
	}
}

func (s *Server) peerURL() string { return fmt.Sprintf("http://127.0.0.1:%d", s.peer) }
