package coordinator

import (
	"errors"
	"fmt"
)

// Code is a process exit code of DESIGN §6.
type Code int

const (
	CodeOK       Code = 0 // nothing needed, holder started or running, reboot requested
	CodeInternal Code = 1 // unexpected internal error
	CodeConfig   Code = 2 // configuration invalid
	CodeHealth   Code = 3 // blocked by the health script or a built-in cluster policy
	CodeBusy     Code = 4 // lock or slots busy, or lock lost before the fenced write
	CodeBlocked  Code = 5 // kill switch, pause, window, rate limit or inhibitor
	CodeEtcd     Code = 6 // etcd unreachable or timed out
	CodeDetector Code = 7 // detector error
)

// Sentinel errors the adapters wrap so that the coordinator can classify
// failures without importing them (cmd maps lib/cluster's errors onto these).
var (
	ErrLockLost    = errors.New("coordinator: lock lost")
	ErrUnavailable = errors.New("coordinator: etcd unavailable")
	ErrCorrupt     = errors.New("coordinator: corrupt cluster state")
	ErrConflict    = errors.New("coordinator: concurrent modification")
	// ErrRebootRefused: the reboot action definitely did not start (the
	// command failed, logind said no). Any other error from Rebooter is
	// uncertain: the reboot may be on its way.
	ErrRebootRefused = errors.New("coordinator: reboot refused")
)

// Error is a run's outcome when it did not end in "ok". Gate names the gate
// or step that decided ("pause", "window", "health-script", "etcd", ...).
type Error struct {
	Code   Code
	Gate   string
	Reason string
	Err    error
}

func (e *Error) Error() string {
	switch {
	case e.Err != nil && e.Reason != "":
		return fmt.Sprintf("%s: %s: %v", e.Gate, e.Reason, e.Err)
	case e.Err != nil:
		return fmt.Sprintf("%s: %v", e.Gate, e.Err)
	default:
		return fmt.Sprintf("%s: %s", e.Gate, e.Reason)
	}
}

func (e *Error) Unwrap() error { return e.Err }

// ExitCode makes *Error usable by main's exit-code mapping.
func (e *Error) ExitCode() int { return int(e.Code) }

// blocked builds the Error of a gate that said no.
func blocked(code Code, gate, reason string) *Error {
	return &Error{Code: code, Gate: gate, Reason: reason}
}

// failure classifies an error from an adapter: the step names what was being
// done. etcd trouble is CodeEtcd, a lost lock CodeBusy, the rest internal.
func failure(step string, err error) *Error {
	var ce *Error
	if errors.As(err, &ce) {
		return ce
	}
	code := CodeInternal
	switch {
	case errors.Is(err, ErrLockLost):
		code = CodeBusy
	case errors.Is(err, ErrUnavailable):
		code = CodeEtcd
	}
	return &Error{Code: code, Gate: step, Err: err}
}

// CodeOf returns the exit code for err: 0 for nil, the Code of an *Error, 1
// otherwise.
func CodeOf(err error) Code {
	if err == nil {
		return CodeOK
	}
	var ce *Error
	if errors.As(err, &ce) {
		return ce.Code
	}
	return CodeInternal
}
