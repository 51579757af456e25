package systemd

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"
)

// Without a reachable system bus the answer is an error, never a state.
func TestSystemStateNoBus(t *testing.T) {
	if _, err := os.Stat("/run/systemd/system"); err == nil {
		t.Skip("host runs systemd; covered by the e2e suite")
	}
	t.Setenv("DBUS_SYSTEM_BUS_ADDRESS", "unix:path="+t.TempDir()+"/none")
	st, err := Manager{Timeout: time.Second}.SystemState(context.Background())
	if !errors.Is(err, ErrNoBus) || st != "" {
		t.Fatalf("SystemState = %q, %v; want ErrNoBus", st, err)
	}
}
