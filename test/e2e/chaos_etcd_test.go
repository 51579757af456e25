//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// etcd faults of the chaos matrix. Each injects its fault, keeps it for a
// while and heals it again; none of them loses etcd's data.
const (
	efNone        = "etcd-ok"
	efLeaderKill  = "etcd-leader-killed"      // SIGKILL of the leader, restarted after a few seconds
	efPartition   = "etcd-member-partitioned" // one member (the leader half the time) cut off the bridge
	efUnreachable = "etcd-unreachable"        // every member cut off for longer than lock.ttl
	efNetem       = "etcd-latency-loss"       // delay and loss on every member's link (hack/e2e/netem.sh)
	efQuota       = "etcd-quota-exhausted"    // own single member, backend quota filled (chaos_quota_test.go)
)

var etcdFaults = []string{efNone, efLeaderKill, efPartition, efUnreachable, efNetem}

// leader returns the index (0-based) of the member that leads, -1 when
// none is known.
func (c *etcdCluster) leader() int {
	ids := make([]uint64, len(c.members))
	var lead uint64
	for i, m := range c.members {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st, err := c.cli.Status(ctx, "http://"+m.ip+":2379")
		cancel()
		if err != nil || st.Header == nil {
			continue
		}
		ids[i] = st.Header.MemberId
		if st.Leader != 0 {
			lead = st.Leader
		}
	}
	for i, id := range ids {
		if id != 0 && id == lead {
			return i
		}
	}
	return -1
}

