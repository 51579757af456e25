package obs

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/coreos/go-systemd/v22/journal"
)

// JournalSender sends one native journald entry; journal.Send has this
// signature. Tests substitute a fake.
type JournalSender func(message string, priority journal.Priority, vars map[string]string) error

// JournalFieldPrefix starts the name of every journald field made from an
// attribute.
const JournalFieldPrefix = "CLUSTERREBOOTD_"

// SyslogIdentifier is the SYSLOG_IDENTIFIER of every journald entry.
const SyslogIdentifier = "clusterrebootd"

// maxJournalField is journald's limit on the length of a field name.
const maxJournalField = 64

// journalHandler is a slog.Handler writing native journald entries. When a
// send fails, the record goes to fallback (a text handler) instead.
type journalHandler struct {
	send     JournalSender
	level    slog.Level
	fields   []journalField // from WithAttrs, already named and formatted
	path     string         // sanitized open groups joined with "_", "" at top level
	redact   bool           // an open group has a sensitive name
	fallback slog.Handler   // text handler mirroring fields and groups
	state    *journalState  // shared by all handlers derived from one NewLogger
}

type journalField struct{ name, value string }

type journalState struct {
	failing atomic.Bool  // the last send failed
	notice  slog.Handler // top-level fallback handler, for the outage notice
}

func newJournalHandler(o LogOptions) *journalHandler {
	send := o.Journal
	if send == nil {
		send = journal.Send
	}
	fb := slog.NewTextHandler(o.Writer, handlerOptions(o.Level))
	return &journalHandler{
		send:     send,
		level:    o.Level,
		fallback: fb,
		state:    &journalState{notice: fb},
	}
}

func (h *journalHandler) Enabled(_ context.Context, l slog.Level) bool {
	return l >= h.level
}

func (h *journalHandler) WithAttrs(as []slog.Attr) slog.Handler {
	if len(as) == 0 {
		return h
	}
	h2 := *h
	h2.fields = append([]journalField(nil), h.fields...)
	for _, a := range as {
		h2.fields = appendJournalAttr(h2.fields, h.path, h.redact, a)
	}
	h2.fallback = h.fallback.WithAttrs(as)
	return &h2
}

func (h *journalHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	h2 := *h
	h2.path = joinPath(h.path, name)
	h2.redact = h.redact || sensitiveKey(name)
	h2.fallback = h.fallback.WithGroup(name)
	return &h2
}

func (h *journalHandler) Handle(ctx context.Context, r slog.Record) error {
	fields := slices.Clip(h.fields) // appending must never write into h.fields' array
	r.Attrs(func(a slog.Attr) bool {
		fields = appendJournalAttr(fields, h.path, h.redact, a)
		return true
	})
	vars := make(map[string]string, len(fields)+1)
	for _, f := range fields {
		vars[f.name] = f.value
	}
	vars["SYSLOG_IDENTIFIER"] = SyslogIdentifier

	sendErr := h.send(r.Message, journalPriority(r.Level), vars)
	if sendErr == nil {
		h.state.failing.Store(false)
		return nil
	}
	if h.state.failing.CompareAndSwap(false, true) && h.state.notice.Enabled(ctx, slog.LevelWarn) {
		n := slog.NewRecord(time.Now(), slog.LevelWarn, "journald unreachable, writing log lines here instead", 0)
		n.AddAttrs(slog.String("error", sendErr.Error()))
		_ = h.state.notice.Handle(ctx, n)
	}
	if err := h.fallback.Handle(ctx, r); err != nil {
		return errors.Join(fmt.Errorf("obs: journal send: %w", sendErr), fmt.Errorf("obs: fallback write: %w", err))
	}
	return nil
}

// journalPriority maps a slog level to a syslog priority.
func journalPriority(l slog.Level) journal.Priority {
	switch {
	case l < slog.LevelInfo:
		return journal.PriDebug
	case l < slog.LevelWarn:
		return journal.PriInfo
	case l < slog.LevelError:
		return journal.PriWarning
	default:
		return journal.PriErr
	}
}

// appendJournalAttr flattens a into fields below the group path.
func appendJournalAttr(fields []journalField, path string, redact bool, a slog.Attr) []journalField {
	a.Value = a.Value.Resolve()
	if a.Value.Kind() == slog.KindGroup {
		as := a.Value.Group()
		if len(as) == 0 {
			return fields
		}
		if a.Key != "" {
			path = joinPath(path, a.Key)
			redact = redact || sensitiveKey(a.Key)
		}
		for _, ga := range as {
			fields = appendJournalAttr(fields, path, redact, ga)
		}
		return fields
	}
	if a.Key == "" {
		return fields
	}
	value := Redacted
	if !redact && !sensitiveKey(a.Key) {
		value = journalValue(a.Value)
	}
	return append(fields, journalField{name: journalFieldName(joinPath(path, a.Key)), value: value})
}

// journalValue formats a resolved, non-group value.
func journalValue(v slog.Value) string {
	switch v.Kind() {
	case slog.KindTime:
		return v.Time().Format(time.RFC3339Nano)
	case slog.KindDuration:
		return v.Duration().String()
	case slog.KindFloat64:
		return strconv.FormatFloat(v.Float64(), 'g', -1, 64)
	default:
		// Strings as is, numbers and bools in Go syntax; for KindAny
		// fmt.Sprint, which uses Error() for errors and String() for
		// Stringers and survives nil receivers.
		return v.String()
	}
}

// joinPath appends the sanitized key to a sanitized group path.
func joinPath(path, key string) string {
	k := sanitizeFieldPart(key)
	if path == "" {
		return k
	}
	return path + "_" + k
}

// sanitizeFieldPart upper-cases key and replaces every character outside
// [A-Z0-9_] with "_".
func sanitizeFieldPart(key string) string {
	var b strings.Builder
	b.Grow(len(key))
	for _, c := range key {
		switch {
		case c >= 'a' && c <= 'z':
			b.WriteRune(c - 'a' + 'A')
		case c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_':
			b.WriteRune(c)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

// journalFieldName turns a sanitized attribute path into a valid journald
// field name: prefixed (so it starts with a letter, never with "_" or a
// digit) and at most 64 characters. Longer names are cut and end in a hash
// of the full name, so distinct long keys stay distinct.
func journalFieldName(path string) string {
	name := JournalFieldPrefix + path
	if len(name) <= maxJournalField {
		return name
	}
	h := fnv.New32a()
	h.Write([]byte(name))
	suffix := fmt.Sprintf("_%08X", h.Sum32())
	return name[:maxJournalField-len(suffix)] + suffix
}
