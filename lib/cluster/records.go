package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// Node states published in Alive.State.
const (
	StateIdle      = "idle"
	StateWaiting   = "waiting"
	StateHolding   = "holding"
	StateRebooting = "rebooting"
	StateVerifying = "verifying"
	StateBlocked   = "blocked"
	StateError     = "error"
)

// History event kinds (HistoryEvent.Event).
const (
	EventSlotTaken       = "slot-taken"
	EventRebootRequested = "reboot-requested"
	EventCompleted       = "completed"
	EventReleased        = "released"
	EventExpired         = "expired"
	EventAborted         = "aborted"
	EventDryRun          = "dry-run"
	EventRebootFailed    = "reboot-failed"
)

var validStates = map[string]bool{
	StateIdle: true, StateWaiting: true, StateHolding: true, StateRebooting: true,
	StateVerifying: true, StateBlocked: true, StateError: true,
}

var validEvents = map[string]bool{
	EventSlotTaken: true, EventRebootRequested: true, EventCompleted: true, EventReleased: true,
	EventExpired: true, EventAborted: true, EventDryRun: true, EventRebootFailed: true,
}

// Member is the registration of a node at P/members/<node> (no lease).
type Member struct {
	Node         string    `json:"node"`
	RegisteredAt time.Time `json:"registered_at"`
}

// Alive is a node's liveness and last state at P/alive/<node>, written with
// a lease of the alive TTL.
type Alive struct {
	Node           string    `json:"node"`
	BootID         string    `json:"boot_id"`
	Kernel         string    `json:"kernel"`
	Version        string    `json:"version"`
	State          string    `json:"state"`             // one of the State* constants
	Detector       string    `json:"detector"`          // detector that decided
	Reason         string    `json:"reason,omitempty"`  // why a reboot is needed
	Blocked        string    `json:"blocked,omitempty"` // why the node is not rebooting, for humans
	Healthy        bool      `json:"healthy"`
	RebootRequired bool      `json:"reboot_required"`
	MaxConcurrent  int       `json:"max_concurrent"` // the node's configured limit, >= 1
	UpdatedAt      time.Time `json:"updated_at"`
}

// Slot is a durable reboot slot at P/slots/<node> (no lease).
type Slot struct {
	Node          string    `json:"node"`
	BootID        string    `json:"boot_id"` // boot ID before the reboot
	Reason        string    `json:"reason"`
	FenceRevision int64     `json:"fence_revision"` // create revision of the mutex key that wrote it
	AcquiredAt    time.Time `json:"acquired_at"`
	Deadline      time.Time `json:"deadline"`
	HealthySince  time.Time `json:"healthy_since,omitzero"` // zero: not (yet) healthy after boot
	ModRevision   int64     `json:"-"`                      // etcd ModRevision when read or written
}

// Overdue reports whether now is past the slot's deadline.
func (s Slot) Overdue(now time.Time) bool { return now.After(s.Deadline) }

// Pause is the cluster-wide kill switch at P/pause.
type Pause struct {
	Reason string    `json:"reason"`
	By     string    `json:"by"`
	At     time.Time `json:"at"`
}

// Settings are cluster-wide settings at P/settings.
type Settings struct {
	MaxConcurrent int `json:"max_concurrent"` // >= 1
}

// HistoryEvent is one audit record at P/history/<id>, leased history_ttl.
type HistoryEvent struct {
	Event      string    `json:"event"` // one of the Event* constants
	Node       string    `json:"node"`
	Reason     string    `json:"reason,omitempty"`
	By         string    `json:"by,omitempty"`
	BootID     string    `json:"boot_id,omitempty"`
	At         time.Time `json:"at"`
	DurationMS int64     `json:"duration_ms,omitempty"`
	Revision   int64     `json:"-"` // etcd create revision of the record
}

// LockWaiter is one entry of the mutex queue under P/lock/. The queue is
// ordered by CreateRevision; index 0 owns the mutex. Node is empty for an
// anonymous waiter (etcdctl lock, a plain concurrency.Mutex, or a value that
// is not our annotation).
type LockWaiter struct {
	Key            string    `json:"key"`
	CreateRevision int64     `json:"create_revision"`
	Lease          int64     `json:"lease"`
	Node           string    `json:"node,omitempty"`
	PID            int       `json:"pid,omitempty"`
	BootID         string    `json:"boot_id,omitempty"`
	QueuedAt       time.Time `json:"queued_at,omitzero"`
}

// lockAnnotation is the value our sessions put at their mutex key.
type lockAnnotation struct {
	Node     string    `json:"node"`
	PID      int       `json:"pid"`
	BootID   string    `json:"boot_id"`
	QueuedAt time.Time `json:"queued_at"`
}

func (m Member) validate(node string) error {
	if err := nodeMatches(m.Node, node); err != nil {
		return err
	}
	if m.RegisteredAt.IsZero() {
		return errors.New("registered_at missing")
	}
	return nil
}

func (a Alive) validate(node string) error {
	if err := nodeMatches(a.Node, node); err != nil {
		return err
	}
	if !validStates[a.State] {
		return fmt.Errorf("unknown state %q", a.State)
	}
	if a.MaxConcurrent < 1 {
		return fmt.Errorf("max_concurrent %d < 1", a.MaxConcurrent)
	}
	if a.UpdatedAt.IsZero() {
		return errors.New("updated_at missing")
	}
	return nil
}

