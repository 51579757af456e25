package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/test/etcdtest"
)

// TestHostFaults: faults of the node itself, with the real binary and a
// real etcd: a full state file system, a hanging health script whose
// children ignore SIGTERM, a detector that flaps.
func TestHostFaults(t *testing.T) {
	t.Parallel()
	endpoints := etcdtest.Start(t).Endpoints()
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, endpoints []string)
	}{
		{"StateDirFull", testStateDirFull},
		{"LoopGuardStateFull", testLoopGuardStateFull},
		{"HealthScriptHangs", testHealthScriptHangs},
		{"DetectorFlapsAcrossTicks", testDetectorFlapsAcrossTicks},
		{"DetectorFlapsWhileQueued", testDetectorFlapsWhileQueued},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, endpoints)
		})
	}
}

// mountTmpfs mounts a tmpfs of size bytes on dir (root only) and unmounts it
// when the test ends.
func mountTmpfs(t *testing.T, dir string, size int) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: mounts a tiny tmpfs")
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, fmt.Sprintf("size=%d,mode=0755", size)); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			_ = syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
}

// fill writes a file in dir until the file system is full.
func fill(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "filler")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling %s: %v", dir, err)
			}
			break
		}
	}
	return p
}

// stateFiles lists the state directory without the filler.
func stateFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if e.Name() != "filler" && !strings.HasSuffix(e.Name(), ".lock") { // the flock file of state writes
			names = append(names, e.Name())
		}
	}
	return names
}

func noCrash(t *testing.T, label, out string) {
	t.Helper()
	for _, bad := range []string{"panic:", "goroutine ", "fatal error:"} {
		if strings.Contains(out, bad) {
			t.Fatalf("%s crashed (%q):\n%s", label, bad, tail(out, 4000))
		}
	}
}

