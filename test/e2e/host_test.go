//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Fixed names: a later run finds (and removes) what a killed run left.
const (
	bridgeName   = "crbe2e0"
	subnet       = "10.231.0"
	hostIP       = subnet + ".1"
	cgroupPrefix = "cre2e-"
	stateDir     = "/run/clusterrebootd-e2e" // work dir path and pid files of the running suite
	etcdMembers  = 3
)

func etcdIP(i int) string   { return fmt.Sprintf("%s.%d", subnet, 10+i) } // i = 1..3
func etcdNS(i int) string   { return fmt.Sprintf("cre2e-etcd%d", i) }
func etcdVeth(i int) string { return fmt.Sprintf("cre2e-e%d", i) }
func nodeIP(i int) string   { return fmt.Sprintf("%s.%d", subnet, 20+i) } // i = 1..N

// run runs a host command, bounded, and returns its combined output.
func run(timeout time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// ip runs one iproute2 command.
func ip(args ...string) error {
	_, err := run(10*time.Second, "ip", args...)
	return err
}

// setupNetwork creates the bridge (with the test's own address) and one
// network namespace per etcd member, attached to the bridge by a veth.
func setupNetwork() error {
	steps := [][]string{
		{"link", "add", bridgeName, "type", "bridge"},
		{"addr", "add", hostIP + "/24", "dev", bridgeName},
		{"link", "set", bridgeName, "up"},
	}
	for i := 1; i <= etcdMembers; i++ {
		ns, veth := etcdNS(i), etcdVeth(i)
		steps = append(steps,
			[]string{"netns", "add", ns},
			[]string{"link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns},
			[]string{"link", "set", veth, "master", bridgeName, "up"},
			[]string{"-n", ns, "addr", "add", etcdIP(i) + "/24", "dev", "eth0"},
			[]string{"-n", ns, "link", "set", "eth0", "up"},
			[]string{"-n", ns, "link", "set", "lo", "up"},
		)
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			return err
		}
	}
	return nil
}

// teardownNetwork removes the namespaces (their veths go with them) and the
// bridge; what does not exist is fine.
func teardownNetwork() {
	for i := 1; i <= etcdMembers; i++ {
		_ = ip("netns", "del", etcdNS(i))
		_ = ip("link", "del", etcdVeth(i))
	}
	_ = ip("netns", "del", quotaNS) // the chaos quota scenario's own etcd
	_ = ip("link", "del", quotaVeth)
	_ = ip("link", "del", bridgeName)
}

// cgroupLayout is where a node's own cgroup directories go: the named
// systemd hierarchy and the unified one on a hybrid (v1) host, the single
// hierarchy on a pure v2 host.
type cgroupLayout struct{ roots []string }

func detectCgroups() (cgroupLayout, error) {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return cgroupLayout{roots: []string{"/sys/fs/cgroup"}}, nil
	}
	var l cgroupLayout
	for _, d := range []string{"/sys/fs/cgroup/systemd", "/sys/fs/cgroup/unified"} {
		if _, err := os.Stat(filepath.Join(d, "cgroup.procs")); err == nil {
			l.roots = append(l.roots, d)
		}
	}
	if len(l.roots) == 0 {
		return l, errors.New("no usable cgroup hierarchy under /sys/fs/cgroup")
	}
	return l, nil
}

// create makes the node's cgroup directories and returns their cgroup.procs
// files.
func (l cgroupLayout) create(name string) ([]string, error) {
	var procs []string
	for _, r := range l.roots {
		d := filepath.Join(r, cgroupPrefix+name)
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		procs = append(procs, filepath.Join(d, "cgroup.procs"))
	}
	return procs, nil
}

// remove deletes a node's cgroup directories bottom-up (cgroupfs directories
// are removed with rmdir, never recursively).
func (l cgroupLayout) remove(name string) error {
	var errs []error
	for _, r := range l.roots {
		errs = append(errs, rmdirTree(filepath.Join(r, cgroupPrefix+name)))
	}
	return errors.Join(errs...)
}

func rmdirTree(dir string) error {
	var dirs []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	var last error
	for i := len(dirs) - 1; i >= 0; i-- {
		// A cgroup whose last process just exited may refuse for a moment.
		for try := 0; ; try++ {
			err := syscall.Rmdir(dirs[i])
			if err == nil || errors.Is(err, syscall.ENOENT) {
				break
			}
			if try == 50 {
				last = fmt.Errorf("rmdir %s: %w", dirs[i], err)
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return last
}

// The state directory names the running suite's work directory and the pids
// of the processes it started, so that a run that was killed (go test
// -timeout, SIGKILL) is cleaned up by the next one.

func writeStateFile(work string) error {
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(stateDir, "work"), []byte(work+"\n"), 0o644)
}

func removeStateFile() { os.RemoveAll(stateDir) }

func writePidFile(name string, pid int) {
	_ = os.WriteFile(filepath.Join(stateDir, name+".pid"), []byte(strconv.Itoa(pid)+"\n"), 0o644)
}

func removePidFile(name string) { os.Remove(filepath.Join(stateDir, name+".pid")) }

// cleanStale removes what an earlier, killed run left behind: its
// processes (by the pid files it wrote, and only if their command line is
// still ours), overlay mounts under its work directory, the network
// namespaces, the bridge, the node cgroups and the work directory.
func cleanStale(t *testing.T) {
	found := false
	if ents, err := os.ReadDir(stateDir); err == nil {
		for _, e := range ents {
			if !strings.HasSuffix(e.Name(), ".pid") {
				continue
			}
			b, _ := os.ReadFile(filepath.Join(stateDir, e.Name()))
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil || pid <= 1 {
				continue
			}
			cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			c := string(cmdline)
			if !strings.Contains(c, "systemd-nspawn") && !strings.Contains(c, "cre2e") && !strings.Contains(c, workPrefix) {
				continue
			}
			found = true
			t.Logf("e2e: stopping pid %d left by an earlier run (%s)", pid, strings.ReplaceAll(c, "\x00", " "))
			_ = syscall.Kill(pid, syscall.SIGTERM)
			for i := 0; i < 100 && syscall.Kill(pid, 0) == nil; i++ {
				time.Sleep(100 * time.Millisecond)
			}
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	for _, m := range staleMounts() {
		found = true
		t.Logf("e2e: unmounting %s left by an earlier run", m)
		_ = syscall.Unmount(m, syscall.MNT_DETACH)
	}
	if b, err := os.ReadFile(filepath.Join(stateDir, "work")); err == nil {
		old := strings.TrimSpace(string(b))
		if strings.Contains(filepath.Base(old), workPrefix) {
			found = true
			os.RemoveAll(old)
		}
	}
	if _, err := os.Stat("/sys/class/net/" + bridgeName); err == nil {
		found = true
	}
	teardownNetwork()
	if l, err := detectCgroups(); err == nil {
		for _, r := range l.roots {
			ents, _ := os.ReadDir(r)
			for _, e := range ents {
				if e.IsDir() && strings.HasPrefix(e.Name(), cgroupPrefix) {
					found = true
					_ = rmdirTree(filepath.Join(r, e.Name()))
				}
			}
		}
	}
	removeStateFile()
	if found {
		t.Logf("e2e: cleaned up after an earlier run")
	}
}

// staleMounts lists mount points under an e2e work directory, deepest first.
func staleMounts() []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var ms []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && strings.Contains(fields[4], "/"+workPrefix) {
			ms = append(ms, fields[4])
		}
	}
	for i, j := 0, len(ms)-1; i < j; i, j = i+1, j-1 {
		ms[i], ms[j] = ms[j], ms[i]
	}
	return ms
}
