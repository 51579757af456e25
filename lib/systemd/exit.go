package systemd

import (
	"context"
	"fmt"
	"time"

	sd "github.com/coreos/go-systemd/v22/dbus"
)

// cldExited is ExecMainCode for a main process that exited (CLD_EXITED):
// ExecMainStatus is then its exit status, not a signal number.
const cldExited = 1

// JobError is a start job that ended with a result other than "done". It
// wraps ErrJob. When the holder's main process exited before it was ready,
// Status is its exit status, so the caller can pass on the holder's own
// verdict (a config error, etcd unreachable) instead of a bare "failed".
type JobError struct {
	Unit   string
	Result string // the job's result: "failed", "timeout", "canceled", ...
	// Exited is true when systemd reported a main process that exited
	// (rather than one killed by a signal, or none at all); Status is then
	// its exit status.
	Exited bool
	Status int
	// ServiceResult is the service's Result ("exit-code", "signal",
	// "timeout", "protocol", ...); "" when it could not be read.
	ServiceResult string
}

func (e *JobError) Error() string {
	msg := fmt.Sprintf("%v: %s start job result %q", ErrJob, e.Unit, e.Result)
	switch {
	case e.Exited:
		msg += fmt.Sprintf(": the holder exited with status %d before it was ready", e.Status)
	case e.ServiceResult != "":
		msg += fmt.Sprintf(": service result %q", e.ServiceResult)
	}
	return msg + " (journalctl -u " + e.Unit + ")"
}

func (e *JobError) Unwrap() error { return ErrJob }

// ExitStatus is the holder's exit status when it exited before it was
// ready, 0 otherwise.
func (e *JobError) ExitStatus() int {
	if e.Exited {
		return e.Status
	}
	return 0
}

// jobError reads why the unit's start failed. The unit stays loaded while
// failed (CollectMode is left at "inactive"), so its main-process status is
// still there; every read is best effort and bounded by d.
func jobError(ctx context.Context, c *sd.Conn, unit, result string, d time.Duration) *JobError {
	e := &JobError{Unit: unit, Result: result}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	get := func(name string) any {
		p, err := c.GetServicePropertyContext(ctx, unit, name)
		if err != nil || p == nil {
			return nil
		}
		return p.Value.Value()
	}
	if s, ok := get("Result").(string); ok {
		e.ServiceResult = s
	}
	code, _ := get("ExecMainCode").(int32)
	status, ok := get("ExecMainStatus").(int32)
	if ok && code == cldExited && status != 0 {
		e.Exited, e.Status = true, int(status)
	}
	return e
}
