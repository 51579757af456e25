package main

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
)

// checkNodeArg refuses a node name from the command line that no node can
// have (config.NamePattern, the syntax node_name must match): it would
// become an etcd key segment (P/slots/<node>, P/members/<node>), so a name
// with a slash, "..", a newline or a megabyte of text is bad input (exit 2)
// and never reaches etcd.
func checkNodeArg(cmd, node string) error {
	if config.NamePattern.MatchString(node) {
		return nil
	}
	shown := node
	if len(shown) > 64 {
		shown = shown[:64]
	}
	q := strconv.Quote(shown)
	if len(shown) < len(node) {
		q += fmt.Sprintf("… (%d bytes)", len(node))
	}
	return usageError("%s: %s is not a valid node name (%s)", cmd, q, config.NamePattern)
}

// PauseCmd sets the cluster-wide pause.
type PauseCmd struct {
	Reason string `help:"Why reboots are paused (shown by status and in every blocked run's log)." required:""`
}

func (p *PauseCmd) Run(e *Env) error {
	if e.G.DryRun {
		fmt.Fprintf(e.Stdout, "dry run: would pause the cluster: %s\n", p.Reason)
		return nil
	}
	a, err := e.open()
	if err != nil {
		return err
	}
	defer a.Close()
	if err := a.coord.Pause(e.Ctx, p.Reason, e.User); err != nil {
		return err
	}
	fmt.Fprintf(e.Stdout, "cluster %s paused: %s\n", a.cfg.Cluster, p.Reason)
	return nil
}

// ResumeCmd clears the pause.
type ResumeCmd struct{}

func (r *ResumeCmd) Run(e *Env) error {
	if e.G.DryRun {
		fmt.Fprintln(e.Stdout, "dry run: would clear the cluster pause")
		return nil
	}
	a, err := e.open()
	if err != nil {
		return err
	}
	defer a.Close()
	was, err := a.coord.Resume(e.Ctx, e.User)
	if err != nil {
		return err
	}
	if !was {
		fmt.Fprintf(e.Stdout, "cluster %s was not paused\n", a.cfg.Cluster)
		return nil
	}
	fmt.Fprintf(e.Stdout, "cluster %s resumed\n", a.cfg.Cluster)
	return nil
}

// SetMaxCmd sets the cluster-wide max_concurrent.
type SetMaxCmd struct {
	N int `arg:"" help:"Maximum number of nodes rebooting at once (>= 1)."`
}

func (s *SetMaxCmd) Run(e *Env) error {
	if s.N < 1 {
		return usageError("set-max: N must be >= 1, got %d", s.N)
	}
	if e.G.DryRun {
		fmt.Fprintf(e.Stdout, "dry run: would set the cluster-wide max_concurrent to %d\n", s.N)
		return nil
	}
	a, err := e.open()
	if err != nil {
		return err
	}
	defer a.Close()
	if err := a.coord.SetMax(e.Ctx, s.N, e.User); err != nil {
		return err
	}
	fmt.Fprintf(e.Stdout, "cluster %s: max_concurrent = %d (nodes use the smaller of this and their config)\n", a.cfg.Cluster, s.N)
	return nil
}

// ReleaseCmd frees a slot as an operator.
type ReleaseCmd struct {
	Node string `help:"Node whose slot to free (default: this node)." placeholder:"NODE"`
}

func (r *ReleaseCmd) Run(e *Env) error {
	if r.Node != "" {
		if err := checkNodeArg("release --node", r.Node); err != nil {
			return err
		}
	}
	a, err := e.open()
	if err != nil {
		return err
	}
	defer a.Close()
	node := r.Node
	if node == "" {
		node = a.cfg.NodeName
	}
	if e.G.DryRun {
		fmt.Fprintf(e.Stdout, "dry run: would release the slot of %s\n", node)
		return nil
	}
	slot, err := a.coord.Release(e.Ctx, node, e.User)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.Stdout, "released the slot of %s (held since %s: %s)\n", node, slot.AcquiredAt.Format("2006-01-02 15:04:05"), slot.Reason)
	return nil
}

// AckCmd clears the reboot-loop guard.
type AckCmd struct{}

func (c *AckCmd) Run(e *Env) error {
	a, err := e.open()
	if err != nil {
		return err
	}
	defer a.Close()
	if e.G.DryRun {
		fmt.Fprintln(e.Stdout, "dry run: would clear the reboot-loop guard")
		return nil
	}
	cleared, err := a.coord.Ack()
	if err != nil {
		return err
	}
	if len(cleared) == 0 {
		fmt.Fprintln(e.Stdout, "reboot-loop guard was clear")
		return nil
	}
	reasons := make([]string, 0, len(cleared))
	for r := range cleared {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		fmt.Fprintf(e.Stdout, "cleared: %d reboot(s) for %q\n", cleared[r], r)
	}
	return nil
}

// ForgetCmd removes a node's registration.
type ForgetCmd struct {
	Node string `arg:"" help:"Node to forget."`
}

func (f *ForgetCmd) Run(e *Env) error {
	if err := checkNodeArg("forget", f.Node); err != nil {
		return err
	}
	if e.G.DryRun {
		fmt.Fprintf(e.Stdout, "dry run: would forget node %s\n", f.Node)
		return nil
	}
	a, err := e.open()
	if err != nil {
		return err
	}
	defer a.Close()
	if err := a.coord.Forget(e.Ctx, f.Node); err != nil {
		return err
	}
	fmt.Fprintf(e.Stdout, "forgot node %s\n", f.Node)
	return nil
}

// ValidateConfigCmd checks the configuration without side effects.
type ValidateConfigCmd struct {
	Print bool `help:"Print the effective merged configuration."`
}

func (v *ValidateConfigCmd) Run(e *Env) error {
	cfg, err := e.loadConfig()
	if err != nil {
		return err
	}
	log, err := e.logger()
	if err != nil {
		return err
	}
	a, err := e.wire(cfg, log) // builds every adapter: detectors and windows are checked too
	if err != nil {
		return err
	}
	a.Close()
	if v.Print {
		out, err := cfg.Marshal()
		if err != nil {
			return err
		}
		_, err = e.Stdout.Write(out)
		return err
	}
	fmt.Fprintf(e.Stdout, "configuration ok (%d file(s): %q)\n", len(cfg.Files), cfg.Files)
	return nil
}

// VersionCmd prints the version.
type VersionCmd struct{}

func (VersionCmd) Run(e *Env) error {
	fmt.Fprintf(e.Stdout, "clusterrebootd %s (commit %s)\n", version, commit)
	return nil
}
