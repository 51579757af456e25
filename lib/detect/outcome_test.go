package detect

import (
	"errors"
	"strings"
	"testing"
)

func TestOutcomeString(t *testing.T) {
	for _, tc := range []struct {
		o    Outcome
		want string
	}{
		{Unknown, "unknown"},
		{NotNeeded, "not-needed"},
		{Needed, "needed"},
		{Outcome(7), "Outcome(7)"},
	} {
		if got := tc.o.String(); got != tc.want {
			t.Errorf("%d.String() = %q, want %q", int(tc.o), got, tc.want)
		}
		b, err := tc.o.MarshalText()
		if err != nil || string(b) != tc.want {
			t.Errorf("%d.MarshalText() = %q, %v", int(tc.o), b, err)
		}
	}
	var zero Outcome
	if zero != Unknown {
		t.Fatalf("zero Outcome is %s, must be unknown", zero)
	}
}

func TestCombine(t *testing.T) {
	needA := Result{Detector: "a", Outcome: Needed, Reason: "a says yes"}
	needB := Result{Detector: "b", Outcome: Needed, Reason: "b says yes"}
	notC := Result{Detector: "c", Outcome: NotNeeded, Reason: "c says no"}
	notD := Result{Detector: "d", Outcome: NotNeeded, Reason: "d says no"}
	unkE := Result{Detector: "e", Outcome: Unknown, Err: errors.New("e broke"), Reason: "e broke"}
	unkF := Result{Detector: "f", Outcome: Unknown, Err: errors.New("f broke"), Reason: "f broke"}
	bogus := Result{Detector: "g", Outcome: Outcome(9), Reason: "?"}
	noErr := Result{Detector: "h", Outcome: Unknown, Reason: "?"}
	for _, tc := range []struct {
		name    string
		in      []Result
		want    Outcome
		wantMsg string
	}{
		{"none", nil, Unknown, ErrNoDetectors.Error()},
		{"one needed", []Result{needA}, Needed, "a says yes"},
		{"one not needed", []Result{notC}, NotNeeded, "c says no"},
		{"one unknown", []Result{unkE}, Unknown, "e broke"},
		{"needed and not needed", []Result{notC, needA, notD}, Needed, "a says yes"},
		{"two needed join", []Result{needA, notC, needB}, Needed, "a says yes; b says yes"},
		{"all not needed join", []Result{notC, notD}, NotNeeded, "c says no; d says no"},
		{"unknown beats needed", []Result{needA, unkE}, Unknown, "e broke"},
		{"unknown beats not needed", []Result{notC, unkE}, Unknown, "e broke"},
		{"first unknown wins", []Result{unkF, needA, unkE}, Unknown, "f broke"},
		{"out of range is unknown", []Result{needA, bogus}, Unknown, "g: outcome Outcome(9)"},
		{"unknown without err", []Result{noErr}, Unknown, "h: outcome unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Combine(tc.in)
			if s.Outcome != tc.want || s.Reason != tc.wantMsg {
				t.Fatalf("Combine = %s %q, want %s %q", s.Outcome, s.Reason, tc.want, tc.wantMsg)
			}
			if len(s.Results) != len(tc.in) {
				t.Fatalf("results not kept: %d vs %d", len(s.Results), len(tc.in))
			}
			if tc.want == Needed && strings.Contains(s.Reason, "says no") {
				t.Fatalf("needed reason mentions not-needed detectors: %q", s.Reason)
			}
		})
	}
}
