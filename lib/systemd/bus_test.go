package systemd

import (
	"context"
	"strconv"
	"sync"
	"testing"

	sd "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"

	"github.com/clusterrebootd/clusterrebootd/test/dbustest"
)

// startBus runs a private dbus-daemon for one test.
func startBus(t *testing.T) string { return dbustest.Start(t) }

// connect opens an authenticated connection to addr bounded by ctx.
func connect(ctx context.Context, addr string) (*dbus.Conn, error) {
	return dbus.Connect(addr, dbus.WithContext(ctx))
}

// dialer points go-systemd at the private bus.
func dialer(addr string) DialFunc {
	return func(ctx context.Context) (*sd.Conn, error) {
		return sd.NewConnection(func() (*dbus.Conn, error) { return connect(ctx, addr) })
	}
}

// busErr is a D-Bus error reply.
func busErr(name, msg string) *dbus.Error { return dbus.NewError(name, []any{msg}) }

// startCall records one StartTransientUnit.
type startCall struct {
	Name, Mode string
	Props      map[string]any
}

// fakeSystemd serves the parts of org.freedesktop.systemd1 the adapters use.
// Units are keyed by name; a unit's state is its ActiveState.
type fakeSystemd struct {
	conn *dbus.Conn

	mu          sync.Mutex
	systemState any // SystemState value
	stateErr    *dbus.Error
	units       map[string]string
	unitErr     *dbus.Error // answer to every unit property Get
	noSuchUnit  bool        // unknown units answer NoSuchUnit (else "inactive", as systemd loads them)
	timers      map[string]any
	startErr    *dbus.Error
	jobResult   string    // JobRemoved result; "" → never sent
	mainExit    *mainExit // a failed unit's Service properties; nil → systemd's defaults (exit-code, 0, 0)
	resetKeeps  bool      // ResetFailedUnit leaves the unit in place
	hang        chan struct{}
	onStart     func() // called once a start was recorded
	starts      []startCall
	resets      []string
	jobID       uint32
}

func newFakeSystemd(t *testing.T, addr string) *fakeSystemd {
	t.Helper()
	conn, err := connect(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	f := &fakeSystemd{conn: conn, units: map[string]string{}, timers: map[string]any{},
		systemState: "running", jobResult: "done", hang: make(chan struct{})}
	t.Cleanup(func() { close(f.hang) })
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(conn.Export(sdManager{f}, "/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager"))
	must(conn.Export(managerProps{f}, "/org/freedesktop/systemd1", "org.freedesktop.DBus.Properties"))
	must(conn.ExportSubtree(unitProps{f}, "/org/freedesktop/systemd1/unit", "org.freedesktop.DBus.Properties"))
	reply, err := conn.RequestName("org.freedesktop.systemd1", dbus.NameFlagDoNotQueue)
	must(err)
	if reply != dbus.RequestNameReplyPrimaryOwner {
		t.Fatalf("RequestName: %v", reply)
	}
	return f
}

// set changes the fake under its lock (its handlers run on other goroutines).
func (f *fakeSystemd) set(change func(f *fakeSystemd)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(f)
}

func (f *fakeSystemd) setUnit(name, state string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.units[name] = state
}

func (f *fakeSystemd) calls() ([]startCall, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]startCall(nil), f.starts...), append([]string(nil), f.resets...)
}

// mainExit is what systemd reports about a failed service's main process.
type mainExit struct {
	result       string // Result
	code, status int32  // ExecMainCode (1 exited, 2 killed), ExecMainStatus
	unreadable   bool   // the Service properties answer an error
}

type sdManager struct{ f *fakeSystemd }

