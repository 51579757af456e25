package reboot

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"github.com/godbus/dbus/v5"

	"github.com/clusterrebootd/clusterrebootd/test/dbustest"
)

// startBus runs a private dbus-daemon for one test.
func startBus(t *testing.T) string { return dbustest.Start(t) }

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
	disconnect bool // Reboot drops logind's bus connection without replying (a shutdown under way)
	release    chan struct{}
	conn       *dbus.Conn
}

func newFakeLogind(t *testing.T, addr string) *fakeLogind {
	t.Helper()
	conn, err := connect(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	f := &fakeLogind{release: make(chan struct{}), conn: conn}
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
	err, disconnect := f.rebootErr, f.disconnect
	f.mu.Unlock()
	if disconnect {
		f.conn.Close() // the bus answers the caller with NoReply
		return nil
	}
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
