package gate

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestNodeHealth(t *testing.T) {
	state := func(s string, err error) func(context.Context) (string, error) {
		return func(context.Context) (string, error) { return s, err }
	}
	busDown := errors.New("no bus")
	tests := []struct {
		name    string
		nh      NodeHealth
		healthy bool
		why     string
		err     bool
	}{
		{"nothing configured", NodeHealth{}, true, "no node health test configured", false},
		{"running", NodeHealth{States: []string{"running"}, SystemState: state("running", nil)}, true, "systemd running", false},
		{"degraded is unhealthy", NodeHealth{States: []string{"running"}, SystemState: state("degraded", nil)}, false, `"degraded" not in healthy_states`, false},
		{"degraded allowed", NodeHealth{States: []string{"running", "degraded"}, SystemState: state("degraded", nil)}, true, "systemd degraded", false},
		{"bus unreachable fails closed", NodeHealth{States: []string{"running"}, SystemState: state("", busDown)}, false, "", true},
		{"states without connection", NodeHealth{States: []string{"running"}}, false, "", true},
		{"command ok", NodeHealth{Command: []string{"/bin/true"}, Timeout: time.Second}, true, "node_health_command ok", false},
		{"command fails", NodeHealth{Command: []string{"/bin/sh", "-c", "echo disk full; exit 1"}, Timeout: time.Second}, false, "exit 1: disk full", false},
		{"command times out", NodeHealth{Command: []string{"/bin/sleep", "5"}, Timeout: 50 * time.Millisecond}, false, "", true},
		{"both", NodeHealth{States: []string{"running"}, SystemState: state("running", nil), Command: []string{"/bin/true"}, Timeout: time.Second},
			true, "systemd running, node_health_command ok", false},
		{"systemd bad skips command", NodeHealth{States: []string{"running"}, SystemState: state("starting", nil), Command: []string{"/bin/true"}, Timeout: time.Second},
			false, "starting", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ok, why, err := tc.nh.Healthy(context.Background())
			if (err != nil) != tc.err {
				t.Fatalf("err = %v, want error %v", err, tc.err)
			}
			if ok != tc.healthy {
				t.Errorf("healthy = %v, want %v", ok, tc.healthy)
			}
			if err == nil && !strings.Contains(why, tc.why) {
				t.Errorf("why = %q, want it to contain %q", why, tc.why)
			}
			if err != nil && ok {
				t.Error("an error must never be healthy")
			}
		})
	}
}
