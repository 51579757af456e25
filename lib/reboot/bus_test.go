package reboot

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
)

// startBus runs a private dbus-daemon for one test and returns its address.
func startBus(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("dbus-daemon")
	if err != nil {
		t.Skip("dbus-daemon not installed: the D-Bus adapter tests need it (apt-get install dbus-daemon)")
	}
	// A short directory: unix socket paths are limited to 108 bytes.
	dir, err := os.MkdirTemp("", "crbd-bus")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	conf := filepath.Join(dir, "bus.conf")
	err = os.WriteFile(conf, []byte(`<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path=`+dir+`/bus</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
`), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config-file="+conf, "--nofork", "--print-address")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("dbus-daemon: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("dbus-daemon: %s", stderr.String())
		}
	})
	addr := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		addr <- strings.TrimSpace(line)
	}()
	select {
	case a := <-addr:
		if a == "" {
			t.Fatal("dbus-daemon printed no address")
		}
		return a
	case <-time.After(30 * time.Second):
		t.Fatal("dbus-daemon did not start")
	}
	return ""
}

// connect opens an authenticated connection to addr bounded by ctx.
func connect(ctx context.Context, addr string) (*dbus.Conn, error) {
	return dbus.Connect(addr, dbus.WithContext(ctx))
}

// busErr is a D-Bus error reply.
func busErr(name, msg string) *dbus.Error { return dbus.NewError(name, []any{msg}) }

// fakeLogind serves the parts of org.freedesktop.login1.Manager the adapter
// uses and records the calls in order.
type fakeLogind struct {
	mu         sync.Mutex
	calls      []string
	rebootErr  *dbus.Error
	wallErr    *dbus.Error
	listErr    *dbus.Error
	inhibitors []inhibitor
	hang       bool // Reboot and ListInhibitors never answer
	release    chan struct{}
}

func newFakeLogind(t *testing.T, addr string) *fakeLogind {
	t.Helper()
	conn, err := connect(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	f := &fakeLogind{release: make(chan struct{})}
	t.Cleanup(func() { close(f.release) })
	if err := conn.Export(f, logindPath, logindIface); err != nil {
		t.Fatal(err)
	}
	reply, err := conn.RequestName(logindName, dbus.NameFlagDoNotQueue)
	if err != nil || reply != dbus.RequestNameReplyPrimaryOwner {
		t.Fatalf("RequestName: %v, %v", reply, err)
	}
	return f
}

// set changes the fake under its lock (its methods run on other goroutines).
func (f *fakeLogind) set(change func(f *fakeLogind)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(f)
}

func (f *fakeLogind) recorded() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeLogind) wait() {
	f.mu.Lock()
	hang := f.hang
	f.mu.Unlock()
	if hang {
		<-f.release
	}
}

func (f *fakeLogind) Reboot(interactive bool) *dbus.Error {
	f.mu.Lock()
	f.calls = append(f.calls, "Reboot("+strconv.FormatBool(interactive)+")")
	err := f.rebootErr
	f.mu.Unlock()
	f.wait()
	return err
}

func (f *fakeLogind) SetWallMessage(msg string, enable bool) *dbus.Error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "SetWallMessage("+msg+", "+strconv.FormatBool(enable)+")")
	return f.wallErr
}

func (f *fakeLogind) ListInhibitors() ([]inhibitor, *dbus.Error) {
	f.mu.Lock()
	f.calls = append(f.calls, "ListInhibitors")
	list, err := f.inhibitors, f.listErr
	f.mu.Unlock()
	f.wait()
	if err != nil {
		return nil, err
	}
	return list, nil
}