// testStateDirFull: the state directory (paths.state_dir) is a tiny tmpfs.
// The state file holds the reboot-loop guard written after a reboot; the
// file system is then filled, and the next check, which has to change the
// state (the reason is gone: the guard is cleared), fails closed with a log
// line naming the error, does not crash, and leaves the state file as it was
// (valid, not truncated, no temporary file left). After space is freed the
// next check works and writes the state.
//
// A second round fills the file system before the post-boot check, whose
// state write (counting the reboot for the loop guard) comes after the
// slot's release: the run must fail with a clear line too; what happens to
// the slot and the count is logged for the report.
func testStateDirFull(t *testing.T, endpoints []string) {
	c := newCluster(t, endpoints, defaults())
	a := c.addNode("node-a")
	state := a.path("state")
	mountTmpfs(t, state, 64<<10)
	stateFile := filepath.Join(state, "state.json")

	// A reboot, the post-boot release writes the guard's count.
	a.expect(exitOK, "check", "--once")
	a.waitRebooted(1)
	a.writeFile("boot_id", newBootID()+"\n")
	clearRun(t, a)
	// Post-boot: the release, then the reason is still there: the
	// reboot-loop guard (max_reboots_per_reason 1) blocks a second reboot.
	a.expect(exitBlocked, "check", "--once")
	before, err := os.ReadFile(stateFile)
	if err != nil {
		t.Fatalf("no state file after the post-boot release: %v", err)
	}
	var doc map[string]any
	if err := json.Unmarshal(before, &doc); err != nil || doc["reboots_for_reason"] == nil {
		t.Logf("state file after the post-boot release: %s (%v)", before, err)
	}

	// Full: the reason is gone, so the check clears the guard: a write.
	filler := fill(t, state)
	a.setNeedsReboot(false)
	code, out := a.run("check", "--once")
	noCrash(t, "check on a full state directory", out)
	after, err := os.ReadFile(stateFile)
	switch {
	case err != nil:
		t.Errorf("state file gone after a failed write: %v", err)
	case string(after) != string(before):
		t.Errorf("state file changed by a failed write:\nbefore %s\nafter  %s", before, after)
	}
	if left := stateFiles(t, state); len(left) != 1 {
		t.Errorf("state directory after the failed write: %v, want only state.json", left)
	}
	if code == exitOK {
		t.Logf("check on a full state directory exited 0 (no state write needed?):\n%s", tail(out, 2000))
	} else {
		line := firstLineWith(out, "no space left on device")
		if line == "" {
			t.Errorf("check on a full state directory: exit %d without a line naming the error:\n%s", code, tail(out, 3000))
		} else {
			t.Logf("full state directory: exit %d: %s", code, line)
		}
	}

	// Space again: the next run works and writes the state.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	a.expect(exitOK, "check", "--once")
	final, err := os.ReadFile(stateFile)
	if err != nil || !json.Valid(final) {
		t.Fatalf("state file after the space came back: %q %v", final, err)
	}
	t.Logf("state file: before %s; after the recovery %s", strings.TrimSpace(string(before)), strings.TrimSpace(string(final)))

	// Round 2: full before the post-boot check.
	a.setNeedsReboot(true)
	a.expect(exitOK, "check", "--once")
	a.waitRebooted(2)
	a.writeFile("boot_id", newBootID()+"\n")
	clearRun(t, a)
	a.setNeedsReboot(false)
	before2, _ := os.ReadFile(stateFile)
	filler = fill(t, state)
	code, out = a.run("check", "--once")
	noCrash(t, "post-boot check on a full state directory", out)
	_, held := c.slots()[a.name]
	after2, err := os.ReadFile(stateFile)
	if err != nil || string(after2) != string(before2) {
		t.Errorf("state file changed or gone by a failed post-boot write (%v):\nbefore %s\nafter  %s", err, before2, after2)
	}
	if code == exitOK {
		t.Errorf("post-boot check on a full state directory exited 0: the reboot count was not saved\n%s", tail(out, 3000))
	} else if line := firstLineWith(out, "no space left on device"); line == "" {
		t.Errorf("post-boot check on a full state directory: exit %d without a line naming the error:\n%s", code, tail(out, 3000))
	} else {
		t.Logf("full state directory after a reboot: exit %d, slot still held: %v: %s", code, held, line)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	a.expect(exitOK, "check", "--once")
	if _, held := c.slots()[a.name]; held {
		t.Errorf("node-a still holds its slot after the space came back")
	}
	final2, _ := os.ReadFile(stateFile)
	t.Logf("state after round 2 and recovery: %s (the reboot of round 2 counted: %v)", strings.TrimSpace(string(final2)), string(final2) != string(before2))
}

func clearRun(t *testing.T, n *node) {
	t.Helper()
	ents, err := os.ReadDir(n.path("run"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(n.path("run"), e.Name())); err != nil {
			t.Fatal(err)
		}
	}
}

// hangScript is a health script that starts a child and a grandchild that
// ignore SIGTERM, records their pids, and hangs (ignoring SIGTERM itself).
const hangScript = `#!/bin/sh
d='%s'/"$NODE_NAME"
trap '' TERM
sh -c 'trap "" TERM; sh -c "trap \"\" TERM; echo \$\$ >> '"$d"'/hang.pids; exec sleep 1000" & echo $$ >> '"$d"'/hang.pids; exec sleep 1000' &
echo $$ >> "$d/hang.pids"
echo "hanging in phase $CLUSTERREBOOTD_PHASE"
sleep 1000
`

// testHealthScriptHangs: the health script hangs past health.timeout with
// children that ignore SIGTERM, in the pre-lock and the under-lock phase.
// The check fails closed (exit 3: blocked by the health gate, no slot, no
// reboot) and every process of the script's group is gone (read from /proc).
func testHealthScriptHangs(t *testing.T, endpoints []string) {
	for _, phase := range []string{"pre-lock", "under-lock"} {
		t.Run(phase, func(t *testing.T) {
			set := defaults()
			set.HealthTimeout = "2s" // long enough for the pre-lock pass of "under-lock" on a loaded machine
			set.MaxHoldWait = "6s"   // the holder retries a refusing gate until max_hold_wait
			c := newCluster(t, endpoints, set)
			a := c.addNode("node-a")
			body := fmt.Sprintf(hangScript, c.dir)
			if phase == "under-lock" {
				// Pass pre-lock, hang under the lock.
				body = strings.Replace(body, "trap '' TERM\n", "trap '' TERM\n[ \"$CLUSTERREBOOTD_PHASE\" = pre-lock ] && exit 0\n", 1)
			}
			c.script("cluster-gate", body)
			code, out := a.run("check", "--once")
			noCrash(t, "check", out)
			if code != exitHealth {
				t.Errorf("check with a hanging %s health script: exit %d, want %d\n%s", phase, code, exitHealth, tail(out, 3000))
			}
			if c.rebootsOf(a.name) != 0 || len(c.slots()) != 0 {
				t.Fatalf("a hanging health script let node-a take a slot or reboot")
			}
			if l := firstLineWith(out, "health script failed"); l == "" {
				t.Errorf("no log line says the health script failed:\n%s", tail(out, 3000))
			} else {
				t.Logf("%s: %s", phase, l)
			}
			pids := readPids(t, a.path("hang.pids"))
			// 3 per run (script, child, grandchild); the last run may be
			// cut short by the end of max_hold_wait.
			if len(pids) < 3 {
				t.Fatalf("the script recorded %d pids (%v), want at least 3: script, child, grandchild", len(pids), pids)
			}
			// The group was SIGKILLed before the check returned; the
			// kernel may still be finishing the exits (bounded wait).
			deadline := time.Now().Add(10 * time.Second)
			for _, pid := range pids {
				for !gone(pid) {
					if time.Now().After(deadline) {
						_ = syscall.Kill(pid, syscall.SIGKILL)
						t.Fatalf("pid %d of the hanging health script survived the timeout: %s", pid, procStat(pid))
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
			if q := c.queue(); len(q) != 0 {
				t.Errorf("queue entries left behind: %+v", q)
			}
		})
	}
}

func readPids(t *testing.T, path string) []int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the hanging script never ran: %v", err)
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("pid file %s: %v", path, err)
		}
		pids = append(pids, pid)
	}
	return pids
}

func procStat(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return err.Error()
	}
	return strings.TrimSpace(string(b))
}

