package coordinator

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func TestFailure(t *testing.T) {
	gateErr := &Error{Code: CodeHealth, Gate: "health-script", Reason: "refused"}
	tests := []struct {
		name string
		err  error
		code Code
		gate string
	}{
		{"lock lost", fmt.Errorf("txn: %w", ErrLockLost), CodeBusy, "step"},
		{"unavailable", fmt.Errorf("dial: %w", ErrUnavailable), CodeEtcd, "step"},
		{"both: lock lost wins", errors.Join(ErrUnavailable, ErrLockLost), CodeBusy, "step"},
		{"corrupt", fmt.Errorf("decode: %w", ErrCorrupt), CodeInternal, "step"},
		{"conflict", ErrConflict, CodeInternal, "step"},
		{"context", context.DeadlineExceeded, CodeInternal, "step"},
		{"plain", errors.New("x"), CodeInternal, "step"},
		{"already classified", fmt.Errorf("wrapped: %w", gateErr), CodeHealth, "health-script"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := failure("step", tc.err)
			if f.Code != tc.code || f.Gate != tc.gate {
				t.Errorf("failure = %+v, want code %d gate %s", f, tc.code, tc.gate)
			}
			if !errors.Is(f, tc.err) && f != gateErr {
				t.Errorf("cause not kept: %v", f)
			}
		})
	}
}

func TestCodeOf(t *testing.T) {
	tests := []struct {
		err  error
		want Code
	}{
		{nil, CodeOK},
		{errors.New("x"), CodeInternal},
		{&Error{Code: CodeDetector}, CodeDetector},
		{fmt.Errorf("run: %w", &Error{Code: CodeBlocked}), CodeBlocked},
		{fmt.Errorf("%w", ErrUnavailable), CodeInternal}, // unclassified sentinel: only failure() maps it
	}
	for _, tc := range tests {
		if got := CodeOf(tc.err); got != tc.want {
			t.Errorf("CodeOf(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

func TestErrorText(t *testing.T) {
	cause := errors.New("cause")
	tests := []struct {
		e    *Error
		want string
	}{
		{&Error{Gate: "g", Reason: "r", Err: cause}, "g: r: cause"},
		{&Error{Gate: "g", Err: cause}, "g: cause"},
		{&Error{Gate: "g", Reason: "r"}, "g: r"},
	}
	for _, tc := range tests {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
	e := &Error{Code: CodeEtcd, Gate: "etcd", Err: cause}
	if !errors.Is(e, cause) || e.Unwrap() != cause || e.ExitCode() != 6 {
		t.Errorf("unwrap/exit code: %v %v %d", errors.Is(e, cause), e.Unwrap(), e.ExitCode())
	}
	if b := blocked(CodeBlocked, "pause", "why"); b.Code != CodeBlocked || b.Gate != "pause" || b.Reason != "why" || b.Err != nil {
		t.Errorf("blocked = %+v", b)
	}
}
