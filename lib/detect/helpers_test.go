package detect

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// script writes an executable /bin/sh script into dir and returns its path.
func script(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// detectOne builds a Set from one spec (failing the test on a validation
// error) and runs it.
func detectOne(t *testing.T, opts Options) Summary {
	t.Helper()
	s, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return s.Detect(ctx)
}

// checkResult verifies the invariants every Result must satisfy and returns
// the single result of sum.
func checkResult(t *testing.T, sum Summary) Result {
	t.Helper()
	if len(sum.Results) != 1 {
		t.Fatalf("got %d results, want 1", len(sum.Results))
	}
	r := sum.Results[0]
	if (r.Err != nil) != (r.Outcome == Unknown) {
		t.Fatalf("Err %v with outcome %s violates Err != nil iff Unknown", r.Err, r.Outcome)
	}
	if sum.Outcome != r.Outcome {
		t.Fatalf("summary outcome %s, single result outcome %s", sum.Outcome, r.Outcome)
	}
	if r.Reason == "" {
		t.Fatalf("empty reason in %+v", r)
	}
	return r
}