// gone: no such process, or a zombie waiting for its reaper.
func gone(pid int) bool {
	s := procStat(pid)
	if strings.Contains(s, "no such file") {
		return true
	}
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && (s[i+2] == 'Z' || s[i+2] == 'X')
}

// testDetectorFlapsAcrossTicks: the detector says needed, not needed,
// needed … from one check run to the next. A tick that finds it needed
// reboots (one reboot, one slot); a tick that finds it not needed does
// nothing; a node that was rebooted and whose detector says "needed" again
// after a "not needed" tick is not held by the reboot-loop guard (the reason
// went away in between).
func testDetectorFlapsAcrossTicks(t *testing.T, endpoints []string) {
	c := newCluster(t, endpoints, defaults())
	a := c.addNode("node-a")
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	want := 0
	var seq []bool
	for range 8 {
		need := r.IntN(2) == 0
		seq = append(seq, need)
		a.setNeedsReboot(need)
		a.expect(exitOK, "check", "--once")
		if need {
			want++
			a.waitRebooted(want)
			a.boot() // the update is installed: the post-boot check finds it not needed
		} else if got := c.rebootsOf(a.name); got != want {
			t.Fatalf("a tick that found no reboot needed rebooted (%d reboots, want %d)", got, want)
		}
		if len(c.slots()) != 0 {
			t.Fatalf("slot left after a tick: %v", keys(c.slots()))
		}
	}
	if got := c.rebootsOf(a.name); got != want {
		t.Errorf("detector sequence %v: %d reboots, want %d", seq, got, want)
	}
	t.Logf("detector sequence %v: %d reboots", seq, want)
}

