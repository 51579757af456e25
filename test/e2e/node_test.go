//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// nspawnRebootStatus is systemd-nspawn's exit status when the system inside
// asked for a reboot.
const nspawnRebootStatus = 133

// Node is one systemd-nspawn machine and the supervisor that keeps it
// running across reboots.
type Node struct {
	Name string
	IP   string
	root string // merged overlay: what the node sees as /
	dir  string // upper, work, console log
	tl   *Timeline
	s    *suite

	mu        sync.Mutex
	nspawnPID int  // 0 while not running
	initPID   int  // the node's systemd, 0 until found / while down
	stopping  bool // no restart after the next exit
	started   bool
	done      chan struct{} // closed when the supervisor returns
}

// running nodes, for the signal handler's teardown.
var (
	liveMu sync.Mutex
	live   = map[*Node]bool{}
)

func stopAllNodes() {
	liveMu.Lock()
	ns := make([]*Node, 0, len(live))
	for n := range live {
		ns = append(ns, n)
	}
	liveMu.Unlock()
	var wg sync.WaitGroup
	for _, n := range ns {
		wg.Add(1)
		go func() { defer wg.Done(); n.destroy() }()
	}
	wg.Wait()
}

// newNode mounts the node's overlay and installs clusterrebootd, the units,
// the configuration and the gate script into it.
func newNode(s *suite, tl *Timeline, dir string, idx int, cfg nodeConfig) (*Node, error) {
	n := &Node{Name: fmt.Sprintf("node-%d", idx), IP: nodeIP(idx), dir: dir, tl: tl, s: s, done: make(chan struct{})}
	n.root = filepath.Join(dir, "root")
	for _, d := range []string{"upper", "work", "root"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", s.rootfs, filepath.Join(dir, "upper"), filepath.Join(dir, "work"))
	if err := syscall.Mount("overlay", n.root, "overlay", 0, opts); err != nil {
		return nil, fmt.Errorf("mount overlay for %s: %w", n.Name, err)
	}
	liveMu.Lock()
	live[n] = true
	liveMu.Unlock()
	cfg.Node, cfg.IP = n.Name, n.IP
	if err := n.install(cfg); err != nil {
		n.destroy()
		return nil, err
	}
	return n, nil
}

func (n *Node) install(cfg nodeConfig) error {
	machineID, err := randomHex(16)
	if err != nil {
		return err
	}
	unit := func(name string) string { return filepath.Join(n.s.repo, "units", name) }
	files := []struct {
		path string
		mode os.FileMode
		data string // or
		from string
	}{
		{path: "/etc/hostname", mode: 0o644, data: n.Name + "\n"},
		{path: "/etc/machine-id", mode: 0o444, data: machineID + "\n"},
		{path: "/usr/bin/clusterrebootd", mode: 0o755, from: n.s.bin},
		{path: "/usr/lib/systemd/system/clusterrebootd-check.service", mode: 0o644, from: unit("clusterrebootd-check.service")},
		{path: "/usr/lib/systemd/system/clusterrebootd-check.timer", mode: 0o644, from: unit("clusterrebootd-check.timer")},
		{path: "/usr/lib/tmpfiles.d/clusterrebootd.conf", mode: 0o644, from: unit("clusterrebootd.tmpfiles")},
		{path: "/etc/systemd/system/clusterrebootd-check.timer.d/e2e.conf", mode: 0o644, data: timerDropIn},
		{path: "/etc/systemd/network/10-host0.network", mode: 0o644, data: fmt.Sprintf(networkFile, n.IP)},
		{path: "/etc/clusterrebootd/config.toml", mode: 0o644, data: cfg.render()},
		{path: gateScriptPath, mode: 0o755, data: gateScript},
		{path: nodeHealthPath, mode: 0o755, data: nodeHealthScript},
		{path: slowRebootPath, mode: 0o755, data: slowRebootScript},
	}
	for _, f := range files {
		data := []byte(f.data)
		if f.from != "" {
			if data, err = os.ReadFile(f.from); err != nil {
				return err
			}
		}
		p := filepath.Join(n.root, f.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		os.Remove(p)
		if err := os.WriteFile(p, data, f.mode); err != nil {
			return err
		}
		if err := os.Chmod(p, f.mode); err != nil { // umask-proof
			return err
		}
	}
	if err := os.MkdirAll(filepath.Join(n.root, gateFlagDir), 0o755); err != nil {
		return err
	}
	// systemctl enable clusterrebootd-check.timer, offline.
	wants := filepath.Join(n.root, "/etc/systemd/system/timers.target.wants")
	if err := os.MkdirAll(wants, 0o755); err != nil {
		return err
	}
	return os.Symlink("/usr/lib/systemd/system/clusterrebootd-check.timer", filepath.Join(wants, "clusterrebootd-check.timer"))
}

// setFlag creates (content != "") or removes a gate flag file in the node's
// /etc/clusterrebootd/e2e/; it survives reboots.
func (n *Node) setFlag(name, content string) error {
	p := filepath.Join(n.root, gateFlagDir, name)
	if content == "" {
		err := os.Remove(p)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	return os.WriteFile(p, []byte(content+"\n"), 0o644)
}

// start runs the supervisor: systemd-nspawn -b in the node's own cgroup,
// started again whenever it exits 133.
func (n *Node) start() error {
	procs, err := n.s.cg.create(n.Name)
	if err != nil {
		return err
	}
	console, err := os.OpenFile(filepath.Join(n.dir, "console.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.started = true
	n.mu.Unlock()
	go n.supervise(procs, console)
	return nil
}

func (n *Node) supervise(procs []string, console *os.File) {
	defer close(n.done)
	defer console.Close()
	for boot := 1; ; boot++ {
		// The shell moves itself into the node's cgroups, then becomes nspawn.
		cmd := exec.Command("sh", "-c", `for f in $E2E_CGROUP_PROCS; do echo $$ > "$f" || exit 97; done; exec "$@"`, "sh",
			"systemd-nspawn", "-q", "-D", n.root, "-M", n.Name, "-b", "--register=no", "--keep-unit",
			"--network-bridge="+bridgeName, "--console=read-only")
		cmd.Env = append(os.Environ(), "E2E_CGROUP_PROCS="+strings.Join(procs, " "))
		cmd.Stdout, cmd.Stderr = console, console
		// Pdeathsig: if the test binary dies, nspawn powers the node off.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGTERM}
		n.mu.Lock()
		if n.stopping {
			n.mu.Unlock()
			return
		}
		err := cmd.Start()
		if err == nil {
			n.nspawnPID = cmd.Process.Pid
		}
		n.mu.Unlock()
		if err != nil {
			n.tl.add(Event{Node: n.Name, Kind: evExit, Code: -1, Detail: "start: " + err.Error()})
			return
		}
		writePidFile("nspawn-"+n.Name, cmd.Process.Pid)
		n.tl.add(Event{Node: n.Name, Kind: evStart, Detail: fmt.Sprintf("boot #%d, nspawn pid %d", boot, cmd.Process.Pid)})
		ctx, cancel := context.WithCancel(context.Background())
		go n.awaitBoot(ctx, cmd.Process.Pid)
		err = cmd.Wait()
		at := time.Now()
		cancel()
		code := cmd.ProcessState.ExitCode()
		n.mu.Lock()
		n.nspawnPID, n.initPID = 0, 0
		stopping := n.stopping
		n.mu.Unlock()
		removePidFile("nspawn-" + n.Name)
		if code == nspawnRebootStatus {
			n.tl.add(Event{At: at, Node: n.Name, Kind: evReboot, Code: code})
			if stopping {
				return
			}
			continue
		}
		detail := ""
		if stopping {
			detail = "(stopped by the test)"
		} else if err != nil {
			detail = err.Error()
		}
		n.tl.add(Event{At: at, Node: n.Name, Kind: evExit, Code: code, Detail: detail})
		return
	}
}

// awaitBoot finds the node's systemd (the child of nspawn), waits until it
// finished starting up and records the boot with its boot_id.
func (n *Node) awaitBoot(ctx context.Context, nspawnPID int) {
	deadline := time.Now().Add(90 * time.Second)
	var init int
	for init == 0 {
		if ctx.Err() != nil || time.Now().After(deadline) {
			return
		}
		init = childNamed(nspawnPID, "systemd")
		if init == 0 {
			time.Sleep(20 * time.Millisecond)
		}
	}
	n.mu.Lock()
	if n.nspawnPID == nspawnPID {
		n.initPID = init
	}
	n.mu.Unlock()
	state := ""
	for ctx.Err() == nil && time.Now().Before(deadline) {
		out, _ := nsenter(init, 60*time.Second, "systemctl", "is-system-running", "--wait")
		state = strings.TrimSpace(out)
		if state == "running" || state == "degraded" || state == "maintenance" || state == "stopping" {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if ctx.Err() != nil {
		return
	}
	bootID, err := nsenter(init, 10*time.Second, "cat", "/proc/sys/kernel/random/boot_id")
	if err != nil {
		return
	}
	n.tl.add(Event{Node: n.Name, Kind: evBooted, BootID: strings.TrimSpace(bootID), Detail: "state " + state})
}

// childNamed returns the pid of parent's child whose comm is name, or 0.
func childNamed(parent int, name string) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", parent, parent))
	if err != nil {
		return 0
	}
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err == nil && strings.TrimSpace(string(comm)) == name {
			return pid
		}
	}
	return 0
}

// nodeEnv is the environment of commands run inside a node.
var nodeEnv = []string{
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"LANG=C.UTF-8", "TERM=dumb", "SYSTEMD_PAGER=", "SYSTEMD_COLORS=0",
}

// nsenter runs a command in all namespaces of process pid.
func nsenter(pid int, timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "nsenter", append([]string{"-t", strconv.Itoa(pid), "-a", "--"}, args...)...)
	cmd.Env = nodeEnv
	cmd.WaitDelay = time.Second
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(out), fmt.Errorf("in node: %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(ee.Stderr)))
		}
		return string(out), fmt.Errorf("in node: %s: %w", strings.Join(args, " "), err)
	}
	return string(out), nil
}

// errNodeDown: the node is not running (rebooting, stopped).
var errNodeDown = errors.New("node is down")

// Exec runs a command inside the node (nsenter into its systemd).
func (n *Node) Exec(timeout time.Duration, args ...string) (string, error) {
	n.mu.Lock()
	pid := n.initPID
	n.mu.Unlock()
	if pid == 0 {
		return "", fmt.Errorf("%s: %w", n.Name, errNodeDown)
	}
	return nsenter(pid, timeout, args...)
}

// up reports whether the node runs and its systemd was found.
func (n *Node) up() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.initPID != 0
}

// vethName is the host side of the node's network link, made by nspawn anew
// at every boot.
func (n *Node) vethName() string { return "vb-" + n.Name }

// stop powers the node off (SIGTERM to nspawn) and waits for the
// supervisor; SIGKILL after 30s.
func (n *Node) stop() {
	n.mu.Lock()
	n.stopping = true
	pid, started := n.nspawnPID, n.started
	n.mu.Unlock()
	if !started {
		return
	}
	if pid != 0 {
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	select {
	case <-n.done:
		return
	case <-time.After(30 * time.Second):
	}
	n.mu.Lock()
	pid = n.nspawnPID
	n.mu.Unlock()
	if pid != 0 {
		// The node's systemd first: a container whose nspawn dies
		// survives it (it keeps its veth, and the next node of that name
		// cannot start). SIGKILL to a PID namespace's init ends the
		// namespace.
		if init := childNamed(pid, "systemd"); init != 0 {
			_ = syscall.Kill(init, syscall.SIGKILL)
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	<-n.done
}

// destroy stops the node and removes its mount and cgroups.
func (n *Node) destroy() {
	n.stop()
	liveMu.Lock()
	wasLive := live[n]
	delete(live, n)
	liveMu.Unlock()
	if !wasLive {
		return
	}
	if err := syscall.Unmount(n.root, 0); err != nil {
		_ = syscall.Unmount(n.root, syscall.MNT_DETACH)
	}
	_ = n.s.cg.remove(n.Name)
}
