//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// etcdCluster is three etcd members, each in its own network namespace on
// the bridge, and the test's own client to them.
type etcdCluster struct {
	members []*etcdMember
	cli     *clientv3.Client
}

type etcdMember struct {
	name, ns, ip string
	cmd          *exec.Cmd
	done         chan struct{}
}

// endpoints are the client URLs the nodes use.
func (c *etcdCluster) endpoints() []string {
	var eps []string
	for _, m := range c.members {
		eps = append(eps, "http://"+m.ip+":2379")
	}
	return eps
}

// startEtcd starts the members and waits until the cluster serves writes.
func startEtcd(bin, dir string) (*etcdCluster, error) {
	var peers []string
	for i := 1; i <= etcdMembers; i++ {
		peers = append(peers, fmt.Sprintf("e%d=http://%s:2380", i, etcdIP(i)))
	}
	c := &etcdCluster{}
	for i := 1; i <= etcdMembers; i++ {
		m := &etcdMember{name: fmt.Sprintf("e%d", i), ns: etcdNS(i), ip: etcdIP(i), done: make(chan struct{})}
		data := filepath.Join(dir, m.name)
		if err := os.MkdirAll(data, 0o700); err != nil {
			return c, err
		}
		logf, err := os.Create(filepath.Join(dir, m.name+".log"))
		if err != nil {
			return c, err
		}
		// `ip netns exec` execs etcd: the pid is etcd's.
		m.cmd = exec.Command("ip", "netns", "exec", m.ns, bin,
			"--name", m.name, "--data-dir", data,
			"--listen-client-urls", "http://"+m.ip+":2379", "--advertise-client-urls", "http://"+m.ip+":2379",
			"--listen-peer-urls", "http://"+m.ip+":2380", "--initial-advertise-peer-urls", "http://"+m.ip+":2380",
			"--initial-cluster", strings.Join(peers, ","), "--initial-cluster-token", "cre2e",
			"--initial-cluster-state", "new", "--log-level", "warn")
		m.cmd.Stdout, m.cmd.Stderr = logf, logf
		m.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := m.cmd.Start(); err != nil {
			logf.Close()
			return c, fmt.Errorf("start etcd %s: %w", m.name, err)
		}
		writePidFile("etcd-"+m.name, m.cmd.Process.Pid)
		go func() {
			_ = m.cmd.Wait()
			logf.Close()
			close(m.done)
		}()
		c.members = append(c.members, m)
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: c.endpoints(), DialTimeout: 2 * time.Second, Logger: zap.NewNop(),
	})
	if err != nil {
		return c, err
	}
	c.cli = cli
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := cli.Put(ctx, "/cre2e/ready", time.Now().String())
		cancel()
		if err == nil {
			return c, nil
		}
		for _, m := range c.members {
			select {
			case <-m.done:
				return c, fmt.Errorf("etcd %s exited: see %s.log", m.name, filepath.Join(dir, m.name))
			default:
			}
		}
		if time.Now().After(deadline) {
			return c, fmt.Errorf("etcd cluster not writable after 60s: %w", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// stop ends the members (SIGTERM, then SIGKILL) and closes the client.
func (c *etcdCluster) stop() {
	if c.cli != nil {
		c.cli.Close()
	}
	for _, m := range c.members {
		if m.cmd.Process != nil {
			_ = m.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, m := range c.members {
		select {
		case <-m.done:
		case <-time.After(10 * time.Second):
			_ = m.cmd.Process.Kill()
			<-m.done
		}
		removePidFile("etcd-" + m.name)
	}
}

// get reads a prefix, bounded.
func (c *etcdCluster) get(prefix string) (*clientv3.GetResponse, error) {
	return c.read(prefix, clientv3.WithPrefix())
}

func (c *etcdCluster) read(key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.cli.Get(ctx, key, opts...)
	if err != nil {
		return nil, fmt.Errorf("etcd get %s: %w", key, err)
	}
	return resp, nil
}

var errNoRevision = errors.New("no revision")

// revision is the cluster's current revision.
func (c *etcdCluster) revision() (int64, error) {
	resp, err := c.get("/cre2e/ready")
	if err != nil {
		return 0, err
	}
	if resp.Header == nil {
		return 0, errNoRevision
	}
	return resp.Header.Revision, nil
}