// testDetectorFlapsWhileQueued: while the holder waits behind an operator's
// lock the detector flaps; what counts is what it says when the holder
// gets the lock: needed → reboot, not needed → no slot, no reboot, exit 0.
func testDetectorFlapsWhileQueued(t *testing.T, endpoints []string) {
	c := newCluster(t, endpoints, defaults())
	a := c.addNode("node-a")
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 11))
	reboots := 0
	for round := range 4 {
		a.setNeedsReboot(true)
		unlock := c.operatorLock()
		h := a.start("check", "--once")
		waitFor(t, "node-a queued behind the operator's lock", waitLong, func() bool { return c.queuePos(a.name) == 2 })
		flips := 1 + 2*r.IntN(3) // odd: not needed at the lock
		if round%2 == 1 {
			flips++ // even: needed again at the lock
		}
		need := true
		for range flips {
			need = !need
			a.setNeedsReboot(need)
			time.Sleep(time.Duration(r.IntN(30)) * time.Millisecond)
		}
		unlock()
		h.expectExit(t, exitOK)
		if need {
			reboots++
			a.waitRebooted(reboots)
			a.boot()
		} else if got := c.rebootsOf(a.name); got != reboots || len(c.slots()) != 0 {
			t.Fatalf("round %d: the detector said not needed when the lock came (after %d flips), yet %d reboots (want %d), slots %v",
				round, flips, got, reboots, keys(c.slots()))
		}
		t.Logf("round %d: %d flips while queued, needed at the lock: %v", round, flips, need)
	}
	if q := c.queue(); len(q) != 0 {
		t.Errorf("queue entries left behind: %+v", q)
	}
}

// testLoopGuardStateFull: the reboot-loop guard must hold while the state
// directory is full. A node reboots for a reason that is still there after
// the boot (the update did not fix it); its state directory is full, so the
// post-boot check cannot record the reboot for the guard. Failing closed
// means: no second reboot for that reason without an operator's ack,
// whatever the state file system says.
func testLoopGuardStateFull(t *testing.T, endpoints []string) {
	c := newCluster(t, endpoints, defaults())
	a := c.addNode("node-a")
	state := a.path("state")
	mountTmpfs(t, state, 64<<10)
	a.expect(exitOK, "check", "--once")
	a.waitRebooted(1)
	filler := fill(t, state)
	defer os.Remove(filler)
	a.writeFile("boot_id", newBootID()+"\n")
	clearRun(t, a)
	code, out := a.run("check", "--once") // post-boot, the reason still there
	noCrash(t, "post-boot check", out)
	t.Logf("post-boot check on a full state directory: exit %d: %s", code, lastLine(out))
	for i := range 3 {
		code, out = a.run("check", "--once")
		noCrash(t, "check", out)
		if got := c.rebootsOf(a.name); got > 1 {
			t.Fatalf("check #%d after the reboot, state directory full: node-a rebooted again for the same reason (%d reboots, "+
				"max_reboots_per_reason 1): the reboot-loop guard failed open (exit %d)\n%s", i+1, got, code, tail(out, 3000))
		}
	}
	// Failing closed keeps the slot while the count cannot be saved; once
	// there is room the slot goes, counted once, and the guard stops the
	// next reboot for the same reason.
	if _, held := c.slots()[a.name]; !held {
		t.Fatal("the slot was released although the reboot could not be recorded for the loop guard")
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	code, out = a.run("check", "--once")
	noCrash(t, "check after freeing space", out)
	_, held := c.slots()[a.name]
	if held || code != exitBlocked || !strings.Contains(out, "reboot-loop guard") {
		t.Fatalf("after freeing space: exit %d, slot %v; want the slot released and the loop guard blocking (exit %d)\n%s",
			code, held, exitBlocked, tail(out, 3000))
	}
	if got := c.rebootsOf(a.name); got != 1 {
		t.Fatalf("%d reboots, want 1", got)
	}
}
