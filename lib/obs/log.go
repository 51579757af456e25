package obs

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// Standard attribute keys (DESIGN §7). Every package logs these facts under
// these names so that `journalctl CLUSTERREBOOTD_EVENT=…` and JSON queries
// work across the whole program.
const (
	KeyNode         = "node"
	KeyEvent        = "event"
	KeyAction       = "action"
	KeyDetector     = "detector"
	KeyHealthStatus = "health_status"
	KeyLockWaitMS   = "lock_wait_ms"
	KeyLeaseID      = "lease_id"
	KeyAttempt      = "attempt"
	KeySessionID    = "session_id"
	KeyReason       = "reason"
)

// Log formats accepted by NewLogger.
const (
	FormatJournal = "journal"
	FormatJSON    = "json"
	FormatText    = "text"
)

// TimeKey is the key of the record time in JSON and text output.
const TimeKey = "ts"

// Redacted replaces the value of every sensitive attribute.
const Redacted = "[REDACTED]"

// ErrUnknownFormat is returned by NewLogger for a format other than
// FormatJournal, FormatJSON or FormatText.
var ErrUnknownFormat = errors.New("obs: unknown log format")

// ErrNoWriter is returned by NewLogger when LogOptions.Writer is nil.
var ErrNoWriter = errors.New("obs: no log writer")

// LogOptions configures NewLogger.
type LogOptions struct {
	// Format is FormatJournal, FormatJSON or FormatText.
	Format string
	// Level is the minimum level logged.
	Level slog.Level
	// Writer receives JSON or text lines; for FormatJournal it is the
	// fallback used when journald cannot be reached. Required.
	Writer io.Writer
	// Journal sends one journald entry; nil means journal.Send from
	// go-systemd. Only used by FormatJournal.
	Journal JournalSender
}

// NewLogger returns a logger writing in o.Format. It fails for an unknown
// format or a nil Writer.
func NewLogger(o LogOptions) (*slog.Logger, error) {
	if o.Writer == nil {
		return nil, ErrNoWriter
	}
	switch o.Format {
	case FormatJournal:
		return slog.New(newJournalHandler(o)), nil
	case FormatJSON:
		return slog.New(slog.NewJSONHandler(o.Writer, handlerOptions(o.Level))), nil
	case FormatText:
		return slog.New(slog.NewTextHandler(o.Writer, handlerOptions(o.Level))), nil
	default:
		return nil, fmt.Errorf("%w: %q (want journal, json or text)", ErrUnknownFormat, o.Format)
	}
}

// Discard returns a logger that drops everything; use it for nil loggers.
func Discard() *slog.Logger {
	return slog.New(slog.DiscardHandler)
}

// OrDiscard returns l, or Discard() when l is nil.
func OrDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return Discard()
	}
	return l
}

// handlerOptions are the options of the JSON and text handlers: level,
// time key renamed to TimeKey, sensitive attributes redacted.
func handlerOptions(level slog.Level) *slog.HandlerOptions {
	return &slog.HandlerOptions{Level: level, ReplaceAttr: replaceAttr}
}

func replaceAttr(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && a.Key == slog.TimeKey && a.Value.Kind() == slog.KindTime {
		a.Key = TimeKey
		return a
	}
	if sensitiveKey(a.Key) || sensitivePath(groups) {
		return slog.String(a.Key, Redacted)
	}
	return a
}

// sensitiveWords are the key fragments whose values are never logged.
var sensitiveWords = []string{"password", "secret", "token", "key_material"}

// sensitiveKey reports whether an attribute called key must be redacted. The
// match ignores case and treats "-" like "_".
func sensitiveKey(key string) bool {
	k := strings.ReplaceAll(strings.ToLower(key), "-", "_")
	for _, w := range sensitiveWords {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}

func sensitivePath(groups []string) bool {
	for _, g := range groups {
		if sensitiveKey(g) {
			return true
		}
	}
	return false
}
