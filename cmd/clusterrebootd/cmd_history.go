package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	co "github.com/clusterrebootd/clusterrebootd/lib/coordinator"
)

// HistoryCmd lists the cluster's coordinated reboots from P/history/.
type HistoryCmd struct {
	Node  string `help:"Only this node's reboots." placeholder:"NODE"`
	Since string `help:"Only reboots with a record at or after this time: a duration back from now (90m, 36h, 7d) or a time (RFC 3339, or YYYY-MM-DD in local time). Default: everything kept (history_ttl)." placeholder:"WHEN"`
	JSON  bool   `help:"Print JSON for scripts." name:"json"`
}

// historySchema is the version of the JSON shape of `history --json`.
const historySchema = 1

// historyJSON is the document `history --json` prints.
type historyJSON struct {
	Schema  int         `json:"schema"`
	Cluster string      `json:"cluster"`
	Node    string      `json:"node,omitempty"`
	Since   time.Time   `json:"since,omitzero"`
	Reboots []co.Reboot `json:"reboots"`
}

func (h *HistoryCmd) Run(e *Env) error {
	if h.Node != "" {
		if err := checkNodeArg("history --node", h.Node); err != nil {
			return err
		}
	}
	since, err := parseSince(h.Since, time.Now())
	if err != nil {
		return usageError("history --since: %v", err)
	}
	a, err := e.open()
	if err != nil {
		return err
	}
	defer a.Close()
	reboots, err := a.coord.RebootHistory(e.Ctx, h.Node, since)
	if err != nil {
		return err
	}
	if h.JSON {
		if reboots == nil {
			reboots = []co.Reboot{}
		}
		return writeJSON(e.Stdout, historyJSON{Schema: historySchema, Cluster: a.cfg.Cluster, Node: h.Node, Since: since, Reboots: reboots})
	}
	printHistory(e.Stdout, a.cfg.Cluster, since, reboots)
	return nil
}

// parseSince reads --since: "" (everything), a duration back from now
// (Go syntax, plus whole days as "7d"), an RFC 3339 time or a local date.
// A time before 1970 means everything (the history holds nothing older).
func parseSince(s string, now time.Time) (time.Time, error) {
	t, err := parseSinceRaw(strings.TrimSpace(s), now)
	if err != nil || t.Before(time.Unix(0, 0)) {
		return time.Time{}, err
	}
	return t, nil
}

func parseSinceRaw(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	shown := s
	if len(shown) > 64 {
		shown = shown[:64] + "…"
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.Atoi(days); err == nil && n >= 0 {
			if n > 1e6 { // more than 2700 years: everything, without overflowing
				return time.Time{}, nil
			}
			return now.AddDate(0, 0, -n), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("%q: a duration back from now must not be negative", shown)
		}
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if t, err := time.ParseInLocation("2006-01-02", s, time.Local); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%q is neither a duration (90m, 36h, 7d), an RFC 3339 time nor a date (YYYY-MM-DD)", shown)
}

func printHistory(w io.Writer, cluster string, since time.Time, reboots []co.Reboot) {
	if len(reboots) == 0 {
		if since.IsZero() {
			fmt.Fprintf(w, "cluster %s: no reboots in the history\n", cluster)
		} else {
			fmt.Fprintf(w, "cluster %s: no reboots since %s\n", cluster, since.Format(historyTime))
		}
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "REQUESTED\tNODE\tDOWN\tRESULT\tREASON")
	for _, r := range reboots {
		start := r.RequestedAt
		if start.IsZero() {
			start = r.SlotTakenAt
		}
		when := "-"
		if !start.IsZero() {
			when = start.Local().Format(historyTime)
		}
		down := "-"
		if r.Result != co.ResultInProgress && r.Result != co.ResultUnknown && (r.DurationMS > 0 || !start.IsZero()) {
			down = (time.Duration(r.DurationMS) * time.Millisecond).Round(time.Second).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", when, r.Node, down, resultText(r), oneLine(r.Reason))
	}
	tw.Flush()
}

// historyTime is how history prints times (local time with its zone).
const historyTime = "2006-01-02 15:04:05 MST"

// resultText is the RESULT column: the result, and who ended it where it
// was not the node itself.
func resultText(r co.Reboot) string {
	switch r.Result {
	case co.ResultReleased:
		if r.By != "" {
			return "released by " + r.By
		}
		return "released by an operator"
	case co.ResultExpired:
		if r.By != "" {
			return "expired (freed by " + r.By + ")"
		}
	case co.ResultInProgress:
		return "in progress"
	case co.ResultDryRun:
		return "dry run"
	case co.ResultRebootFailed:
		return "reboot failed"
	case co.ResultUnknown:
		return "unknown (no end recorded)"
	}
	return r.Result
}
