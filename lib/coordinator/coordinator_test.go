package coordinator

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestNew(t *testing.T) {
	e := newEnv()
	full := Deps{
		Cluster: e.cl, Detector: e.det, Script: e.script, Windows: e.win, Policies: e.pol,
		NodeHealth: e.nh, Rebooter: e.rb, Holder: e.holder, Host: e.host, State: e.st,
	}
	t.Run("defaults", func(t *testing.T) {
		c, err := New(Options{Node: "n1"}, full) // Inhibitors, Logger and Now may be nil
		if err != nil {
			t.Fatal(err)
		}
		if c.opt.MaxConcurrent != 1 || c.opt.MaxRebootsPerReason != 1 || c.opt.CleanupTimeout != 10*time.Second {
			t.Errorf("defaults not applied: %+v", c.opt)
		}
		if c.Now == nil || c.log == nil || time.Since(c.Now()) > time.Hour {
			t.Error("Now or logger not defaulted")
		}
	})
	t.Run("values kept", func(t *testing.T) {
		c, err := New(Options{Node: "n1", MaxConcurrent: 3, MaxRebootsPerReason: 2, CleanupTimeout: time.Second}, full)
		if err != nil {
			t.Fatal(err)
		}
		if c.opt.MaxConcurrent != 3 || c.opt.MaxRebootsPerReason != 2 || c.opt.CleanupTimeout != time.Second {
			t.Errorf("options changed: %+v", c.opt)
		}
	})
	t.Run("empty node", func(t *testing.T) {
		if _, err := New(Options{}, full); err == nil {
			t.Error("empty node accepted")
		}
	})
	t.Run("missing dependencies are named", func(t *testing.T) {
		d := full
		d.Cluster, d.Host = nil, nil
		_, err := New(Options{Node: "n1"}, d)
		if err == nil || !strings.Contains(err.Error(), "Cluster") || !strings.Contains(err.Error(), "Host") {
			t.Errorf("err = %v", err)
		}
		for _, name := range []string{"Detector", "Script", "Windows", "Policies", "NodeHealth", "Rebooter", "Holder", "State"} {
			d := full
			switch name {
			case "Detector":
				d.Detector = nil
			case "Script":
				d.Script = nil
			case "Windows":
				d.Windows = nil
			case "Policies":
				d.Policies = nil
			case "NodeHealth":
				d.NodeHealth = nil
			case "Rebooter":
				d.Rebooter = nil
			case "Holder":
				d.Holder = nil
			case "State":
				d.State = nil
			}
			if _, err := New(Options{Node: "n1"}, d); err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("missing %s: err = %v", name, err)
			}
		}
	})
}

func TestView(t *testing.T) {
	v := View{
		Members: []string{"n3", "n1"},
		Alive:   []Alive{{Node: "n2", Healthy: true}, {Node: "n1"}},
		Slots:   []Slot{{Node: "n4", Deadline: t0}, {Node: "n2", Deadline: t0.Add(time.Minute)}},
		Queue:   []Waiter{{Node: "n2"}, {Node: "n3"}},
	}
	if got := v.NodeNames(); !slices.Equal(got, []string{"n1", "n2", "n3", "n4"}) {
		t.Errorf("NodeNames = %v", got)
	}
	if got := v.Rebooting(); !slices.Equal(got, []string{"n4", "n2"}) {
		t.Errorf("Rebooting = %v", got)
	}
	if got := (View{}).Rebooting(); got == nil || len(got) != 0 {
		t.Errorf("Rebooting of an empty view = %#v", got)
	}
	if s, ok := v.SlotOf("n2"); !ok || s.Node != "n2" {
		t.Errorf("SlotOf(n2) = %+v %v", s, ok)
	}
	if _, ok := v.SlotOf("n1"); ok {
		t.Error("SlotOf(n1) found a slot")
	}
	if a, ok := v.AliveOf("n2"); !ok || !a.Healthy {
		t.Errorf("AliveOf(n2) = %+v %v", a, ok)
	}
	if _, ok := v.AliveOf("n3"); ok {
		t.Error("AliveOf(n3) found a record")
	}
	for node, want := range map[string]int{"n2": 1, "n3": 2, "n1": 0} {
		if got := v.QueuePosition(node); got != want {
			t.Errorf("QueuePosition(%s) = %d, want %d", node, got, want)
		}
	}
	for _, tc := range []struct{ setting, configured, want int }{
		{0, 3, 3}, {2, 3, 2}, {5, 3, 3}, {3, 3, 3},
	} {
		if got := (View{MaxConcurrent: tc.setting}).EffectiveMax(tc.configured); got != tc.want {
			t.Errorf("EffectiveMax(setting %d, configured %d) = %d, want %d", tc.setting, tc.configured, got, tc.want)
		}
	}
	s := Slot{Deadline: t0}
	if s.Overdue(t0) || !s.Overdue(t0.Add(time.Nanosecond)) || s.Overdue(t0.Add(-time.Hour)) {
		t.Error("Overdue: a slot is overdue strictly after its deadline")
	}
}
