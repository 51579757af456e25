package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// envAsMain makes the test binary run nfdelay's main (the root test starts
// it inside a network namespace with `ip netns exec`).
const envAsMain = "NFDELAY_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envAsMain) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

const (
	testDelay  = 100 * time.Millisecond
	testJitter = 20 * time.Millisecond
	addrA      = "10.231.99.1"
	addrB      = "10.231.99.2"
	devA       = "nfd0"
	devB       = "nfd1"
	bulkBytes  = 8 << 20
)

// TestDelayOnVeth measures nfdelay for real: two network namespaces of the
// test's own joined by a veth pair, TCP and UDP echo servers in B, the
// client in A, nfdelay on B's queue 0 for the packets B receives on the
// veth (on the way in, as hack/e2e/netem.sh does: see there why).
func TestDelayOnVeth(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces, iptables, NFQUEUE)")
	}
	for _, tool := range []string{"ip", "iptables"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s: %v", tool, err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	nsA, nsB := fmt.Sprintf("cre2e-nfd-%d-a", os.Getpid()), fmt.Sprintf("cre2e-nfd-%d-b", os.Getpid())
	makeNetns(t, nsA, nsB)

	// Echo servers in B: sockets belong to the namespace they were made in.
	var tl, sink net.Listener
	var uc net.PacketConn
	if err := inNetns(nsB, func() (err error) {
		if tl, err = net.Listen("tcp", addrB+":0"); err != nil {
			return err
		}
		if sink, err = net.Listen("tcp", addrB+":0"); err != nil {
			return err
		}
		uc, err = net.ListenPacket("udp", addrB+":0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tl.Close(); sink.Close(); uc.Close() })
	go serveTCP(tl)
	go serveSink(sink)
	go serveUDP(uc)

	var tc net.Conn
	var uconn net.Conn
	if err := inNetns(nsA, func() (err error) {
		if tc, err = net.DialTimeout("tcp", tl.Addr().String(), 5*time.Second); err != nil {
			return err
		}
		uconn, err = net.Dial("udp", uc.LocalAddr().String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tc.Close(); uconn.Close() })
	tc.(*net.TCPConn).SetNoDelay(true)

	before := medianRTT(t, tc, 21)
	t.Logf("TCP echo RTT without nfdelay: median %v", before)

	// nfdelay on queue 0 of B, then the rule that queues what B receives on
	// the veth.
	dir := t.TempDir()
	pidfile := filepath.Join(dir, "nfdelay.pid")
	stderr := &logFile{path: filepath.Join(dir, "nfdelay.log")}
	logf, err := os.Create(stderr.path)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command("ip", "netns", "exec", nsB, self, "--queue", "0",
		"--delay", testDelay.String(), "--jitter", testJitter.String(), "--pidfile", pidfile)
	cmd.Env = append(os.Environ(), envAsMain+"=1")
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	waitBound(t, pidfile, exited, stderr)
	rule := []string{"INPUT", "-i", devB, "-j", "NFQUEUE", "--queue-num", "0", "--queue-bypass"}
	iptables(t, nsB, append([]string{"-A"}, rule...)...)

	during := medianRTT(t, tc, 15)
	t.Logf("TCP echo RTT with nfdelay --delay %v --jitter %v: median %v", testDelay, testJitter, during)
	if min := before + testDelay*8/10; during < min {
		t.Errorf("median RTT %v with nfdelay, want at least %v (RTT before %v + 0.8 × %v)", during, min, before, testDelay)
	}

	// Order: datagrams 1 ms apart with ±20 ms of jitter each come back in
	// the order they were sent, and every one comes back.
	const burst = 60
	for i := range burst {
		if _, err := uconn.Write(binary.BigEndian.AppendUint32(nil, uint32(i))); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	got := readUDP(t, uconn, burst, 10*time.Second)
	if want := seq(0, burst); !slices.Equal(got, want) {
		t.Errorf("UDP datagrams through the delayed link came back as %v, want %v (lost or reordered)", got, want)
	}

	// A bulk transfer is not throttled: the queue holds a good part of a
	// window, not the two packets TCP small queues would allow a sending
	// socket whose packets are held (which is why the rule is on the way
	// in).
	maxQueued, took := bulk(t, nsA, nsB, sink.Addr().String())
	t.Logf("%d MiB through the delayed link in %v, up to %d packets in the queue at once", bulkBytes>>20, took.Round(time.Millisecond), maxQueued)
	if maxQueued < 8 {
		t.Errorf("at most %d packets in the queue during a bulk transfer, want >= 8 (throttled flow?)", maxQueued)
	}
	if st := queueStats(t, nsB); st.dropped != 0 || st.userDropped != 0 {
		t.Errorf("kernel queue 0 dropped packets: %+v", st)
	}

	// Shutdown with a packet in the queue: it must be accepted at once,
	// not dropped (the kernel drops what is queued on unbind). UDP: a lost
	// datagram is never sent again.
	var pending uint32
	for i := 0; pending == 0 && i < 20; i++ {
		if _, err := uconn.Write(binary.BigEndian.AppendUint32(nil, uint32(1000+i))); err != nil {
			t.Fatal(err)
		}
		// The write returned: the datagram went through OUTPUT and waits
		// in the queue for about 100 ms, unless this test was descheduled.
		if pending = queueStats(t, nsB).total; pending == 0 {
			readUDP(t, uconn, 1, 5*time.Second)
		}
	}
	if pending == 0 {
		t.Fatal("never saw a datagram waiting in the queue")
	}
	sent := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err // for the cleanup
		if err != nil {
			t.Fatalf("nfdelay after SIGTERM: %v\n%s", err, stderr)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("nfdelay did not exit within 10s of SIGTERM\n%s", stderr)
	}
	back := readUDP(t, uconn, 1, 5*time.Second)
	t.Logf("datagram pending at SIGTERM echoed after %v; nfdelay exited 0:\n%s", time.Since(sent).Round(time.Millisecond), strings.TrimSpace(stderr.String()))
	if len(back) != 1 || back[0] < 1000 {
		t.Fatalf("datagram pending at SIGTERM: got %v back", back)
	}
	if !regexpFind(stderr.String(), `\((\d+) of them early at shutdown\)`, func(n int) bool { return n >= 1 }) {
		t.Errorf("nfdelay did not report a packet accepted early at shutdown:\n%s", stderr)
	}
	if !regexpFind(stderr.String(), `(\d+) verdicts failed`, func(n int) bool { return n == 0 }) {
		t.Errorf("nfdelay reports failed verdicts:\n%s", stderr)
	}
	if _, err := os.Stat(pidfile); !os.IsNotExist(err) {
		t.Errorf("pid file left after exit: %v", err)
	}

	// Unbound, the rule bypasses; then the rule goes. The same TCP
	// connection still works and is fast again.
	iptables(t, nsB, append([]string{"-D"}, rule...)...)
	after := medianRTT(t, tc, 21)
	t.Logf("TCP echo RTT after SIGTERM and rule removal: median %v", after)
	if after >= testDelay {
		t.Errorf("median RTT %v after nfdelay stopped, want below %v", after, testDelay)
	}
	if _, err := uconn.Write([]byte{0, 0, 0, 9}); err != nil {
		t.Fatal(err)
	}
	if got := readUDP(t, uconn, 1, 5*time.Second); !slices.Equal(got, []uint32{9}) {
		t.Errorf("UDP after the rule went: got %v", got)
	}
}

func TestUsageExit(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args []string
		code int
	}{
		{[]string{"--delay", "0s"}, 2},
		{[]string{"--delay", "10ms", "--jitter", "1s"}, 2},
		{[]string{"--bogus"}, 2},
		{[]string{"-h"}, 0},
	}
	for _, tt := range tests {
		cmd := exec.Command(self, tt.args...)
		cmd.Env = append(os.Environ(), envAsMain+"=1")
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != tt.code || !strings.Contains(string(out), "usage: nfdelay") {
			t.Errorf("nfdelay %v: exit %d, want %d; output %q", tt.args, code, tt.code, out)
		}
	}
}

// makeNetns creates two namespaces joined by a veth pair (created inside
// them: the host sees no new interface) and removes them on cleanup.
func makeNetns(t *testing.T, a, b string) {
	t.Helper()
	for _, ns := range []string{a, b} {
		ipCmd(t, "netns", "add", ns)
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	}
	ipCmd(t, "link", "add", devA, "netns", a, "type", "veth", "peer", "name", devB, "netns", b)
	ipCmd(t, "-n", a, "addr", "add", addrA+"/30", "dev", devA)
	ipCmd(t, "-n", b, "addr", "add", addrB+"/30", "dev", devB)
	for _, s := range [][]string{{a, devA}, {b, devB}, {a, "lo"}, {b, "lo"}} {
		ipCmd(t, "-n", s[0], "link", "set", s[1], "up")
	}
}

func ipCmd(t *testing.T, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

func iptables(t *testing.T, ns string, args ...string) {
	t.Helper()
	ipCmd(t, append([]string{"netns", "exec", ns, "iptables", "-w"}, args...)...)
}

// inNetns runs f on an OS thread of its own that has entered the named
// namespace; sockets f creates stay in that namespace. The thread goes
// back to the original namespace, or is thrown away when it cannot.
func inNetns(name string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", syscall.Gettid()))
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer orig.Close()
		target, err := os.Open("/run/netns/" + name)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer target.Close()
		if err := setns(target); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("setns %s: %w", name, err)
			return
		}
		ferr := f()
		if err := setns(orig); err != nil {
			errc <- fmt.Errorf("setns back: %w", err) // the thread stays locked and ends with this goroutine
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// sysSetns is setns(2)'s number: package syscall has none for some
// architectures.
var sysSetns = map[string]uintptr{"amd64": 308, "arm64": 268, "riscv64": 268, "386": 346, "arm": 375, "ppc64le": 350, "s390x": 339}

func setns(f *os.File) error {
	nr, ok := sysSetns[runtime.GOARCH]
	if !ok {
		return fmt.Errorf("setns: syscall number unknown on %s", runtime.GOARCH)
	}
	if _, _, e := syscall.RawSyscall(nr, f.Fd(), syscall.CLONE_NEWNET, 0); e != 0 {
		return e
	}
	return nil
}

func serveTCP(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
	}
}

// serveSink reads a connection to its end and answers with the byte count.
func serveSink(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			n, _ := io.Copy(io.Discard, c)
			_, _ = c.Write(binary.BigEndian.AppendUint64(nil, uint64(n)))
		}()
	}
}

// bulk sends bulkBytes from A to the sink in B and returns the most packets
// seen waiting in B's queue meanwhile and the time it took.
func bulk(t *testing.T, nsA, nsB, addr string) (maxQueued uint32, took time.Duration) {
	t.Helper()
	var c net.Conn
	if err := inNetns(nsA, func() (err error) {
		c, err = net.DialTimeout("tcp", addr, 5*time.Second)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	done := make(chan struct{})
	peak := make(chan uint32)
	go func() {
		var m uint32
		for {
			select {
			case <-done:
				peak <- m
				return
			case <-time.After(2 * time.Millisecond):
				if st, err := readQueueStats(nsB); err == nil {
					m = max(m, st.total)
				}
			}
		}
	}()
	_ = c.SetDeadline(time.Now().Add(2 * time.Minute))
	t0 := time.Now()
	_, werr := c.Write(make([]byte, bulkBytes))
	if werr == nil {
		werr = c.(*net.TCPConn).CloseWrite()
	}
	var n [8]byte
	_, rerr := io.ReadFull(c, n[:])
	took = time.Since(t0)
	close(done)
	maxQueued = <-peak
	if werr != nil || rerr != nil || binary.BigEndian.Uint64(n[:]) != bulkBytes {
		t.Fatalf("bulk transfer: write %v, read %v, sink got %d of %d bytes", werr, rerr, binary.BigEndian.Uint64(n[:]), bulkBytes)
	}
	return maxQueued, took
}

func serveUDP(c net.PacketConn) {
	buf := make([]byte, 2048)
	for {
		n, from, err := c.ReadFrom(buf)
		if err != nil {
			return
		}
		_, _ = c.WriteTo(buf[:n], from)
	}
}

// medianRTT is the median round trip of n 16-byte echoes on c; the echo
// must return the bytes sent.
func medianRTT(t *testing.T, c net.Conn, n int) time.Duration {
	t.Helper()
	rtts := make([]time.Duration, 0, n)
	msg, back := make([]byte, 16), make([]byte, 16)
	for i := range n {
		copy(msg, fmt.Sprintf("echo %10d.", i))
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		t0 := time.Now()
		if _, err := c.Write(msg); err != nil {
			t.Fatalf("echo %d: %v", i, err)
		}
		if _, err := io.ReadFull(c, back); err != nil {
			t.Fatalf("echo %d: %v", i, err)
		}
		rtts = append(rtts, time.Since(t0))
		if !bytes.Equal(msg, back) {
			t.Fatalf("echo %d: sent %q, got %q", i, msg, back)
		}
		time.Sleep(5 * time.Millisecond)
	}
	slices.Sort(rtts)
	return rtts[n/2]
}

// readUDP reads n 4-byte datagrams (their sequence numbers), bounded.
func readUDP(t *testing.T, c net.Conn, n int, timeout time.Duration) []uint32 {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(timeout))
	var got []uint32
	buf := make([]byte, 64)
	for len(got) < n {
		k, err := c.Read(buf)
		if err != nil {
			t.Logf("UDP read after %d of %d datagrams: %v", len(got), n, err)
			break
		}
		if k == 4 {
			got = append(got, binary.BigEndian.Uint32(buf))
		}
	}
	return got
}

func seq(from, n int) []uint32 {
	s := make([]uint32, n)
	for i := range s {
		s[i] = uint32(from + i)
	}
	return s
}

// queueStat is queue 0's line of /proc/net/netfilter/nfnetlink_queue in
// the namespace: queue_num peer_portid queue_total copy_mode copy_range
// queue_dropped queue_user_dropped id_sequence 1.
type queueStat struct{ total, dropped, userDropped uint32 }

func queueStats(t *testing.T, ns string) queueStat {
	t.Helper()
	st, err := readQueueStats(ns)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func readQueueStats(ns string) (queueStat, error) {
	var st queueStat
	found := false
	err := inNetns(ns, func() error {
		f, err := os.Open("/proc/thread-self/net/netfilter/nfnetlink_queue")
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) < 7 || fs[0] != "0" {
				continue
			}
			v := make([]uint32, 7)
			for i := range v {
				n, err := strconv.ParseUint(fs[i], 10, 32)
				if err != nil {
					return fmt.Errorf("%q: %w", sc.Text(), err)
				}
				v[i] = uint32(n)
			}
			st, found = queueStat{total: v[2], dropped: v[5], userDropped: v[6]}, true
		}
		return sc.Err()
	})
	if err != nil || !found {
		return st, fmt.Errorf("queue 0 statistics in %s: %v (found %v)", ns, err, found)
	}
	return st, nil
}

// regexpFind: the first number the pattern captures in s satisfies ok.
func regexpFind(s, pattern string, ok func(int) bool) bool {
	m := regexp.MustCompile(pattern).FindStringSubmatch(s)
	if m == nil {
		return false
	}
	n, err := strconv.Atoi(m[1])
	return err == nil && ok(n)
}

// waitBound waits until nfdelay wrote its pid file (the queue is bound).
func waitBound(t *testing.T, pidfile string, exited chan error, stderr *logFile) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(pidfile); err == nil {
			return
		}
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("nfdelay exited before binding: %v\n%s", err, stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("nfdelay did not bind within 10s\n%s", stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// logFile is nfdelay's stderr, a real file (no copying goroutine to race
// with), read when printed.
type logFile struct{ path string }

func (l *logFile) String() string {
	b, err := os.ReadFile(l.path)
	if err != nil {
		return err.Error()
	}
	return string(b)
}
