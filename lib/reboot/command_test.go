package reboot

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/proc"
)

func TestCommand(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	tests := []struct {
		name    string
		argv    []string
		timeout time.Duration
		wantErr error
		want    string
	}{
		{"ok with reason substituted", []string{"/bin/sh", "-c", `printf '%s|%s' "$1" "$CLUSTERREBOOTD_REASON" > ` + out, "sh", "kernel {reason}"}, time.Second, nil, "kernel linux 6.1|linux 6.1"},
		{"non-zero exit", []string{"/bin/sh", "-c", "echo nope; exit 3"}, time.Second, ErrCommandFailed, ""},
		{"timeout", []string{"/bin/sleep", "5"}, 100 * time.Millisecond, proc.ErrTimeout, ""},
		{"missing binary", []string{"/nonexistent/reboot"}, time.Second, nil, ""},
		{"empty", nil, time.Second, nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			os.Remove(out)
			c := &Command{Argv: tc.argv, Timeout: tc.timeout}
			err := c.Reboot(context.Background(), "linux 6.1")
			switch {
			case tc.want != "":
				if err != nil {
					t.Fatalf("Reboot: %v", err)
				}
				got, _ := os.ReadFile(out)
				if string(got) != tc.want {
					t.Fatalf("got %q, want %q", got, tc.want)
				}
			case tc.wantErr != nil:
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
			default:
				if err == nil {
					t.Fatal("want an error")
				}
			}
			if err != nil && strings.Contains(tc.name, "non-zero") && !strings.Contains(err.Error(), "nope") {
				t.Fatalf("error should carry the output: %v", err)
			}
			// Definite failures may free the slot; a timeout may not.
			wantRefused := tc.name == "non-zero exit" || tc.name == "missing binary" || tc.name == "empty"
			if err != nil && errors.Is(err, ErrRefused) != wantRefused {
				t.Fatalf("errors.Is(err, ErrRefused) = %v, want %v (err %v)", !wantRefused, wantRefused, err)
			}
		})
	}
}