// kill SIGKILLs member i and waits until it is gone.
func (c *etcdCluster) kill(i int) {
	m := c.members[i]
	if m.cmd.Process != nil {
		_ = m.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-m.done
}

// restart starts member i again on its data directory (it rejoins).
func (c *etcdCluster) restart(i int) error {
	m := c.members[i]
	select {
	case <-m.done:
	default:
		return fmt.Errorf("etcd %s still running", m.name)
	}
	logf, err := os.OpenFile(m.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(m.cmd.Args[0], m.cmd.Args[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("restart etcd %s: %w", m.name, err)
	}
	done := make(chan struct{})
	m.cmd, m.done = cmd, done
	writePidFile("etcd-"+m.name, cmd.Process.Pid)
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(done)
	}()
	return nil
}

// logPath is the member's log file (next to its data directory).
func (m *etcdMember) logPath() string {
	for i, a := range m.cmd.Args {
		if a == "--data-dir" && i+1 < len(m.cmd.Args) {
			return m.cmd.Args[i+1] + ".log"
		}
	}
	return filepath.Join(os.TempDir(), "cre2e-"+m.name+".log")
}

// partitionMember takes member i's link to the bridge down (or up).
func partitionMember(i int, down bool) error {
	state := "up"
	if down {
		state = "down"
	}
	return ip("link", "set", etcdVeth(i+1), state)
}

// netem adds delay and loss on every member's link, inside its namespace,
// and returns what hack/e2e/netem.sh could install: "netem", or without
// sch_netem "nfqueue-delay+iptables-loss" (delay and jitter by hack/nfdelay,
// loss by iptables) or "iptables-loss" (no delay). A member that fails
// undoes what the others got.
func netem(delayMS, jitterMS, lossPct int) (string, error) {
	netemTeardown.Do(func() { onTeardown(func() { _, _ = netemClear() }) })
	var how string
	for i := 1; i <= etcdMembers; i++ {
		out, err := runNetem("apply", etcdNS(i), "eth0", fmt.Sprint(delayMS), fmt.Sprint(jitterMS), fmt.Sprint(lossPct))
		if err != nil {
			_, _ = netemClear()
			return "", err
		}
		how = strings.TrimSpace(out)
	}
	return how, nil
}

// netemSummary says in words what netem installed.
func netemSummary(how string, delayMS, jitterMS, lossPct int) string {
	switch {
	case how == "netem":
		return fmt.Sprintf("%dms±%dms delay, %d%% loss (tc netem)", delayMS, jitterMS, lossPct)
	case strings.HasPrefix(how, "nfqueue-delay"):
		loss := "no loss"
		if strings.Contains(how, "iptables-loss") {
			loss = fmt.Sprintf("%d%% loss via iptables", lossPct)
		}
		return fmt.Sprintf("%dms±%dms delay via nfqueue, %s", delayMS, jitterMS, loss)
	default:
		return fmt.Sprintf("%d%% loss (no sch_netem in this kernel: %s, no delay)", lossPct, how)
	}
}

// netemClear removes delay and loss from every member's link and returns
// what nfdelay reported on its way out, one line per member that had it.
func netemClear() (string, error) {
	var errs, reports []string
	for i := 1; i <= etcdMembers; i++ {
		out, err := runNetem("clear", etcdNS(i), "eth0")
		if err != nil {
			errs = append(errs, err.Error())
		}
		if r := strings.TrimSpace(out); r != "" {
			if k := strings.Index(r, "queue "); k >= 0 {
				r = r[k:] // without nfdelay's log prefix and time
			}
			reports = append(reports, fmt.Sprintf("e%d: %s", i, r))
		}
	}
	var err error
	if len(errs) > 0 {
		err = fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return strings.Join(reports, "; "), err
}

var netemTeardown sync.Once

// runNetem runs hack/e2e/netem.sh with the suite's nfdelay.
func runNetem(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, netemScript(), args...)
	cmd.Env = append(os.Environ(), envNfdelay+"="+theSuite.nfdelay)
	cmd.WaitDelay = time.Second
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("netem.sh %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

func netemScript() string { return filepath.Join(theSuite.repo, "hack/e2e/netem.sh") }

// etcdFault injects fault f after delay, keeps it, heals it, and reports
// what it did on the returned channel (an error when it could not inject or
// heal). ttl is the nodes' lock.ttl.
func (sc *scenario) etcdFault(f string, r *rand.Rand, delay, ttl time.Duration) <-chan error {
	ch := make(chan error, 1)
	c := sc.s.etcd
	hold := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(r.Int64N(int64(hi-lo)+1)) }
	keep := map[string]time.Duration{
		efLeaderKill:  hold(2*time.Second, 8*time.Second),
		efPartition:   hold(5*time.Second, 15*time.Second),
		efUnreachable: ttl + hold(2*time.Second, 8*time.Second),
		efNetem:       hold(10*time.Second, 25*time.Second),
	}[f]
	pickLeader := r.IntN(2) == 0
	victim := r.IntN(etcdMembers)
	delayMS, jitterMS, loss := 50+r.IntN(150), r.IntN(50), 2+r.IntN(9)
	go func() {
		if f == efNone {
			ch <- nil
			return
		}
		time.Sleep(delay)
		var err error
		switch f {
		case efLeaderKill:
			l := c.leader()
			if l < 0 {
				ch <- fmt.Errorf("no etcd leader found to kill")
				return
			}
			c.kill(l)
			sc.tl.note("etcd", "SIGKILL of the etcd leader %s (back in %v)", c.members[l].name, keep)
			time.Sleep(keep)
			err = c.restart(l)
			sc.tl.note("etcd", "etcd %s restarted (%v)", c.members[l].name, err)
		case efPartition:
			if pickLeader {
				if l := c.leader(); l >= 0 {
					victim = l
				}
			}
			if err = partitionMember(victim, true); err != nil {
				break
			}
			sc.tl.note("etcd", "etcd %s partitioned (leader picked: %v) for %v", c.members[victim].name, pickLeader, keep)
			time.Sleep(keep)
			err = partitionMember(victim, false)
			sc.tl.note("etcd", "etcd %s healed (%v)", c.members[victim].name, err)
		case efUnreachable:
			for i := range etcdMembers {
				if e := partitionMember(i, true); e != nil {
					err = e
				}
			}
			sc.tl.note("etcd", "every etcd member cut off for %v (lock.ttl %v)", keep, ttl)
			time.Sleep(keep)
			for i := range etcdMembers {
				if e := partitionMember(i, false); e != nil {
					err = e
				}
			}
			sc.tl.note("etcd", "etcd reachable again (%v)", err)
		case efNetem:
			var how, report string
			if how, err = netem(delayMS, jitterMS, loss); err != nil {
				break
			}
			sc.tl.note("etcd", "%s on every etcd member's link for %v", netemSummary(how, delayMS, jitterMS, loss), keep)
			time.Sleep(keep)
			report, err = netemClear()
			sc.tl.note("etcd", "latency and loss removed (%v)", err)
			if report != "" {
				sc.tl.note("etcd", "nfdelay: %s", report)
			}
		}
		ch <- err
	}()
	return ch
}
