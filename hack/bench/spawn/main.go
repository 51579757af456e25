// Command spawn runs a program and writes its resource usage to a file:
//
//	spawn OUT PROG ARGS...
//
// It exists to measure peak RSS. Go starts children with vfork(CLONE_VM),
// and Linux carries the parent's RSS high-water mark into the child's
// ru_maxrss across exec. A bench process with an embedded etcd would thus
// report its own size as the child's. spawn is a small process (a few MiB),
// so the child's ru_maxrss is its own unless it is smaller than spawn;
// spawn's own peak (VmHWM of its address space, which is what a vfork child
// inherits; its ru_maxrss would again carry its parent's) is written too, as
// that floor.
//
// OUT gets one line: wall_ns utime_ns stime_ns child_maxrss_kib spawn_maxrss_kib.
// spawn exits with the child's exit code (1 when it cannot start it).
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: spawn OUT PROG ARGS...")
		os.Exit(2)
	}
	cmd := exec.Command(os.Args[2], os.Args[3:]...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		fmt.Fprintln(os.Stderr, "spawn:", err)
		os.Exit(1)
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	line := fmt.Sprintf("%d %d %d %d %d\n", wall.Nanoseconds(), ru.Utime.Nano(), ru.Stime.Nano(), ru.Maxrss, vmHWM())
	if err := os.WriteFile(os.Args[1], []byte(line), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "spawn:", err)
		os.Exit(1)
	}
	os.Exit(cmd.ProcessState.ExitCode())
}

// vmHWM is this process's address-space peak RSS in KiB (0 if unknown).
func vmHWM() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return 0
}
