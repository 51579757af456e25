package cluster

import (
	"context"
	"log/slog"
	"maps"
	"slices"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// newZapLogger routes the etcd client's zap logging into log at debug level:
// the client's retry warnings are noise next to the errors we return.
func newZapLogger(log *slog.Logger) *zap.Logger {
	return zap.New(&zapCore{log: log.With("component", "etcd-client")})
}

type zapCore struct {
	log    *slog.Logger
	fields []zapcore.Field
}

func (c *zapCore) Enabled(zapcore.Level) bool {
	return c.log.Enabled(context.Background(), slog.LevelDebug)
}

func (c *zapCore) With(fields []zapcore.Field) zapcore.Core {
	return &zapCore{log: c.log, fields: append(append([]zapcore.Field(nil), c.fields...), fields...)}
}

func (c *zapCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *zapCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range c.fields {
		f.AddTo(enc)
	}
	for _, f := range fields {
		f.AddTo(enc)
	}
	attrs := make([]any, 0, 2*len(enc.Fields)+2)
	attrs = append(attrs, "zap_level", e.Level.String())
	for _, k := range slices.Sorted(maps.Keys(enc.Fields)) {
		attrs = append(attrs, k, enc.Fields[k])
	}
	c.log.Debug(e.Message, attrs...)
	return nil
}

func (c *zapCore) Sync() error { return nil }