func (s Slot) validate(node string) error {
	if err := nodeMatches(s.Node, node); err != nil {
		return err
	}
	switch {
	case s.BootID == "":
		return errors.New("boot_id missing")
	case s.FenceRevision <= 0:
		return fmt.Errorf("fence_revision %d <= 0", s.FenceRevision)
	case s.AcquiredAt.IsZero():
		return errors.New("acquired_at missing")
	case s.Deadline.IsZero():
		return errors.New("deadline missing")
	case s.Deadline.Before(s.AcquiredAt):
		return errors.New("deadline before acquired_at")
	}
	return nil
}

func (p Pause) validate() error {
	if p.At.IsZero() {
		return errors.New("at missing")
	}
	return nil
}

func (s Settings) validate() error {
	if s.MaxConcurrent < 1 {
		return fmt.Errorf("max_concurrent %d < 1", s.MaxConcurrent)
	}
	return nil
}

func (h HistoryEvent) validate() error {
	switch {
	case !validEvents[h.Event]:
		return fmt.Errorf("unknown event %q", h.Event)
	case h.Node == "":
		return errors.New("node missing")
	case h.At.IsZero():
		return errors.New("at missing")
	case h.DurationMS < 0:
		return fmt.Errorf("duration_ms %d < 0", h.DurationMS)
	}
	return nil
}

func nodeMatches(got, want string) error {
	if got == "" {
		return errors.New("node missing")
	}
	if got != want {
		return fmt.Errorf("node %q does not match the key's node %q", clip(got), clip(want))
	}
	return nil
}

// clip shortens a value quoted in an error: a corrupt record may be huge.
func clip(s string) string {
	const max = 128
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}

// strictUnmarshal decodes exactly one JSON value into v: unknown fields and
// trailing data are errors.
func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

func decodeMember(key, node string, data []byte) (Member, error) {
	m, ok := fastMember(data)
	if !ok {
		m = Member{}
		if err := strictUnmarshal(data, &m); err != nil {
			return Member{}, &CorruptError{Key: key, Err: err}
		}
	}
	if err := m.validate(node); err != nil {
		return Member{}, &CorruptError{Key: key, Err: err}
	}
	return m, nil
}

func decodeAlive(key, node string, data []byte) (Alive, error) {
	a, ok := fastAlive(data)
	if !ok {
		a = Alive{}
		if err := strictUnmarshal(data, &a); err != nil {
			return Alive{}, &CorruptError{Key: key, Err: err}
		}
	}
	if err := a.validate(node); err != nil {
		return Alive{}, &CorruptError{Key: key, Err: err}
	}
	return a, nil
}

func decodeSlot(key, node string, data []byte, modRev int64) (Slot, error) {
	var s Slot
	if err := strictUnmarshal(data, &s); err != nil {
		return Slot{}, &CorruptError{Key: key, Err: err}
	}
	if err := s.validate(node); err != nil {
		return Slot{}, &CorruptError{Key: key, Err: err}
	}
	s.ModRevision = modRev
	return s, nil
}

func decodePause(key string, data []byte) (Pause, error) {
	var p Pause
	if err := strictUnmarshal(data, &p); err != nil {
		return Pause{}, &CorruptError{Key: key, Err: err}
	}
	if err := p.validate(); err != nil {
		return Pause{}, &CorruptError{Key: key, Err: err}
	}
	return p, nil
}

func decodeSettings(key string, data []byte) (Settings, error) {
	var s Settings
	if err := strictUnmarshal(data, &s); err != nil {
		return Settings{}, &CorruptError{Key: key, Err: err}
	}
	if err := s.validate(); err != nil {
		return Settings{}, &CorruptError{Key: key, Err: err}
	}
	return s, nil
}

func decodeHistory(key string, data []byte, createRev int64) (HistoryEvent, error) {
	var h HistoryEvent
	if err := strictUnmarshal(data, &h); err != nil {
		return HistoryEvent{}, &CorruptError{Key: key, Err: err}
	}
	if err := h.validate(); err != nil {
		return HistoryEvent{}, &CorruptError{Key: key, Err: err}
	}
	h.Revision = createRev
	return h, nil
}

// decodeLockWaiter never fails: any key under P/lock/ is a waiter of the
// mutex, whoever created it. Our annotation fills in who it is; an empty or
// foreign value leaves the waiter anonymous.
func decodeLockWaiter(key string, createRev, lease int64, data []byte) LockWaiter {
	w := LockWaiter{Key: key, CreateRevision: createRev, Lease: lease}
	if len(data) == 0 {
		return w
	}
	// An annotation that is not exactly ours (bad JSON, an impossible node
	// name, a bogus pid) makes the waiter anonymous: it is never shown as
	// one of our nodes, only by its key.
	a, ok := fastAnnotation(data)
	if !ok {
		a = lockAnnotation{}
		if strictUnmarshal(data, &a) != nil {
			return w
		}
	}
	if checkNode(a.Node) != nil || a.PID < 0 {
		return w
	}
	w.Node, w.PID, w.BootID, w.QueuedAt = a.Node, a.PID, a.BootID, a.QueuedAt
	return w
}

// encode marshals a validated record.
func encode(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return string(b), nil
}

func invalid(what string, err error) error {
	return fmt.Errorf("%w: %s: %v", ErrInvalid, what, err)
}
