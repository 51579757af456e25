package detect

import (
	"strconv"
	"strings"
)

// Outcome is what a detector concluded. The zero value is Unknown so that a
// missing or half-built result fails closed.
type Outcome int

const (
	// Unknown: the detector could not decide (error, timeout, unexpected
	// exit code). It blocks any reboot.
	Unknown Outcome = iota
	// NotNeeded: the detector is sure no reboot is needed.
	NotNeeded
	// Needed: the detector is sure a reboot is needed.
	Needed
)

// String returns "unknown", "not-needed" or "needed".
func (o Outcome) String() string {
	switch o {
	case Unknown:
		return "unknown"
	case NotNeeded:
		return "not-needed"
	case Needed:
		return "needed"
	}
	return "Outcome(" + strconv.Itoa(int(o)) + ")"
}

// MarshalText encodes the outcome as its String form (for JSON and logs).
func (o Outcome) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

// Result is the verdict of one detector.
type Result struct {
	Detector string   // "file", "command", "kernel", "needrestart", "auto:debian", ...
	Source   string   // path, or argv joined with spaces
	Outcome  Outcome  //
	ExitCode int      // exit status of the program; -1 when not applicable
	Packages []string // packages behind the verdict, where known
	Reason   string   // human-readable explanation (the error text when Unknown)
	Err      error    // non-nil iff Outcome == Unknown
}

// Summary combines the results of all detectors of a Set.
type Summary struct {
	Outcome Outcome
	Results []Result
	// Reason: when Needed, the reasons of the detectors that said needed,
	// joined with "; "; when Unknown, the error text of the first unknown
	// result; when NotNeeded, the joined reasons of all results.
	Reason string
}

// Combine applies the fail-closed rule to results: any Unknown (or no
// result at all) gives Unknown; otherwise any Needed gives Needed;
// otherwise NotNeeded.
func Combine(results []Result) Summary {
	s := Summary{Results: results}
	if len(results) == 0 {
		s.Outcome = Unknown
		s.Reason = ErrNoDetectors.Error()
		return s
	}
	var needed, all []string
	for _, r := range results {
		switch r.Outcome {
		case Needed:
			needed = append(needed, r.Reason)
		case NotNeeded:
		default: // Unknown and anything out of range
			s.Outcome = Unknown
			if r.Err != nil {
				s.Reason = r.Err.Error()
			} else {
				s.Reason = r.Detector + ": outcome " + r.Outcome.String()
			}
			return s
		}
		all = append(all, r.Reason)
	}
	if len(needed) > 0 {
		s.Outcome = Needed
		s.Reason = strings.Join(needed, "; ")
		return s
	}
	s.Outcome = NotNeeded
	s.Reason = strings.Join(all, "; ")
	return s
}
