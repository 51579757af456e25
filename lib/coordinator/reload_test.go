package coordinator

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// A reload waiting when the holder evaluates its gates under the lock
// replaces the gates and settings it may change; identity changes are
// refused whole.
func TestHoldAppliesReload(t *testing.T) {
	for _, tc := range []struct {
		name   string
		reload func(e *env) Reload
		code   Code
		gate   string
		reboot bool
		check  func(t *testing.T, e *env, c *Coordinator)
	}{
		{
			name: "a refusing health script from the reload blocks the reboot",
			reload: func(e *env) Reload {
				o := e.opt
				o.BackoffMin, o.BackoffMax = 2*time.Second, 3*time.Second
				o.MaxRebootDuration = time.Hour
				o.MaxHoldWait = time.Minute // cannot change mid-hold: kept
				return Reload{Options: o, Deps: Deps{Script: &fakeScript{rec: e.rec, verdict: ScriptVerdict{ExitCode: 1, FirstLine: "maintenance"}}}}
			},
			code: CodeHealth, gate: "health-script",
			check: func(t *testing.T, e *env, c *Coordinator) {
				if c.opt.BackoffMin != 2*time.Second || c.opt.MaxRebootDuration != time.Hour {
					t.Errorf("options not applied: %+v", c.opt)
				}
				if c.opt.MaxHoldWait != time.Hour {
					t.Errorf("max_hold_wait changed mid-hold to %s", c.opt.MaxHoldWait)
				}
				if len(e.script.seen()) != 0 {
					t.Errorf("the replaced script still ran: %v", e.script.seen())
				}
			},
		},
		{
			name: "a closed window from the reload",
			reload: func(e *env) Reload {
				return Reload{Options: e.opt, Deps: Deps{Windows: &fakeWindows{rec: e.rec, verdict: WindowVerdict{Reason: "window closed until 02:00"}}}}
			},
			code: CodeBlocked, gate: "window",
		},
		{
			name: "another node name: refused, the old gates decide",
			reload: func(e *env) Reload {
				o := e.opt
				o.Node = "other"
				return Reload{Options: o, Deps: Deps{Script: &fakeScript{rec: e.rec, verdict: ScriptVerdict{ExitCode: 1, FirstLine: "x"}}}}
			},
			code: CodeOK, reboot: true,
			check: func(t *testing.T, e *env, c *Coordinator) {
				if c.opt.Node != self {
					t.Errorf("node changed to %q", c.opt.Node)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := holdEnv()
				e.opt.MaxHoldWait = time.Hour
				c := e.coord(t)
				ch := make(chan Reload, 1)
				ch <- tc.reload(e)
				c.Reloads(ch)
				err := c.Hold(t.Context())
				ce := wantErr(t, err, tc.code, tc.gate)
				if ce != nil && tc.code != CodeOK && !strings.Contains(ce.Reason, "max_hold_wait passed") {
					t.Errorf("reason = %q", ce.Reason)
				}
				if got := len(e.rb.calls()) > 0; got != tc.reboot {
					t.Errorf("rebooted = %v, want %v", got, tc.reboot)
				}
				if tc.check != nil {
					tc.check(t, e, c)
				}
			})
		})
	}
}
