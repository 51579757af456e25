package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// FuzzLoad writes the fuzz input as a config file and loads it: Load must
// never panic, every error must be ErrInvalid with at least one problem
// naming a file, and every accepted config must print and load back equal.
func FuzzLoad(f *testing.F) {
	if raw, err := os.ReadFile("../../packaging/config.toml"); err == nil {
		f.Add(raw)
	}
	for _, s := range []string{
		"",
		fullConfig,
		"[lock]\nttl = \"10s\"\n[health]\ntimeout = \"20s\"\n",
		"[[detector]]\ntype = \"command\"\ncmd = [\"x\"]\nneeded_exit_codes = [1]\nnot_needed_exit_codes = [0]\n",
		"detector = [{type = \"file\", path = \"/x\"}]\n",
		"[windows]\nallow = [\"bad\"]\ntimezone = \"UTC\"\n",
		"password = \"x\"\n",
		"a = [[[[[[1]]]]]]\n",
		"x = \"\"\"\nabc\"\"\"\"\"\n",
		"\ufeff[etcd]\nendpoints = [\"http://[::1]:2379\"]\n",
		"\x00\x01\x02",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, "config.toml")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		opts := testOpts()
		c, err := Load(SourceFor(path), opts)
		if err != nil {
			if c != nil {
				t.Fatal("config and error")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error is not ErrInvalid: %v", err)
			}
			var e *Error
			if !errors.As(err, &e) || len(e.Problems) == 0 {
				t.Fatalf("error without problems: %v", err)
			}
			for _, p := range e.Problems {
				if p.File == "" || p.Msg == "" || p.Line < 0 {
					t.Fatalf("incomplete problem %+v", p)
				}
			}
			return
		}
		out, err := c.Marshal()
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Fatal(err)
		}
		c2, err := Load(SourceFor(path), opts)
		if err != nil {
			t.Fatalf("printed config does not load: %v\n%s", err, out)
		}
		c.Files, c2.Files = nil, nil
		if !reflect.DeepEqual(c, c2) {
			t.Fatalf("round trip differs:\n%+v\n%+v", c, c2)
		}
	})
}
