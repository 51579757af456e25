package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	co "github.com/clusterrebootd/clusterrebootd/lib/coordinator"
	"github.com/clusterrebootd/clusterrebootd/lib/systemd"
)

// checkTimerUnit is the timer that fires `check --once`.
const checkTimerUnit = "clusterrebootd-check.timer"

// StatusCmd prints the cluster table.
type StatusCmd struct {
	JSON    bool          `help:"Print JSON for scripts." name:"json"`
	History time.Duration `help:"How far back to look for each node's last reboot." default:"720h"`
}

func (s *StatusCmd) Run(e *Env) error {
	if s.History < 0 {
		return usageError("status --history: %s is negative; give how far back to look", s.History)
	}
	a, err := e.open()
	if err != nil {
		return err
	}
	defer a.Close()
	st, err := a.coord.Status(e.Ctx, s.History)
	if err != nil {
		return err
	}
	// Best effort: without systemd (containers, the demo) there is no timer.
	mgr := systemd.Manager{Timeout: a.cfg.Systemd.DBusTimeout.Std()}
	if next, err := mgr.NextElapse(e.Ctx, checkTimerUnit); err == nil {
		st.SetNextCheck(a.cfg.NodeName, next)
	} else {
		a.log.Debug("no check timer to report", "error", err)
	}
	if s.JSON {
		return writeJSON(e.Stdout, st)
	}
	printStatus(e.Stdout, st)
	return nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func printStatus(w io.Writer, st co.Status) {
	fmt.Fprintf(w, "cluster %s: %d/%d slot(s) in use", st.Cluster, st.SlotsUsed, st.MaxConcurrent)
	if st.Frozen {
		fmt.Fprint(w, ", FROZEN (overdue slot)")
	}
	if st.Paused != nil {
		fmt.Fprintf(w, ", PAUSED by %s since %s: %s", st.Paused.By, st.Paused.At.Format(time.RFC3339), st.Paused.Reason)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tALIVE\tHEALTHY\tREBOOT\tSTATE\tSLOT\tQUEUE\tLAST REBOOT\tWHY NOT REBOOTING")
	for _, n := range st.Nodes {
		slot, queue, last := "-", "-", "-"
		if n.Slot != nil {
			slot = n.Slot.Age.Round(time.Second).String()
			if n.Slot.Overdue {
				slot += " OVERDUE"
			}
		}
		if n.QueuePosition > 0 {
			queue = fmt.Sprint(n.QueuePosition)
		}
		if !n.LastReboot.IsZero() {
			last = st.Now.Sub(n.LastReboot).Round(time.Minute).String() + " ago"
		}
		state := n.State
		if state == "" {
			state = "-"
		}
		name := n.Node
		if n.Node == st.Self {
			name += " *" // this node
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, yesNo(n.Alive), yesNo(n.Healthy),
			yesNo(n.RebootRequired), state, slot, queue, last, oneLine(n.Why))
	}
	tw.Flush()
	if !st.NextCheck.IsZero() {
		fmt.Fprintf(w, "next check on this node: %s (in %s)\n", st.NextCheck.Format(time.RFC3339), st.NextCheck.Sub(st.Now).Round(time.Second))
	}
	for _, warn := range st.Warnings {
		fmt.Fprintln(w, "warning:", warn)
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }

// SimulateCmd evaluates every gate read-only.
type SimulateCmd struct {
	JSON bool `help:"Print JSON for scripts." name:"json"`
}

func (s *SimulateCmd) Run(e *Env) error {
	a, err := e.open()
	if err != nil {
		return err
	}
	defer a.Close()
	r, err := a.coord.Simulate(e.Ctx)
	if err != nil {
		return err
	}
	if s.JSON {
		if err := writeJSON(e.Stdout, r); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(e.Stdout, "node %s: reboot needed: %s", r.Node, r.Need)
		if r.Reason != "" {
			fmt.Fprintf(e.Stdout, " (%s)", r.Reason)
		}
		fmt.Fprintln(e.Stdout)
		tw := tabwriter.NewWriter(e.Stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "GATE\tVERDICT\tREASON")
		for _, g := range r.Gates {
			verdict := "pass"
			switch {
			case g.Abort:
				verdict = "stop"
			case g.Wait:
				verdict = "wait"
			case !g.Pass:
				verdict = "BLOCK"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", g.Gate, verdict, oneLine(g.Reason))
		}
		tw.Flush()
		fmt.Fprintf(e.Stdout, "verdict: %s (a real run would exit %d)\n", r.Verdict, r.Code)
	}
	if r.Code != co.CodeOK {
		return quietExit(r.Code)
	}
	return nil
}

// quietExit ends a command with an exit code and nothing more to print.
type quietExit int

func (q quietExit) Error() string { return "" }
func (q quietExit) ExitCode() int { return int(q) }