func (m sdManager) StartTransientUnit(name, mode string, props []sd.Property, aux []sd.PropertyCollection) (dbus.ObjectPath, *dbus.Error) {
	f := m.f
	f.mu.Lock()
	call := startCall{Name: name, Mode: mode, Props: map[string]any{}}
	for _, p := range props {
		call.Props[p.Name] = p.Value.Value()
	}
	if f.startErr != nil {
		f.mu.Unlock()
		return "", f.startErr
	}
	if _, ok := f.units[name]; ok {
		f.mu.Unlock()
		return "", busErr(errUnitExists, "Unit "+name+" was already loaded or has a fragment file.")
	}
	f.starts = append(f.starts, call)
	f.jobID++
	id, res := f.jobID, f.jobResult
	job := dbus.ObjectPath("/org/freedesktop/systemd1/job/" + strconv.Itoa(int(id)))
	switch res {
	case "done":
		f.units[name] = "active"
	case "":
	default:
		f.units[name] = "failed"
	}
	onStart := f.onStart
	f.mu.Unlock()
	if onStart != nil {
		onStart()
	}
	if res != "" {
		// go-systemd registers the job before it handles the signal, so
		// sending it ahead of the reply is safe.
		f.conn.Emit("/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager.JobRemoved", id, job, name, res)
	}
	return job, nil
}

func (m sdManager) ResetFailedUnit(name string) *dbus.Error {
	f := m.f
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resets = append(f.resets, name)
	st, ok := f.units[name]
	if !ok {
		return busErr(errNoSuchUnit, "Unit "+name+" not loaded.")
	}
	if (st == "failed" || st == "inactive") && !f.resetKeeps {
		delete(f.units, name)
	}
	return nil
}

type managerProps struct{ f *fakeSystemd }

func (p managerProps) Get(iface, name string) (dbus.Variant, *dbus.Error) {
	f := p.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if iface != "org.freedesktop.systemd1.Manager" || name != "SystemState" {
		return dbus.Variant{}, busErr("org.freedesktop.DBus.Error.UnknownProperty", "no "+iface+"."+name)
	}
	if f.stateErr != nil {
		return dbus.Variant{}, f.stateErr
	}
	if f.systemState == "hang" {
		f.mu.Unlock()
		<-f.hang
		f.mu.Lock()
	}
	return dbus.MakeVariant(f.systemState), nil
}

type unitProps struct{ f *fakeSystemd }

func (p unitProps) Get(msg dbus.Message, iface, name string) (dbus.Variant, *dbus.Error) {
	f := p.f
	f.mu.Lock()
	defer f.mu.Unlock()
	path := string(msg.Headers[dbus.FieldPath].Value().(dbus.ObjectPath))
	var unit string
	for _, n := range append(keys(f.units), keys(f.timers)...) {
		if path == "/org/freedesktop/systemd1/unit/"+sd.PathBusEscape(n) {
			unit = n
		}
	}
	if f.unitErr != nil {
		return dbus.Variant{}, f.unitErr
	}
	switch {
	case iface == "org.freedesktop.systemd1.Unit" && name == "ActiveState":
		st, ok := f.units[unit]
		if !ok {
			if f.noSuchUnit {
				return dbus.Variant{}, busErr(errNoSuchUnit, "Unit not loaded.")
			}
			st = "inactive" // systemd loads the unit: LoadState not-found
		}
		return dbus.MakeVariant(st), nil
	case iface == "org.freedesktop.systemd1.Service":
		m := f.mainExit
		if m == nil {
			m = &mainExit{result: "exit-code"}
		}
		if _, ok := f.units[unit]; !ok || m.unreadable {
			return dbus.Variant{}, busErr(errNoSuchUnit, "Unit not loaded.")
		}
		switch name {
		case "Result":
			return dbus.MakeVariant(m.result), nil
		case "ExecMainCode":
			return dbus.MakeVariant(m.code), nil
		case "ExecMainStatus":
			return dbus.MakeVariant(m.status), nil
		}
	case iface == "org.freedesktop.systemd1.Timer" && name == "NextElapseUSecRealtime":
		v, ok := f.timers[unit]
		if !ok {
			return dbus.Variant{}, busErr("org.freedesktop.DBus.Error.UnknownInterface", "Unknown interface "+iface)
		}
		return dbus.MakeVariant(v), nil
	}
	return dbus.Variant{}, busErr("org.freedesktop.DBus.Error.UnknownProperty", "no "+iface+"."+name)
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
