package config

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"

	"github.com/BurntSushi/toml"
)

// Marshal renders the effective configuration as TOML: every section and
// every key, durations as strings ("1m30s"), the detectors as [[detector]]
// tables. Loading the output (with the same Options) yields an equal Config
// apart from Files. validate-config --print shows this.
func (c *Config) Marshal() ([]byte, error) {
	cp := *c
	cp.Detectors = append([]Detector(nil), c.Detectors...)
	normalizeSlices(reflect.ValueOf(&cp).Elem())
	var buf bytes.Buffer
	buf.WriteString("# clusterrebootd effective configuration\n")
	if len(c.Files) > 0 {
		buf.WriteString("# merged from: " + strings.Join(c.Files, ", ") + "\n")
	}
	buf.WriteString("\n")
	enc := toml.NewEncoder(&buf)
	enc.Indent = ""
	if err := enc.Encode(cp); err != nil {
		return nil, fmt.Errorf("config: marshal: %w", err)
	}
	return buf.Bytes(), nil
}

// normalizeSlices replaces nil slices by empty ones so that the encoder
// writes "key = []" instead of leaving the key out.
func normalizeSlices(rv reflect.Value) {
	t := rv.Type()
	for i := 0; i < t.NumField(); i++ {
		if tag := t.Field(i).Tag.Get("toml"); tag == "" || tag == "-" {
			continue
		}
		fv := rv.Field(i)
		switch fv.Kind() {
		case reflect.Slice:
			if fv.IsNil() {
				fv.Set(reflect.MakeSlice(fv.Type(), 0, 0))
			}
			if fv.Type() == detectorsType {
				for j := 0; j < fv.Len(); j++ {
					normalizeSlices(fv.Index(j))
				}
			}
		case reflect.Struct:
			normalizeSlices(fv)
		}
	}
}
