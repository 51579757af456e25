package etcdtest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Timeouts of the harness. They bound waits; they are not assertions.
const (
	healthyTimeout = 60 * time.Second
	stopTimeout    = 10 * time.Second
	probeTimeout   = time.Second
	startAttempts  = 3
)

var errExited = errors.New("etcd exited")

// Options configures a server started by StartWith. The zero value is a
// plain-HTTP member, which is what Start uses.
type Options struct {
	// CertFile and KeyFile make the client listener serve HTTPS.
	CertFile, KeyFile string
	// TrustedCAFile is the CA that client certificates must chain to when
	// ClientCertAuth is set.
	TrustedCAFile  string
	ClientCertAuth bool
	// QuotaBackendBytes is the backend quota; 0 means 64 MiB.
	QuotaBackendBytes int64
	// Args are extra etcd flags, appended last (so they win).
	Args []string
}

// Server is one etcd member on 127.0.0.1 with its own ports and data dir.
type Server struct {
	bin     string
	opts    Options
	dir     string // holds data/ and etcd.log
	client  int    // ports
	peer    int
	metrics int

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd has been reaped
}

// Start starts a plain-HTTP member and waits until it is healthy. The server
// is stopped when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartWith(t, Options{})
}

// StartWith starts a member configured by o and waits until it is healthy.
// The server is stopped when the test ends.
func StartWith(t testing.TB, o Options) *Server {
	t.Helper()
	s := &Server{bin: Binary(t), opts: o, dir: t.TempDir()}
	t.Cleanup(s.Stop) // registered after TempDir: runs before the dir is removed
	var err error
	for attempt := 0; attempt < startAttempts; attempt++ {
		if err = s.pickPorts(); err != nil {
			break
		}
		if err = s.launch(); err != nil {
			break
		}
		if err = s.waitHealthy(); err == nil {
			return s
		}
		s.Kill()
		if !strings.Contains(s.logTail(), "address already in use") {
			break
		}
		// Another process took one of our ports between probe and bind:
		// start afresh on new ones.
		if rerr := os.RemoveAll(filepath.Join(s.dir, "data")); rerr != nil {
			err = rerr
			break
		}
	}
	t.Fatalf("etcdtest: start etcd: %v\n--- etcd log (tail) ---\n%s", err, s.logTail())
	return nil
}

// Endpoints returns the client URLs of the member.
func (s *Server) Endpoints() []string { return []string{s.ClientURL()} }

// ClientURL is the member's client URL (https when Options.CertFile is set).
func (s *Server) ClientURL() string {
	scheme := "http"
	if s.opts.CertFile != "" {
		scheme = "https"
	}
	return fmt.Sprintf("%s://127.0.0.1:%d", scheme, s.client)
}

// DataDir is the member's data directory; it survives Stop and Kill.
func (s *Server) DataDir() string { return filepath.Join(s.dir, "data") }

// LogPath is the file that receives the server's log (level warn).
func (s *Server) LogPath() string { return filepath.Join(s.dir, "etcd.log") }

// Running reports whether the server process is running.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}

// Stop sends SIGTERM, then SIGKILL if the server has not exited after a
// while, and waits for it. The data directory is kept. Stop is idempotent.
func (s *Server) Stop() { s.stop(syscall.SIGTERM) }

// Kill sends SIGKILL and waits for the process. The data directory is kept.
func (s *Server) Kill() { s.stop(syscall.SIGKILL) }

func (s *Server) stop(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(sig)
	select {
	case <-s.exited:
	case <-time.After(stopTimeout):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	s.cmd = nil
}

// Restart starts the member again on the same ports with the same data
// directory (stopping it first if it still runs) and waits until it is
// healthy.
//
// A restarted process that exits during start-up is started once more (with
// the first attempt's log tail in the test log): on a loaded machine one of
// its fixed ports can be taken in the meantime, e.g. as some client's
// ephemeral port, which is not what the tests are about.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Stop()
	for attempt := 1; ; attempt++ {
		if err := s.launch(); err != nil {
			t.Fatalf("etcdtest: restart etcd: %v", err)
		}
		err := s.waitHealthy()
		if err == nil {
			return
		}
		s.Kill()
		if errors.Is(err, errExited) && attempt < 2 {
			t.Logf("etcdtest: restarted etcd exited during start-up; starting it once more\n--- etcd log (tail) ---\n%s", s.logTail())
			time.Sleep(200 * time.Millisecond)
			continue
		}
		t.Fatalf("etcdtest: restart etcd: %v\n--- etcd log (tail) ---\n%s", err, s.logTail())
	}
}

func (s *Server) pickPorts() error {
	var ports [3]int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		ls = append(ls, l)
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	s.client, s.peer, s.metrics = ports[0], ports[1], ports[2]
	return nil
}

func (s *Server) args() []string {
	peer := fmt.Sprintf("http://127.0.0.1:%d", s.peer)
	quota := s.opts.QuotaBackendBytes
	if quota <= 0 {
		quota = 64 << 20
	}
	a := []string{
		"--name=etcdtest",
		"--data-dir=" + s.DataDir(),
		"--listen-client-urls=" + s.ClientURL(),
		"--advertise-client-urls=" + s.ClientURL(),
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=etcdtest=" + peer,
		"--initial-cluster-state=new",
		"--initial-cluster-token=etcdtest",
		fmt.Sprintf("--listen-metrics-urls=http://127.0.0.1:%d", s.metrics),
		"--log-level=warn",
		"--log-outputs=stderr",
		"--quota-backend-bytes=" + strconv.FormatInt(quota, 10),
		"--unsafe-no-fsync=true", // test data: page cache survives SIGKILL, only a host crash loses it
	}
	if s.opts.CertFile != "" {
		a = append(a, "--cert-file="+s.opts.CertFile, "--key-file="+s.opts.KeyFile)
	}
	if s.opts.TrustedCAFile != "" {
		a = append(a, "--trusted-ca-file="+s.opts.TrustedCAFile)
	}
	if s.opts.ClientCertAuth {
		a = append(a, "--client-cert-auth=true")
	}
	return append(a, s.opts.Args...)
}

// launch starts the process; its output is appended to LogPath.
func (s *Server) launch() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return errors.New("already running")
	}
	logf, err := os.OpenFile(s.LogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.bin, s.args()...)
	cmd.Dir = s.dir
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(exited)
	}()
	s.cmd, s.exited = cmd, exited
	return nil
}

// waitHealthy polls /health on the metrics listener (plain HTTP whatever the
// client TLS settings) until the member has a leader.
func (s *Server) waitHealthy() error {
	s.mu.Lock()
	exited := s.exited
	s.mu.Unlock()
	url := fmt.Sprintf("http://127.0.0.1:%d/health", s.metrics)
	hc := &http.Client{Timeout: probeTimeout}
	deadline := time.Now().Add(healthyTimeout)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return errExited
		default:
		}
		last = probe(hc, url)
		if last == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("not healthy after %s: %v", healthyTimeout, last)
}

func probe(hc *http.Client, url string) error {
	resp, err := hc.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"health":"true"`) {
		return fmt.Errorf("health: %s %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// logTail returns the last few KB of the server log.
func (s *Server) logTail() string {
	data, err := os.ReadFile(s.LogPath())
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	const max = 4096
	if len(data) > max {
		data = data[len(data)-max:]
	}
	return string(data)
}
